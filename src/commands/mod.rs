//! Command language: streaming `?<…>!` detection, the grammar and its typed AST, help texts,
//! the permission check and the interpreter that runs commands through the hub's
//! [`ports`].
//!
//! Flow of a command: [`scanner`] finds the body in a text stream → [`parser::parse`] turns
//! it into an [`ast::Command`] → [`interp::Interpreter`] checks [`permissions`] and hands it
//! to its verb's module under [`verbs`], answering with a [`interp::CommandOutcome`] for the
//! `cmd_result` frame.

pub mod agent;
pub mod ast;
pub mod fuzz;
pub mod help;
pub mod inline;
pub mod interp;
pub mod lex;
pub mod parser;
pub mod permissions;
pub mod ports;
pub mod scanner;
pub mod template;
pub mod vars;
pub mod verbs;
