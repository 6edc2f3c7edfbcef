//! `kaji tasks` on a PostgreSQL list (a throwaway server from
//! kaji-test-support), through the real binary: URL resolution, usage
//! errors, migrate, export/import between backends, and passwords that
//! never show.

use kaji_test_support::pg::{PG_PASSWORD, PgServer};
use serde_json::Value;

use crate::common::{kaji_at, output};

fn server() -> &'static PgServer {
    match PgServer::shared() {
        Ok(s) => s,
        Err(e) => panic!("the PostgreSQL fixture did not start: {e}"),
    }
}

fn kaji(home: &std::path::Path, env_url: Option<&str>, args: &[&str]) -> (i32, String, String) {
    let mut cmd = kaji_at(home);
    cmd.arg("tasks").args(args);
    if let Some(url) = env_url {
        cmd.env("KAJI_TASK_LIST_URL", url);
    }
    output(&mut cmd)
}

#[test]
fn a_list_on_the_database_round_trips_through_export_and_import() {
    let home = tempfile::tempdir().unwrap();
    let list = format!("cli-{}", std::process::id());
    let url = server().url(&list);
    let (code, _, err) = kaji(home.path(), None, &["--list", &url, "create", "first"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains(PG_PASSWORD), "{err}");
    let (code, _, err) = kaji(
        home.path(),
        Some(&url),
        &["create", "second", "--blocked-by", "1"],
    );
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = kaji(
        home.path(),
        Some(&url),
        &["claim", "--owner", "a", "--json"],
    );
    assert_eq!(code, 0);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["id"], 1);
    // Nothing was written as a file list named after the URL.
    assert!(
        !home.path().join("tasks").exists()
            || std::fs::read_dir(home.path().join("tasks"))
                .unwrap()
                .count()
                == 0
    );

    let (code, export, _) = kaji(home.path(), Some(&url), &["export"]);
    assert_eq!(code, 0);
    let file = home.path().join("export.json");
    std::fs::write(&file, &export).unwrap();
    let (code, _, err) = kaji(
        home.path(),
        None,
        &["--list", "copy", "import", file.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    let (_, listed, _) = kaji(home.path(), None, &["--list", "copy", "list", "--json"]);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed["tasks"][1]["blockedBy"], serde_json::json!([1]));
    assert_eq!(listed["tasks"][0]["owner"], "a");
    // And back into a second database list.
    let url2 = server().url(&format!("{list}-back"));
    let (code, _, err) = kaji(
        home.path(),
        Some(&url2),
        &["import", file.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    let (_, again, _) = kaji(home.path(), Some(&url2), &["export"]);
    let again: Value = serde_json::from_str(&again).unwrap();
    assert_eq!(
        again["tasks"],
        serde_json::from_str::<Value>(&export).unwrap()["tasks"]
    );

    let (code, out, _) = kaji(home.path(), Some(&url), &["migrate"]);
    assert_eq!(code, 0);
    assert!(out.contains("up to date"), "{out}");
}

#[test]
fn a_url_without_a_list_is_a_usage_error_and_hides_the_password() {
    let home = tempfile::tempdir().unwrap();
    let url = format!(
        "postgres://kaji:{PG_PASSWORD}@127.0.0.1:{}/postgres?sslmode=disable",
        server().port()
    );
    let out = kaji_at(home.path())
        .args(["tasks", "--list", &url, "list"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no list name") && !err.contains(PG_PASSWORD),
        "{err}"
    );
}

#[test]
fn a_database_that_is_down_is_named_without_its_password() {
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = kaji_test_support::pg::url_at(port, "x");
    let (code, _, err) = kaji(home.path(), Some(&url), &["list"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("127.0.0.1:{port}")) && !err.contains(PG_PASSWORD),
        "{err}"
    );
}

#[test]
fn the_task_list_url_setting_chooses_the_database_for_kaji_tasks() {
    let home = tempfile::tempdir().unwrap();
    let list = format!("setting-{}", std::process::id());
    std::fs::write(
        home.path().join("config.toml"),
        format!("task_list_url = \"{}\"\n", server().url(&list)),
    )
    .unwrap();
    let (code, _, err) = kaji(home.path(), None, &["create", "from the setting"]);
    assert_eq!(code, 0, "{err}");
    // It is on the database (read through the URL), not in a file list.
    let (code, out, err) = kaji(home.path(), Some(&server().url(&list)), &["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("from the setting"), "{out}");
    assert!(!home.path().join("tasks/default").exists());
}
