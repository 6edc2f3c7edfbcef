//! What the permission policy means, in the words every front end shows
//! (status line, `/status`, `kaji permissions check`, ACP's modes): one
//! wording, so the UI and the CLI cannot tell different stories. Pure
//! text; it decides nothing.

use kaji_core::PermissionMode;
use kaji_sandbox::SandboxMode;

/// The status line's words: `sandbox: workspace-write`, `sandbox off`.
pub fn sandbox_short(sandbox: SandboxMode) -> String {
    match sandbox {
        SandboxMode::Off => "sandbox off".into(),
        m => format!("sandbox: {}", m.as_str()),
    }
}

/// What runs without asking under `mode` with `sandbox`:
/// `sandbox: workspace-write — commands run without asking`.
pub fn sandbox_line(mode: PermissionMode, sandbox: SandboxMode) -> String {
    match (sandbox, mode) {
        (_, PermissionMode::Yolo) => format!(
            "{} — everything runs without asking",
            sandbox_short(sandbox)
        ),
        (SandboxMode::Off, PermissionMode::Plan) => {
            "sandbox off — only read-only commands run".into()
        }
        (SandboxMode::Off, _) => {
            "sandbox off — commands ask (known read-only ones excepted)".into()
        }
        (m, PermissionMode::Plan) => {
            format!("sandbox: {} — only read-only commands run", m.as_str())
        }
        (m, _) => format!("sandbox: {} — commands run without asking", m.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_session_runs_commands_confined_without_asking() {
        assert_eq!(
            sandbox_line(PermissionMode::Default, SandboxMode::WorkspaceWrite),
            "sandbox: workspace-write — commands run without asking"
        );
        assert_eq!(sandbox_short(SandboxMode::Off), "sandbox off");
    }
}
