//! Issue 28 through the real binary, the real kernel sandbox and the
//! scripted model: a hostile model's `Bash` commands cannot reach Unix
//! sockets outside the workspace, cannot plant settings in `$KAJI_HOME` or
//! write the shared temp dir, and cannot read the provider key from
//! `/proc/<kaji>/environ`.
//!
//! The sandboxed cases first ask `kaji_sandbox::probe()`; on a kernel that
//! lacks a layer they fail naming it unless `KAJI_SANDBOX_TESTS_OPTIONAL=1`.

use std::path::{Path, PathBuf};

use kaji_test_support::Turn;
use serde_json::json;

use crate::common::{Wire, done, kaji, scripted, serve};

const KEY: &str = "sk-test-key-that-must-stay-private";

fn sandbox_available() -> bool {
    let support = kaji_sandbox::probe();
    if support.is_complete() {
        return true;
    }
    let why = format!("this kernel lacks sandbox layers: {:?}", support.problems);
    if std::env::var_os("KAJI_SANDBOX_TESTS_OPTIONAL").is_some() {
        eprintln!("SKIPPED: {why}");
        return false;
    }
    panic!("{why}; set KAJI_SANDBOX_TESTS_OPTIONAL=1 to skip these tests on such a kernel");
}

struct Dirs {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    kaji_home: PathBuf,
    work: PathBuf,
    outside: PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = std::fs::canonicalize(tmp.path()).expect("canonical");
    let (home, work, outside) = (base.join("home"), base.join("work"), base.join("outside"));
    let kaji_home = base.join("kaji-home");
    for d in [&home, &work, &outside, &kaji_home] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    Dirs {
        _tmp: tmp,
        home,
        kaji_home,
        work,
        outside,
    }
}

/// `kaji exec` in `d.work` with the scripted model running `commands` with
/// `Bash`, one a turn, then finishing.
async fn run_bash(d: &Dirs, extra: &[&str], commands: &[String]) -> String {
    let mut turns: Vec<Turn> = commands
        .iter()
        .map(|c| Turn::tool_call("Bash", json!({"command": c})))
        .collect();
    turns.push(done("done"));
    let server = serve(turns).await;
    let mut cmd = kaji(&d.home);
    cmd.env("KAJI_HOME", &d.kaji_home)
        .args(["exec", "--json", "--no-checkpoints", "-C"])
        .arg(&d.work);
    scripted(&mut cmd, &server, Wire::Anthropic)
        .env("ANTHROPIC_API_KEY", KEY)
        .args(extra)
        .arg("go");
    let out = cmd.output().await.expect("run kaji");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    text
}

/// The real Python interpreter (not a version manager's shim).
fn python() -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 is needed for the socket test");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A command that tries to connect to `addr` (`@name`: abstract) and
/// appends `<label> CONNECTED` or `<label> REFUSED …` to `result`.
fn connect(python: &str, label: &str, addr: &str, result: &Path) -> String {
    let code = "import socket,sys\n\
                s=socket.socket(socket.AF_UNIX)\n\
                a=sys.argv[2]\n\
                a='\\0'+a[1:] if a.startswith('@') else a\n\
                try:\n s.connect(a); print(sys.argv[1],'CONNECTED')\n\
                except OSError as e:\n print(sys.argv[1],'REFUSED',e)\n";
    format!(
        "{python} -c \"{code}\" {label} '{addr}' >> {}",
        result.display()
    )
}

#[tokio::test]
async fn sockets_outside_the_workspace_are_unreachable_from_bash() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    if !sandbox_available() {
        return;
    }
    let d = dirs();
    let pathname = d.outside.join("tmux-like.sock");
    let _l1 = UnixListener::bind(&pathname).expect("bind");
    let name = format!("kaji-escape-{}", std::process::id());
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("name");
    let _l2 = UnixListener::bind_addr(&addr).expect("bind abstract");
    let py = python();
    let result = d.work.join("result.txt");
    let path_text = pathname.display().to_string();
    let abstract_text = format!("@{name}");

    // Under yolo (no sandbox) both answer: the test can tell.
    run_bash(
        &d,
        &["--yolo"],
        &[
            connect(&py, "path", &path_text, &result),
            connect(&py, "abstract", &abstract_text, &result),
        ],
    )
    .await;
    let free = std::fs::read_to_string(&result).expect("result");
    assert_eq!(free.matches("CONNECTED").count(), 2, "{free}");
    std::fs::remove_file(&result).expect("rm");

    let out = run_bash(
        &d,
        &[],
        &[
            connect(&py, "path", &path_text, &result),
            connect(&py, "abstract", &abstract_text, &result),
        ],
    )
    .await;
    let confined = std::fs::read_to_string(&result).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(confined.contains("path REFUSED"), "{confined}");
    assert!(confined.contains("abstract REFUSED"), "{confined}");
}

#[tokio::test]
async fn kaji_home_and_the_shared_temp_dir_stay_unwritable() {
    if !sandbox_available() {
        return;
    }
    let d = dirs();
    // $KAJI_HOME inside the workspace, as when both sit under a writable
    // root: it is protected as a whole, not only its existing children.
    let d = Dirs {
        kaji_home: d.work.join("kaji-home"),
        ..d
    };
    std::fs::create_dir_all(&d.kaji_home).expect("mkdir");
    let shared = std::env::temp_dir().join(format!("kaji-escape-{}", std::process::id()));
    let config = d.kaji_home.join("config.toml");
    let plant = format!(
        "printf '[[hooks.SessionStart]]\\ncommand = \"touch PWN\"\\n' > {} ; \
         touch {} ; echo mine > \"$TMPDIR/scratch\" && cat \"$TMPDIR/scratch\" > own-tmp.txt",
        config.display(),
        shared.display()
    );
    let out = run_bash(&d, &[], &[plant]).await;
    assert!(
        !config.exists(),
        "a settings file was planted in $KAJI_HOME: {out}"
    );
    assert!(!shared.exists(), "the shared temp dir was writable: {out}");
    let own = std::fs::read_to_string(d.work.join("own-tmp.txt")).unwrap_or_default();
    assert_eq!(
        own.trim(),
        "mine",
        "the command's own temp dir must work: {out}"
    );
}

#[tokio::test]
async fn the_provider_key_is_not_in_kajis_proc_environ() {
    let d = dirs();
    let dump = d.work.join("environ.txt");
    let command = format!("tr '\\0' '\\n' < /proc/$PPID/environ > {}", dump.display());
    let out = run_bash(&d, &["--yolo"], &[command]).await;
    let environ = std::fs::read_to_string(&dump).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(environ.contains("PATH="), "not kaji's environ: {environ}");
    assert!(!environ.contains(KEY), "the key is readable: {environ}");
}
