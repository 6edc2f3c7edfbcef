use serde_json::json;

use super::{err, ok, put, workdir};

#[tokio::test]
async fn numbers_lines_like_cat_n() {
    let (_d, root) = workdir();
    put(&root, "a.txt", "alpha\nbeta\n\tgamma\r\n");
    let out = ok("Read", json!({"file_path": "a.txt"}), &root).await;
    assert_eq!(
        out.content,
        "     1\talpha\n     2\tbeta\n     3\t\tgamma\n"
    );
    assert!(!out.changed_files);
    let abs = ok("Read", json!({"file_path": root.join("a.txt")}), &root).await;
    assert_eq!(abs.content, out.content);
}

#[tokio::test]
async fn offset_and_limit_page_through_the_file() {
    let (_d, root) = workdir();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    put(&root, "ten.txt", &text);
    let out = ok(
        "Read",
        json!({"file_path": "ten.txt", "offset": 4, "limit": 2}),
        &root,
    )
    .await;
    assert!(
        out.content.starts_with("     4\tline 4\n     5\tline 5\n"),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("offset 6"),
        "continuation note: {}",
        out.content
    );
    // Numbers given as strings are accepted.
    let out = ok(
        "Read",
        json!({"file_path": "ten.txt", "offset": "10", "limit": "5"}),
        &root,
    )
    .await;
    assert_eq!(out.content, "    10\tline 10\n");
}

#[tokio::test]
async fn default_limit_is_2000_lines() {
    let (_d, root) = workdir();
    let text: String = (1..=2500).map(|i| format!("{i}\n")).collect();
    put(&root, "long.txt", &text);
    let out = ok("Read", json!({"file_path": "long.txt"}), &root).await;
    assert!(out.content.contains("  2000\t2000\n"));
    assert!(!out.content.contains("  2001\t"));
    assert!(
        out.content.contains("offset 2001"),
        "{}",
        &out.content[out.content.len() - 200..]
    );
}

#[tokio::test]
async fn offset_past_the_end_says_how_long_the_file_is() {
    let (_d, root) = workdir();
    put(&root, "three.txt", "a\nb\nc\n");
    let out = ok(
        "Read",
        json!({"file_path": "three.txt", "offset": 50}),
        &root,
    )
    .await;
    assert!(out.content.contains("only 3 lines"), "{}", out.content);
    assert!(out.content.contains("offset 50"), "{}", out.content);
}

#[tokio::test]
async fn empty_file_is_reported_as_empty() {
    let (_d, root) = workdir();
    put(&root, "empty.txt", "");
    let out = ok("Read", json!({"file_path": "empty.txt"}), &root).await;
    assert!(out.content.contains("empty"), "{}", out.content);
}

#[tokio::test]
async fn long_lines_are_cut_with_a_marker() {
    let (_d, root) = workdir();
    put(&root, "wide.txt", format!("{}\nshort\n", "é".repeat(5000)));
    let out = ok("Read", json!({"file_path": "wide.txt"}), &root).await;
    let first = out.content.lines().next().unwrap();
    assert_eq!(first.matches('é').count(), 2000);
    assert!(first.contains("line cut at 2000 characters"), "{first}");
    assert!(out.content.contains("     2\tshort"));
}

#[tokio::test]
async fn a_huge_single_line_file_is_not_loaded_whole() {
    let (_d, root) = workdir();
    // 24 MiB without a newline: the output stays small.
    put(&root, "huge.txt", vec![b'x'; 24 * 1024 * 1024]);
    let out = ok("Read", json!({"file_path": "huge.txt"}), &root).await;
    assert!(
        out.content.len() < 4000,
        "output is {} bytes",
        out.content.len()
    );
    assert!(out.content.contains("line cut"));
}

#[tokio::test]
async fn a_huge_file_reads_a_window_from_its_middle() {
    let (_d, root) = workdir();
    let text: String = (1..=300_000).map(|i| format!("row {i}\n")).collect();
    put(&root, "rows.txt", &text);
    let out = ok(
        "Read",
        json!({"file_path": "rows.txt", "offset": 250_000, "limit": 3}),
        &root,
    )
    .await;
    assert!(
        out.content
            .starts_with("250000\trow 250000\n250001\trow 250001\n250002\trow 250002\n"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn binary_files_are_refused() {
    let (_d, root) = workdir();
    put(&root, "blob.bin", b"abc\0def\x01\x02");
    let e = err("Read", json!({"file_path": "blob.bin"}), &root).await;
    assert!(
        e.contains("Read") && e.contains("blob.bin") && e.contains("binary"),
        "{e}"
    );
    put(&root, "doc.pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n");
    let e = err("Read", json!({"file_path": "doc.pdf"}), &root).await;
    assert!(e.contains("PDF"), "{e}");
}

#[tokio::test]
async fn invalid_utf8_is_shown_lossily_with_a_note() {
    let (_d, root) = workdir();
    put(&root, "latin1.txt", b"caf\xe9\nok\n");
    let out = ok("Read", json!({"file_path": "latin1.txt"}), &root).await;
    assert!(
        out.content.starts_with("     1\tcaf\u{FFFD}\n     2\tok\n"),
        "{}",
        out.content
    );
    assert!(out.content.contains("not valid UTF-8"), "{}", out.content);
}

#[tokio::test]
async fn images_are_returned_as_image_blocks() {
    let (_d, root) = workdir();
    let mut png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    png.extend_from_slice(&32u32.to_be_bytes());
    png.extend_from_slice(&16u32.to_be_bytes());
    png.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
    put(&root, "icon.png", &png);
    let out = ok("Read", json!({"file_path": "icon.png"}), &root).await;
    assert!(out.content.contains("PNG image"), "{}", out.content);
    assert!(out.content.contains("32x16"), "{}", out.content);
    assert!(
        out.content.contains(&format!("{} bytes", png.len())),
        "{}",
        out.content
    );
    let data = out.data.unwrap();
    assert_eq!(data["mime_type"], "image/png");
    assert_eq!(data["width"], 32);
    assert_eq!(out.images.len(), 1);
    assert_eq!(out.images[0].media_type, "image/png");
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(&out.images[0].data)
        .expect("base64");
    assert_eq!(decoded, png, "the whole file, exactly");
    assert_eq!(
        out.images[0].block(),
        kaji_protocol::ContentBlock::Image {
            media_type: "image/png".into(),
            data: out.images[0].data.clone()
        }
    );

    put(&root, "anim.gif", b"GIF89a\x05\x00\x07\x00\x00\x00\x00;");
    let out = ok("Read", json!({"file_path": "anim.gif"}), &root).await;
    assert!(
        out.content.contains("GIF image, 5x7 pixels"),
        "{}",
        out.content
    );
    assert_eq!(out.images[0].media_type, "image/gif");
}

#[tokio::test]
async fn a_huge_or_corrupt_image_is_a_clear_error() {
    let (_d, root) = workdir();
    let mut png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    png.extend_from_slice(&4000u32.to_be_bytes());
    png.extend_from_slice(&4000u32.to_be_bytes());
    put(&root, "huge.png", &png);
    // 100 MB, sparse: nothing is written but the header.
    std::fs::OpenOptions::new()
        .write(true)
        .open(root.join("huge.png"))
        .and_then(|f| f.set_len(100 * 1024 * 1024))
        .expect("grow");
    let e = err("Read", json!({"file_path": "huge.png"}), &root).await;
    assert!(e.contains("PNG image of 104857600 bytes"), "{e}");
    assert!(e.contains("KAJI_READ_IMAGE_MAX_BYTES"), "{e}");

    put(&root, "broken.png", b"\x89PNG\r\n\x1a\ngarbage");
    let e = err("Read", json!({"file_path": "broken.png"}), &root).await;
    assert!(e.contains("header is damaged"), "{e}");
    put(&root, "broken.jpg", [0xFF, 0xD8, 0xFF, 0x00, 0x01]);
    let e = err("Read", json!({"file_path": "broken.jpg"}), &root).await;
    assert!(e.contains("JPEG image but its header is damaged"), "{e}");

    // Larger than the providers take: refused before it is attached.
    let mut wide = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    wide.extend_from_slice(&9000u32.to_be_bytes());
    wide.extend_from_slice(&10u32.to_be_bytes());
    put(&root, "wide.png", &wide);
    let e = err("Read", json!({"file_path": "wide.png"}), &root).await;
    assert!(e.contains("9000x10 pixels"), "{e}");
}

#[tokio::test]
async fn a_directory_is_a_clear_error() {
    let (_d, root) = workdir();
    std::fs::create_dir(root.join("src")).unwrap();
    let e = err("Read", json!({"file_path": "src"}), &root).await;
    assert!(e.contains("is a directory") && e.contains("Glob"), "{e}");
}

#[tokio::test]
async fn a_missing_file_is_a_clear_error() {
    let (_d, root) = workdir();
    let e = err("Read", json!({"file_path": "nope/missing.rs"}), &root).await;
    assert!(
        e.contains("Read") && e.contains(&*root.join("nope/missing.rs").to_string_lossy()),
        "{e}"
    );
    assert!(e.contains("does not exist"), "{e}");
}

#[tokio::test]
async fn bad_arguments_are_clear_errors() {
    let (_d, root) = workdir();
    let e = err("Read", json!({"path": "a.txt"}), &root).await;
    assert!(e.contains("Read") && e.contains("file_path"), "{e}");
    let e = err(
        "Read",
        json!({"file_path": "a.txt", "offset": "ten"}),
        &root,
    )
    .await;
    assert!(e.contains("integer"), "{e}");
    let e = err("Read", json!({"file_path": ""}), &root).await;
    assert!(e.contains("file_path is empty"), "{e}");
}

#[cfg(unix)]
#[tokio::test]
async fn a_fifo_is_refused_without_blocking() {
    let (_d, root) = workdir();
    super::mkfifo(&root.join("pipe"));
    // Guard only: opening the FIFO would block forever; the tool must refuse
    // it from its metadata, well within this bound.
    let e = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        err("Read", json!({"file_path": "pipe"}), &root),
    )
    .await
    .expect("Read blocked on a FIFO");
    assert!(
        e.contains("named pipe") && e.contains("not a regular file"),
        "{e}"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn devices_are_refused() {
    let (_d, root) = workdir();
    let e = err("Read", json!({"file_path": "/dev/zero"}), &root).await;
    assert!(e.contains("character device"), "{e}");
}

#[tokio::test]
async fn dot_dot_paths_resolve_lexically() {
    let (_d, root) = workdir();
    put(&root, "a/b.txt", "hello\n");
    let out = ok("Read", json!({"file_path": "a/../a/./b.txt"}), &root).await;
    assert_eq!(out.content, "     1\thello\n");
}

#[cfg(unix)]
#[tokio::test]
async fn symlinked_files_are_read_through() {
    let (_d, root) = workdir();
    let (_o, outside) = workdir();
    put(&outside, "target.txt", "far away\n");
    std::os::unix::fs::symlink(outside.join("target.txt"), root.join("link.txt")).unwrap();
    let out = ok("Read", json!({"file_path": "link.txt"}), &root).await;
    assert_eq!(out.content, "     1\tfar away\n");
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn proc_files_with_zero_size_are_read() {
    let (_d, root) = workdir();
    let out = ok("Read", json!({"file_path": "/proc/self/status"}), &root).await;
    assert!(out.content.contains("\tName:"), "{}", out.content);
}
