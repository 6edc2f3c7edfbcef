//! Agent Skills: discovery in the four places, the system prompt section,
//! and the `Skill` tool loading one on demand from real files.

use std::path::Path;

use kaji_tools::skill::{
    SKILL_TOOL, SkillRoots, discover_skills, register_skills, skill_tool, skills_prompt_section,
};
use kaji_tools::{ToolContext, ToolRegistry};
use serde_json::json;

fn write_skill(root: &Path, folder: &str, text: &str) {
    let dir = root.join(folder);
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("SKILL.md"), text).expect("write");
}

struct Layout {
    _tmp: tempfile::TempDir,
    project: std::path::PathBuf,
    kaji_home: std::path::PathBuf,
    home: std::path::PathBuf,
}

fn layout() -> Layout {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = tmp.path().join("repo");
    let kaji_home = tmp.path().join("kaji-home");
    let home = tmp.path().join("home");
    for d in [&project, &kaji_home, &home] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    Layout {
        project,
        kaji_home,
        home,
        _tmp: tmp,
    }
}

#[test]
fn skills_are_found_in_all_four_places_and_the_strongest_wins() {
    let l = layout();
    write_skill(
        &l.project.join(".kaji/skills"),
        "release",
        "---\nname: release\ndescription: \"Cut a release of this repo\"\n---\nRun make release.\n",
    );
    write_skill(
        &l.kaji_home.join("skills"),
        "release-copy",
        "---\nname: release\ndescription: shadowed\n---\nnever\n",
    );
    write_skill(
        &l.kaji_home.join("skills"),
        "pdf",
        "---\nname: pdf\ndescription: >\n  Fill in PDF forms\n  with pdftk\n---\nbody\n",
    );
    write_skill(
        &l.project.join(".claude/skills"),
        "review",
        "---\nname: review\ndescription: Review a diff\nallowed-tools: Read\n---\nbody\n",
    );
    write_skill(
        &l.home.join(".claude/skills"),
        "notes",
        "---\nname: notes\ndescription: Keep notes\n---\nbody\n",
    );
    write_skill(
        &l.home.join(".claude/skills"),
        "broken",
        "---\nname: broken\n---\nno description\n",
    );
    std::fs::create_dir_all(l.home.join(".claude/skills/not-a-skill")).expect("mkdir");
    let found = discover_skills(&SkillRoots::standard(
        &l.project,
        &l.kaji_home,
        Some(&l.home),
    ));
    let names: Vec<(&str, &str)> = found
        .skills
        .iter()
        .map(|s| (s.name.as_str(), s.description.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("notes", "Keep notes"),
            ("pdf", "Fill in PDF forms with pdftk"),
            ("release", "Cut a release of this repo"),
            ("review", "Review a diff"),
        ]
    );
    assert_eq!(found.warnings.len(), 1);
    let warning = found.warnings[0].to_string();
    assert!(
        warning.contains("broken/SKILL.md") && warning.contains("`description`"),
        "{warning}"
    );
    let section = skills_prompt_section(&found.skills);
    assert!(
        section.contains("- release: Cut a release of this repo\n"),
        "{section}"
    );
    assert!(section.contains("Skill tool"), "{section}");
    assert_eq!(skills_prompt_section(&[]), "");
}

#[tokio::test]
async fn the_skill_tool_loads_a_skill_on_demand() {
    let l = layout();
    let root = l.project.join(".kaji/skills");
    write_skill(
        &root,
        "release",
        "---\nname: release\ndescription: Cut a release\n---\n\n1. Run `scripts/bump.sh`.\n",
    );
    let found = discover_skills(&SkillRoots::standard(&l.project, &l.kaji_home, None));
    let tool = skill_tool(found.skills.clone());
    assert!(tool.is_read_only());
    // Derived, in the form it was always sent in.
    assert_eq!(
        tool.spec().input_schema,
        json!({
            "type": "object",
            "properties": {"skill": {"type": "string", "enum": ["release"], "description": "The skill's name."}},
            "required": ["skill"],
            "additionalProperties": false
        })
    );
    // The file is read when called: an edit after discovery shows.
    std::fs::write(
        root.join("release/SKILL.md"),
        "---\nname: release\ndescription: Cut a release\n---\n\n1. Run `scripts/bump.sh --sign`.\n",
    )
    .expect("edit");
    let ctx = ToolContext::new(&l.project);
    let out = tool
        .call(json!({"skill": "release"}), &ctx)
        .await
        .expect("loads");
    assert!(
        out.content.contains("scripts/bump.sh --sign"),
        "{}",
        out.content
    );
    assert!(
        !out.content.contains("description:"),
        "front matter left out: {}",
        out.content
    );
    assert!(
        out.content
            .contains(&root.join("release").display().to_string()),
        "names its folder: {}",
        out.content
    );
    let err = tool
        .call(json!({"skill": "deploy"}), &ctx)
        .await
        .expect_err("unknown")
        .to_string();
    assert!(
        err.contains("\"deploy\"") && err.contains("release"),
        "{err}"
    );

    let mut registry = ToolRegistry::new();
    register_skills(&mut registry, Vec::new());
    assert!(registry.get(SKILL_TOOL).is_none(), "no skills, no tool");
    register_skills(&mut registry, found.skills);
    assert!(registry.get(SKILL_TOOL).is_some());
}
