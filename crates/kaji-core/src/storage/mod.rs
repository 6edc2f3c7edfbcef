//! Session storage: what a session file holds ([`record`]), the store of
//! session files with their index and locks ([`store`], [`index`],
//! [`lock`]), how a file is replayed into a conversation ([`replay`]), the
//! writer a Task records through ([`recorder`]), and opening the files of
//! a new or resumed session ([`persist`]).
//!
//! It sits below the Session and the Task, which both write through it: it
//! must never know the Session, its services, a Task or a front end, and
//! never decide what a failure means to the user beyond naming the file.

pub mod index;
pub mod lock;
pub mod persist;
pub mod record;
pub mod recorder;
pub mod replay;
pub mod store;
pub mod store_error;
