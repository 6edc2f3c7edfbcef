use super::*;

#[test]
fn ids_have_the_documented_shape() {
    for t in RuntimeTaskType::ALL {
        let id = RuntimeTaskId::generate(t);
        assert_eq!(id.as_str().len(), 9);
        assert_eq!(RuntimeTaskId::parse(id.as_str()), Some(id.clone()));
        assert_eq!(id.task_type(), Some(t));
    }
    assert_eq!(RuntimeTaskId::parse("5"), None);
    assert_eq!(RuntimeTaskId::parse("b9x4k2m1"), None);
    assert_eq!(RuntimeTaskId::parse("B9x4k2m1p"), None);
    assert_eq!(RuntimeTaskId::parse("b9x4k2m1pq"), None);
    assert!(RuntimeTaskId::parse("b9x4k2m1p").is_some());
}

#[test]
fn prefixes_are_distinct() {
    let mut seen: Vec<char> = RuntimeTaskType::ALL.iter().map(|t| t.id_prefix()).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 7);
}

#[test]
fn incomplete_utf8_is_held_back() {
    assert_eq!(incomplete_utf8_tail(b"abc"), 0);
    assert_eq!(incomplete_utf8_tail("é".as_bytes()), 0);
    assert_eq!(incomplete_utf8_tail(&"é".as_bytes()[..1]), 1);
    assert_eq!(incomplete_utf8_tail(&"€".as_bytes()[..2]), 2);
    assert_eq!(incomplete_utf8_tail(&"😀".as_bytes()[..3]), 3);
    assert_eq!(incomplete_utf8_tail("a😀".as_bytes()), 0);
}

#[test]
fn last_chars_counts_characters() {
    assert_eq!(start_of_last_chars(b"abcdef", 2), 4);
    assert_eq!(start_of_last_chars(b"ab", 5), 0);
    let s = "aéé";
    assert_eq!(start_of_last_chars(s.as_bytes(), 2), 1);
}

#[test]
fn notice_text_names_everything() {
    let n = FinishedNotice {
        id: RuntimeTaskId("b123456ab".to_string()),
        task_type: RuntimeTaskType::LocalBash,
        description: "run tests".to_string(),
        status: RuntimeTaskStatus::Failed,
        exit_code: Some(2),
        unread_bytes: 42,
        owner: MAIN_CALLER.to_string(),
        output_path: PathBuf::from("/x/b123456ab.output"),
        result: None,
    };
    let text = n.to_prompt_text();
    assert!(text.contains("b123456ab"), "{text}");
    assert!(text.contains("run tests"), "{text}");
    assert!(text.contains("failed with exit code 2"), "{text}");
    assert!(text.contains("42 bytes"), "{text}");
}
