//! Rule files (AGENTS.md, CLAUDE.md, `.clinerules`, global rules): being
//! written; see docs/rules.md.
