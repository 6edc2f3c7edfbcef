//! kaji-lsp against real language servers (installed by `.ci/run` into
//! `tests/lsp-servers`) and small fake ones.

mod builtin_failing;
mod common;
mod pyright;
mod typescript;
