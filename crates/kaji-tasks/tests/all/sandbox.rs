//! The sandbox against the real kernel: real commands spawned through
//! `process` with a `SandboxPolicy`, checked by what they could and could
//! not do to real files and sockets.
//!
//! Each test first asks `kaji_sandbox::probe()` whether this kernel has
//! every layer. When it does not, the test fails naming the missing layer,
//! unless `KAJI_SANDBOX_TESTS_OPTIONAL=1` is set, in which case it says on
//! stderr that it was skipped and why.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use kaji_sandbox::{SandboxMode, SandboxPolicy, default_deny_read};
use kaji_tasks::RuntimeTaskRegistry;
use kaji_tasks::process::{self, SpawnOptions};
use kaji_tasks::runtime::RuntimeConfig;
use kaji_test_support::fixtures::git;

/// Whether the sandbox can be tested here (see the module docs).
fn sandbox_available() -> bool {
    let support = kaji_sandbox::probe();
    if support.is_complete() {
        return true;
    }
    let why = format!(
        "this kernel lacks sandbox layers: {:?} (Landlock ABI {})",
        support.problems, support.landlock_abi
    );
    if std::env::var_os("KAJI_SANDBOX_TESTS_OPTIONAL").is_some() {
        eprintln!("SKIPPED: {why}");
        return false;
    }
    panic!("{why}; set KAJI_SANDBOX_TESTS_OPTIONAL=1 to skip these tests on such a kernel");
}

/// A workspace (a git repository), a directory outside it and a home.
struct Fixture {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    home: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = std::fs::canonicalize(dir.path()).expect("canonical");
    let (ws, outside, home) = (base.join("ws"), base.join("outside"), base.join("home"));
    for d in [&ws, &outside, &home] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    git(&ws, &["init", "-q"]);
    Fixture {
        _dir: dir,
        ws,
        outside,
        home,
    }
}

/// The workspace-write policy for `f.ws`, with only the workspace writable
/// (the temp dir, which holds `outside`, is left out) and `f.home`'s
/// secrets denied.
fn policy(f: &Fixture, network: bool) -> SandboxPolicy {
    let mut p = SandboxPolicy::workspace(SandboxMode::WorkspaceWrite, &f.ws);
    p.writable_roots.retain(|r| r.starts_with(&f.ws));
    p.deny_read = default_deny_read(Some(&f.home), None);
    p.network = network;
    p
}

/// Runs `script` with the shell in `cwd`, confined by `policy`; returns
/// its exit code and output.
async fn run(policy: Option<&SandboxPolicy>, cwd: &Path, script: &str) -> (i32, String) {
    let mut cmd = process::shell_command(script);
    cmd.current_dir(cwd).stdin(Stdio::null());
    let options = SpawnOptions::sandboxed(policy.cloned().map(Arc::new));
    let (mut child, mut reader) =
        process::spawn_with_merged_output_with(cmd, &options).expect("spawn");
    let output = tokio::task::spawn_blocking(move || {
        let mut text = String::new();
        reader.read_to_string(&mut text).expect("read output");
        text
    })
    .await
    .expect("reader");
    let status = child.wait().await.expect("wait");
    (status.code().unwrap_or(-1), output)
}

#[tokio::test]
async fn writes_inside_succeed_and_outside_fail_with_a_sandbox_error() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    let p = policy(&f, false);
    let (code, out) = run(Some(&p), &f.ws, "echo in > inside.txt && mkdir -p sub/dir").await;
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        std::fs::read_to_string(f.ws.join("inside.txt"))
            .ok()
            .as_deref(),
        Some("in\n")
    );

    let script = format!("echo out > {}/escaped.txt", f.outside.display());
    let (code, out) = run(Some(&p), &f.ws, &script).await;
    assert_ne!(code, 0, "{out}");
    assert!(!f.outside.join("escaped.txt").exists());
    let note = kaji_sandbox::denial_note(p.mode, &out);
    assert!(
        note.as_deref().is_some_and(
            |n| n.starts_with("this may have been blocked by the sandbox (workspace-write): ")
        ),
        "no sandbox note for {out:?}"
    );

    // The same write unconfined succeeds: the refusal was the sandbox's.
    let (code, out) = run(None, &f.ws, &script).await;
    assert_eq!(code, 0, "{out}");
}

#[tokio::test]
async fn read_only_mode_refuses_writes_in_the_workspace() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    let mut p = policy(&f, false);
    p.mode = SandboxMode::ReadOnly;
    let (code, out) = run(Some(&p), &f.ws, "cat .git/HEAD && echo x > new.txt").await;
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("ref: refs/heads/"), "{out}");
    assert!(!f.ws.join("new.txt").exists());
}

#[tokio::test]
async fn git_config_and_hooks_stay_read_only_inside_the_workspace() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    let p = policy(&f, false);
    let before = std::fs::read_to_string(f.ws.join(".git/config")).expect("config");

    let (code, out) = run(Some(&p), &f.ws, "echo x >> .git/config").await;
    assert_ne!(code, 0, "{out}");
    assert!(kaji_sandbox::denial_note(p.mode, &out).is_some(), "{out}");
    let (code, out) = run(Some(&p), &f.ws, "git config core.fsmonitor 'touch PWN'").await;
    assert_ne!(code, 0, "{out}");
    assert!(kaji_sandbox::denial_note(p.mode, &out).is_some(), "{out}");
    let (code, out) = run(Some(&p), &f.ws, "echo 'touch PWN' > .git/hooks/pre-commit").await;
    assert_ne!(code, 0, "{out}");
    assert!(kaji_sandbox::denial_note(p.mode, &out).is_some(), "{out}");
    let (code, out) = run(Some(&p), &f.ws, "echo 'yolo' > .kaji/config.toml").await;
    assert_ne!(code, 0, "{out}");
    assert!(kaji_sandbox::denial_note(p.mode, &out).is_some(), "{out}");
    assert_eq!(
        std::fs::read_to_string(f.ws.join(".git/config")).ok(),
        Some(before)
    );
    assert!(!f.ws.join(".kaji/config.toml").exists());

    // Nor can the protected files be swapped for copies by moving their
    // directories away.
    let swap = "mv .git .git-old && mkdir .git && cp -a .git-old/. .git/ \
                && git config core.fsmonitor 'touch PWN'";
    let (code, out) = run(Some(&p), &f.ws, swap).await;
    assert_ne!(code, 0, "{out}");
    assert!(kaji_sandbox::denial_note(p.mode, &out).is_some(), "{out}");
    let (code, out) = run(Some(&p), &f.ws, "mv .kaji .kaji-old").await;
    assert_ne!(code, 0, "{out}");
    assert!(f.ws.join(".git/HEAD").exists() && f.ws.join(".kaji").is_dir());

    // Other writes to .git still work, and a following (unconfined) git
    // call runs no planted command.
    let (code, out) = run(Some(&p), &f.ws, "echo hi > a && git add a").await;
    assert_eq!(code, 0, "{out}");
    git(&f.ws, &["status", "--short"]);
    assert!(!f.ws.join("PWN").exists());
}

#[tokio::test]
async fn kaji_worktrees_stay_writable_inside_the_read_only_kaji_dir() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    std::fs::create_dir_all(f.ws.join(".kaji/worktrees/a")).expect("mkdir");
    let p = policy(&f, false);
    let (code, out) = run(Some(&p), &f.ws, "echo w > .kaji/worktrees/a/file").await;
    assert_eq!(code, 0, "{out}");
    let (code, out) = run(Some(&p), &f.ws, "echo w > .kaji/other.toml").await;
    assert_ne!(code, 0, "{out}");
}

#[tokio::test]
async fn denied_directories_cannot_be_read() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    std::fs::create_dir_all(f.home.join(".ssh")).expect("mkdir");
    std::fs::write(f.home.join(".ssh/id_test"), "PRIVATE-KEY-MATERIAL\n").expect("plant");
    let p = policy(&f, false);
    let script = format!("cat {}/.ssh/id_test", f.home.display());
    let (code, out) = run(Some(&p), &f.ws, &script).await;
    assert_ne!(code, 0, "{out}");
    assert!(!out.contains("PRIVATE-KEY-MATERIAL"), "{out}");
    let (code, out) = run(None, &f.ws, &script).await;
    assert_eq!((code, out.as_str()), (0, "PRIVATE-KEY-MATERIAL\n"));
}

#[tokio::test]
async fn tcp_needs_the_network_setting() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let script = format!("echo hello > /dev/tcp/127.0.0.1/{port}");

    let (code, out) = run(Some(&policy(&f, false)), &f.ws, &script).await;
    assert_ne!(code, 0, "{out}");
    assert!(
        listener.accept().is_err(),
        "a connection got through: {out}"
    );

    let (code, out) = run(Some(&policy(&f, true)), &f.ws, &script).await;
    assert_eq!(code, 0, "{out}");
    // The client connected and exited, so the connection is queued.
    let (mut stream, _) = listener.accept().expect("the sandboxed client connected");
    stream.set_nonblocking(false).expect("blocking");
    let mut got = String::new();
    stream.read_to_string(&mut got).expect("read");
    assert_eq!(got, "hello\n");
}

#[tokio::test]
async fn children_inherit_the_sandbox() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    let script = format!(
        "sh -c 'sh -c \"echo x > {0}/grandchild\"'; (echo y > {0}/subshell) & wait; \
         python3 -c 'open(\"{0}/py\", \"w\")' 2>&1; true",
        f.outside.display()
    );
    let (_, out) = run(Some(&policy(&f, false)), &f.ws, &script).await;
    for name in ["grandchild", "subshell", "py"] {
        assert!(!f.outside.join(name).exists(), "{name} escaped: {out}");
    }
}

#[tokio::test]
async fn background_tasks_run_in_the_sandbox() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    let registry = RuntimeTaskRegistry::new(&f.home.join("kaji"), "s1", RuntimeConfig::default())
        .expect("registry");
    let script = format!(
        "echo in > bg-inside; echo out > {}/bg-outside",
        f.outside.display()
    );
    let options = SpawnOptions::sandboxed(Some(Arc::new(policy(&f, false))));
    let info = registry
        .start_local_bash_with(&script, "bg", &f.ws, "test", options)
        .await
        .expect("start");
    let done = registry
        .wait_finished(info.id.as_str())
        .await
        .expect("wait");
    assert_ne!(done.exit_code, Some(0), "{done:?}");
    assert!(f.ws.join("bg-inside").exists());
    assert!(!f.outside.join("bg-outside").exists());
}

#[tokio::test]
async fn cargo_test_of_a_tiny_crate_runs_in_the_default_policy() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    std::fs::write(
        f.ws.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .expect("manifest");
    std::fs::create_dir_all(f.ws.join("src")).expect("mkdir");
    std::fs::write(
        f.ws.join("src/lib.rs"),
        "#[test]\nfn adds() { assert_eq!(1 + 1, 2); }\n",
    )
    .expect("lib");
    // The default policy: the workspace and the temp dir writable.
    let mut p = SandboxPolicy::workspace(SandboxMode::WorkspaceWrite, &f.ws);
    p.deny_read = default_deny_read(Some(&f.home), None);
    let (code, out) = run(Some(&p), &f.ws, "cargo test -q --offline 2>&1").await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 passed"), "{out}");
}

#[tokio::test]
async fn kaji_settings_are_unreadable_but_the_run_dir_is_writable() {
    if !sandbox_available() {
        return;
    }
    let f = fixture();
    let kaji_home = f.home.join(".kaji");
    let run_dir = kaji_home.join("runs/s1");
    std::fs::create_dir_all(&run_dir).expect("mkdir");
    std::fs::write(kaji_home.join("config.toml"), "SETTINGS-CONTENT\n").expect("settings");
    let mut p = SandboxPolicy::for_session(
        SandboxMode::WorkspaceWrite,
        &f.ws,
        &kaji_home,
        Some(&run_dir),
        &[f.outside.display().to_string()],
        false,
    );
    p.writable_roots
        .retain(|r| r.starts_with(&f.ws) || r.starts_with(&run_dir));
    std::fs::write(f.outside.join("denied.txt"), "DENIED-CONTENT\n").expect("plant");
    let script = format!(
        "echo ok > {run}/note && cat {run}/note; cat {home}/config.toml; cat {out}/denied.txt; true",
        run = run_dir.display(),
        home = kaji_home.display(),
        out = f.outside.display(),
    );
    let (_, out) = run(Some(&p), &f.ws, &script).await;
    assert!(out.starts_with("ok\n"), "{out}");
    assert!(!out.contains("SETTINGS-CONTENT"), "{out}");
    assert!(!out.contains("DENIED-CONTENT"), "{out}");
    assert!(run_dir.join("note").exists());
}
