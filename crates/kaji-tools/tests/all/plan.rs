//! Plan tools: their controls, and `save_plan`'s naming and refusal to
//! overwrite.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kaji_tools::plan::{plan_slug, project_plans_dir, save_plan, save_project_plan};
use kaji_tools::{ToolAccess, ToolContext, ToolControl, ToolError, builtin_tools};
use serde_json::json;

/// 2024-03-05 07:08:09 UTC.
fn when() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_709_622_489)
}

#[test]
fn slugs_come_from_the_first_line() {
    assert_eq!(
        plan_slug("# Add retry to the HTTP client\n\n1. …"),
        "add-retry-to-the-http-client"
    );
    assert_eq!(
        plan_slug("\n\n  ## Plan: fix #42 (parser)!  \nmore"),
        "plan-fix-42-parser"
    );
    assert_eq!(plan_slug("Ünïcode—only ✓ words"), "n-code-only-words");
    assert_eq!(plan_slug("日本語"), "plan");
    assert_eq!(plan_slug(""), "plan");
    let long = plan_slug("# A very long title that goes on and on well past forty characters");
    assert!(long.len() <= 40, "{long}");
    assert_eq!(long, "a-very-long-title-that-goes-on-and-on-we");
    let edge = plan_slug("abcdefghijklmnopqrstuvwxyzabcdefghijklm nop");
    assert_eq!(
        edge, "abcdefghijklmnopqrstuvwxyzabcdefghijklm",
        "no trailing dash"
    );
}

#[test]
fn save_plan_names_the_file_by_time_and_title() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = "# Add retry\n\n1. Wrap the call\n2. Test it\n";
    let path = save_plan(dir.path(), plan, when()).expect("saved");
    assert_eq!(
        path,
        dir.path().join(".kaji/plans/20240305-070809-add-retry.md")
    );
    assert_eq!(std::fs::read_to_string(&path).expect("read"), plan);
}

#[test]
fn save_plan_never_overwrites() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = save_plan(dir.path(), "# Same\nfirst", when()).expect("saved");
    let second = save_plan(dir.path(), "# Same\nsecond", when()).expect("saved");
    let third = save_plan(dir.path(), "# Same\nthird", when()).expect("saved");
    assert_eq!(
        first.file_name().and_then(|n| n.to_str()),
        Some("20240305-070809-same.md")
    );
    assert_eq!(
        second.file_name().and_then(|n| n.to_str()),
        Some("20240305-070809-same-2.md")
    );
    assert_eq!(
        third.file_name().and_then(|n| n.to_str()),
        Some("20240305-070809-same-3.md")
    );
    assert_eq!(
        std::fs::read_to_string(&first).expect("read"),
        "# Same\nfirst\n"
    );
    assert_eq!(
        std::fs::read_to_string(&second).expect("read"),
        "# Same\nsecond\n"
    );
}

#[test]
fn save_plan_reports_where_it_failed() {
    let dir = tempfile::tempdir().expect("tempdir");
    // `.kaji` is a file, so the plans directory cannot be created.
    std::fs::write(dir.path().join(".kaji"), "not a directory").expect("write");
    match save_plan(dir.path(), "# X", when()) {
        Err(ToolError::Io { path, .. }) => {
            assert!(path.ends_with(".kaji/plans"), "{}", path.display())
        }
        other => panic!("expected Io error, got {other:?}"),
    }
}

#[tokio::test]
async fn enter_and_exit_plan_mode_return_their_controls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ToolContext::new(dir.path());
    let registry = builtin_tools();

    let enter = registry.get("EnterPlanMode").expect("registered");
    assert!(enter.is_read_only());
    assert_eq!(enter.access(&json!({}), &ctx), ToolAccess::Interaction);
    let out = enter.call(json!({}), &ctx).await.expect("entered");
    assert_eq!(out.control, Some(ToolControl::EnterPlanMode));

    let exit = registry.get("ExitPlanMode").expect("registered");
    assert!(exit.is_read_only());
    assert_eq!(exit.access(&json!({}), &ctx), ToolAccess::Interaction);
    let out = exit
        .call(json!({"plan": "  # Do it\n1. step\n  "}), &ctx)
        .await
        .expect("presented");
    assert_eq!(
        out.control,
        Some(ToolControl::ExitPlanMode {
            plan: "# Do it\n1. step".to_string()
        })
    );
    assert!(
        !dir.path().join(".kaji").exists(),
        "presenting a plan writes nothing"
    );

    for bad in [json!({"plan": "   "}), json!({}), json!({"plan": 3})] {
        match exit.call(bad.clone(), &ctx).await {
            Err(ToolError::InvalidInput { tool, .. }) => assert_eq!(tool, "ExitPlanMode"),
            other => panic!("{bad}: expected InvalidInput, got {other:?}"),
        }
    }
}

#[test]
fn project_plans_live_in_kaji_home_never_in_the_repository() {
    let home = tempfile::tempdir().expect("home");
    let projects = tempfile::tempdir().expect("projects");
    let a = projects.path().join("a/app");
    let b = projects.path().join("b/app");
    std::fs::create_dir_all(a.join(".git")).expect("mkdir");
    std::fs::create_dir_all(&b).expect("mkdir");
    let path = save_project_plan(home.path(), &a, "# Ship it\n1. go", when()).expect("saved");
    let dir = project_plans_dir(home.path(), &a);
    assert!(
        dir.starts_with(home.path().join("plans")),
        "{}",
        dir.display()
    );
    assert_eq!(path, dir.join("20240305-070809-ship-it.md"));
    assert_eq!(
        std::fs::read_to_string(&path).expect("read"),
        "# Ship it\n1. go\n"
    );
    let name = dir.file_name().and_then(|n| n.to_str()).expect("name");
    assert!(
        name.starts_with("app-") && name.len() == "app-".len() + 16,
        "{name}"
    );
    assert_ne!(
        dir,
        project_plans_dir(home.path(), &b),
        "same name, other project"
    );
    assert!(
        !a.join(".kaji").exists(),
        "nothing is written in the repository"
    );
    assert_eq!(std::fs::read_dir(a.join(".git")).expect("git").count(), 0);

    let inside_git = a.join(".git/kaji-home");
    match save_project_plan(&inside_git, &a, "# X", when()) {
        Err(ToolError::Refused(msg)) => assert!(msg.contains(".git"), "{msg}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}
