//! `kaji doctor` through the real binary: the sandbox layers it reports
//! match what the kernel does, key names appear without their values, the
//! settings files it found are listed, and the exit code follows the
//! sandbox's support.

use assert_cmd::Command;
use serde_json::Value;

#[test]
fn doctor_json_reports_the_sandbox_settings_and_key_names_only() {
    let home = tempfile::tempdir().expect("tempdir");
    std::fs::write(home.path().join("config.toml"), "").expect("user settings");
    let work = tempfile::tempdir().expect("tempdir");
    let out = Command::cargo_bin("kaji")
        .expect("kaji binary")
        .current_dir(work.path())
        .env("KAJI_HOME", home.path())
        .env("KAJI_DOCTOR_TEST_API_KEY", "sk-doctor-secret-value")
        .args(["doctor", "--json"])
        .output()
        .expect("kaji doctor runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("sk-doctor-secret-value"), "{stdout}");
    let report: Value = serde_json::from_str(&stdout).expect("one JSON object");

    let support = kaji_sandbox::probe();
    assert_eq!(report["sandbox"]["landlock_abi"], support.landlock_abi);
    assert_eq!(
        report["sandbox"]["user_namespaces"],
        support.user_namespaces
    );
    assert_eq!(report["sandbox"]["seccomp"], support.seccomp);
    assert_eq!(report["ok"], support.is_complete());
    assert_eq!(
        out.status.code(),
        Some(if support.is_complete() { 0 } else { 1 })
    );

    let keys = report["provider_keys"].as_array().expect("provider_keys");
    assert!(
        keys.iter().any(|k| k == "KAJI_DOCTOR_TEST_API_KEY"),
        "{keys:?}"
    );
    let files = report["settings_files"].as_array().expect("settings_files");
    let user = home.path().join("config.toml").display().to_string();
    assert!(
        files
            .iter()
            .any(|f| f["path"] == user.as_str() && f["found"] == true),
        "{files:?}"
    );
    assert_eq!(report["would_enforce"]["mode"], "workspace-write");
    assert_eq!(report["would_enforce"]["network"], false);
    assert!(
        report["git_version"]
            .as_str()
            .is_some_and(|v| v.starts_with("git version"))
    );
    assert_eq!(report["stdout_is_terminal"], false);
    // Looking changes nothing: no .kaji/ appears in the working directory.
    assert!(!work.path().join(".kaji").exists());
}
