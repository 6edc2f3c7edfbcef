//! The integration tests of this crate, in one binary. Each module is one
//! of the former test files; run one with
//! `cargo test -p kaji-policy --test all MODULE::`.

mod compound;
mod differential;
