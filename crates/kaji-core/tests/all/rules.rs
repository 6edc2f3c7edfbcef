//! Rule file discovery: order, `.clinerules` folders, global rules, caps
//! and bad files.

use std::path::PathBuf;

use kaji_core::rules::{RULE_FILE_CAP_BYTES, RuleFiles, RuleScope};

use crate::common::{Layout, write};

fn paths(rules: &RuleFiles) -> Vec<PathBuf> {
    rules.files.iter().map(|f| f.path.clone()).collect()
}

#[test]
fn nothing_found_means_no_section() {
    let l = Layout::new();
    let rules = RuleFiles::discover(&l.home, &l.sub);
    assert!(rules.is_empty());
    assert!(rules.warnings.is_empty());
    assert_eq!(rules.to_system_section(), None);
}

#[test]
fn global_first_then_root_down_to_cwd_and_fixed_names_within_a_directory() {
    let l = Layout::new();
    write(&l.home.join("rules/b-style.md"), "global b");
    write(&l.home.join("rules/a-safety.md"), "global a");
    write(&l.home.join("rules/notes.txt"), "not markdown");
    write(&l.sub.join("AGENTS.md"), "sub agents");
    write(&l.repo.join(".clinerules"), "root clinerules");
    write(&l.repo.join("CLAUDE.md"), "root claude");
    write(&l.repo.join("AGENTS.md"), "root agents");
    write(&l.repo.join("crates/CLAUDE.md"), "middle claude");
    // Above the repository root: not read.
    write(
        &l.repo.parent().expect("parent").join("AGENTS.md"),
        "outside",
    );

    let rules = RuleFiles::discover(&l.home, &l.sub);
    assert!(rules.warnings.is_empty(), "{:?}", rules.warnings);
    assert_eq!(
        paths(&rules),
        vec![
            l.home.join("rules/a-safety.md"),
            l.home.join("rules/b-style.md"),
            l.repo.join("AGENTS.md"),
            l.repo.join("CLAUDE.md"),
            l.repo.join(".clinerules"),
            l.repo.join("crates/CLAUDE.md"),
            l.sub.join("AGENTS.md"),
        ]
    );
    let scopes: Vec<RuleScope> = rules.files.iter().map(|f| f.scope).collect();
    assert_eq!(&scopes[..2], &[RuleScope::Global, RuleScope::Global]);
    assert!(scopes[2..].iter().all(|s| *s == RuleScope::Project));

    let section = rules.to_system_section().expect("section");
    let order: Vec<usize> = [
        "global a",
        "global b",
        "root agents",
        "root claude",
        "root clinerules",
        "middle claude",
        "sub agents",
    ]
    .iter()
    .map(|t| {
        section
            .find(t)
            .unwrap_or_else(|| panic!("{t} missing from {section}"))
    })
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{section}");
    assert!(
        section.contains(&format!("## {}", l.repo.join("AGENTS.md").display())),
        "{section}"
    );
    assert!(!section.contains("outside"));
    assert!(!section.contains("not markdown"));
}

#[test]
fn a_clinerules_folder_contributes_its_markdown_files_sorted() {
    let l = Layout::new();
    write(&l.repo.join(".clinerules/02-tests.md"), "second");
    write(&l.repo.join(".clinerules/01-style.md"), "first");
    write(&l.repo.join(".clinerules/draft.txt"), "ignored");
    write(&l.repo.join(".clinerules/nested/deep.md"), "not followed");
    let rules = RuleFiles::discover(&l.home, &l.repo);
    assert_eq!(
        paths(&rules),
        vec![
            l.repo.join(".clinerules/01-style.md"),
            l.repo.join(".clinerules/02-tests.md")
        ]
    );
}

#[test]
fn outside_a_repository_only_the_working_directory_counts() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path().join("home");
    let outer = tmp.path().join("outer");
    let cwd = outer.join("cwd");
    write(&outer.join("AGENTS.md"), "outer");
    write(&cwd.join("CLAUDE.md"), "here");
    let rules = RuleFiles::discover(&home, &cwd);
    assert_eq!(paths(&rules), vec![cwd.join("CLAUDE.md")]);
}

#[test]
fn long_files_are_capped_with_a_note() {
    let l = Layout::new();
    let mut text = "a".repeat(RULE_FILE_CAP_BYTES - 1);
    text.push('é'); // two bytes straddling the cap
    text.push_str(&"b".repeat(1000));
    write(&l.repo.join("AGENTS.md"), &text);
    let rules = RuleFiles::discover(&l.home, &l.repo);
    assert!(rules.warnings.is_empty(), "{:?}", rules.warnings);
    let file = &rules.files[0];
    assert!(file.truncated);
    assert_eq!(file.size, text.len() as u64);
    assert_eq!(file.text, "a".repeat(RULE_FILE_CAP_BYTES - 1));
    let section = rules.to_system_section().expect("section");
    assert!(
        section.contains(&format!(
            "only its first {RULE_FILE_CAP_BYTES} bytes are included"
        )),
        "note missing"
    );
    assert!(!section.contains('b'.to_string().repeat(10).as_str()));

    write(&l.repo.join("AGENTS.md"), "a".repeat(RULE_FILE_CAP_BYTES));
    let rules = RuleFiles::discover(&l.home, &l.repo);
    assert!(!rules.files[0].truncated, "exactly the cap is not cut");
}

#[test]
fn invalid_utf8_and_unreadable_files_are_skipped_with_a_warning() {
    let l = Layout::new();
    write(&l.repo.join("AGENTS.md"), b"ok so far \xff\xfe bad");
    write(&l.repo.join("CLAUDE.md"), "fine");
    // A .clinerules that is neither a readable file nor a directory of
    // files: a dangling symlink.
    std::os::unix::fs::symlink(l.repo.join("missing-target"), l.repo.join(".clinerules"))
        .expect("symlink");
    let rules = RuleFiles::discover(&l.home, &l.repo);
    assert_eq!(paths(&rules), vec![l.repo.join("CLAUDE.md")]);
    assert_eq!(rules.warnings.len(), 1, "{:?}", rules.warnings);
    assert!(
        rules.warnings[0].contains("AGENTS.md"),
        "{:?}",
        rules.warnings
    );
    assert!(rules.warnings[0].contains("UTF-8"), "{:?}", rules.warnings);
}

#[test]
fn a_file_reached_twice_is_read_once_and_empty_files_are_skipped() {
    let l = Layout::new();
    write(&l.repo.join("AGENTS.md"), "shared rules");
    std::os::unix::fs::symlink("AGENTS.md", l.repo.join("CLAUDE.md")).expect("symlink");
    write(&l.sub.join("AGENTS.md"), "  \n");
    let rules = RuleFiles::discover(&l.home, &l.sub);
    assert_eq!(paths(&rules), vec![l.repo.join("AGENTS.md")]);
}

#[test]
fn claude_code_memory_files_and_imports_follow_their_importer() {
    let l = Layout::new();
    let user_home = l.home.join("user");
    write(&user_home.join(".claude/CLAUDE.md"), "user memory");
    write(
        &l.repo.join("CLAUDE.md"),
        "see @docs/a.md and `@not-this.md`",
    );
    write(&l.repo.join("docs/a.md"), "A imports @b.md");
    write(&l.repo.join("docs/b.md"), "B imports @a.md (a cycle)");
    write(&l.repo.join(".claude/CLAUDE.md"), "dot claude");
    write(
        &l.repo.join("CLAUDE.local.md"),
        "local notes @../outside.md",
    );
    write(&l.home.parent().expect("tmp").join("outside.md"), "secret");
    let rules = RuleFiles::discover_with_home(&l.home, &l.repo, Some(&user_home));
    let names: Vec<String> = rules
        .files
        .iter()
        .map(|f| {
            let by = f
                .imported_by
                .as_ref()
                .map(|p| format!(" <- {}", p.file_name().unwrap().to_string_lossy()))
                .unwrap_or_default();
            format!(
                "{} {}{by}",
                f.scope.as_str(),
                f.path.file_name().unwrap().to_string_lossy()
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            "user CLAUDE.md",
            "project CLAUDE.md",
            "project a.md <- CLAUDE.md",
            "project b.md <- a.md",
            "project CLAUDE.md",
            "local CLAUDE.local.md",
        ]
    );
    let warnings = rules.warnings.join("\n");
    assert!(warnings.contains("import @a.md"), "{warnings}");
    assert!(warnings.contains("cycle"), "{warnings}");
    assert!(warnings.contains("@../outside.md"), "{warnings}");
    assert!(warnings.contains("outside the repository"), "{warnings}");
    assert_eq!(rules.warnings.len(), 2, "{warnings}");
    let section = rules.to_system_section().expect("section");
    assert!(section.contains("imported by"), "{section}");
    assert!(!section.contains("secret"), "{section}");
}

#[test]
fn imports_stop_at_five_hops_and_binary_files_are_refused() {
    let l = Layout::new();
    write(&l.repo.join("AGENTS.md"), "@i1.md");
    for n in 1..=7 {
        write(
            &l.repo.join(format!("i{n}.md")),
            format!("hop {n} @i{}.md", n + 1),
        );
    }
    write(&l.repo.join("CLAUDE.md"), "@bin.dat");
    write(&l.repo.join("bin.dat"), b"ab\0cd");
    let rules = RuleFiles::discover_with_home(&l.home, &l.repo, None);
    let imported = rules
        .files
        .iter()
        .filter(|f| f.imported_by.is_some())
        .count();
    assert_eq!(imported, 5, "{:?}", paths(&rules));
    let warnings = rules.warnings.join("\n");
    assert!(warnings.contains("deeper than 5"), "{warnings}");
    assert!(warnings.contains("binary"), "{warnings}");
}

#[test]
fn a_project_rule_symlinked_outside_the_repository_or_into_kaji_home_is_skipped() {
    let l = Layout::new();
    let secret = l
        .repo
        .parent()
        .expect("parent")
        .join("elsewhere/id_ed25519");
    write(&secret, "-----BEGIN OPENSSH PRIVATE KEY-----\n");
    std::os::unix::fs::symlink(&secret, l.repo.join("AGENTS.md")).expect("symlink");
    write(&l.home.join("rules/private.md"), "kept private\n");
    std::os::unix::fs::symlink(l.home.join("rules/private.md"), l.sub.join("CLAUDE.md"))
        .expect("symlink");
    write(&l.sub.join(".clinerules/ok.md"), "Use tabs.\n");
    // A symlink that stays inside the repository is fine.
    std::os::unix::fs::symlink(l.sub.join(".clinerules/ok.md"), l.repo.join("CLAUDE.md"))
        .expect("symlink");

    let rules = RuleFiles::discover(&l.home, &l.sub);
    let text = rules.to_system_section().unwrap_or_default();
    assert!(!text.contains("PRIVATE KEY"), "{text}");
    assert!(text.contains("Use tabs."), "{text}");
    assert_eq!(rules.warnings.len(), 2, "{:?}", rules.warnings);
    assert!(
        rules.warnings[0].contains("outside the project"),
        "{:?}",
        rules.warnings
    );
    assert!(
        rules.warnings[1].contains("keeps private"),
        "{:?}",
        rules.warnings
    );
}
