//! Command language: streaming `?<…>!` detection, the grammar and its typed AST, help texts,
//! the permission check and the interpreter that runs commands against a [`interp::Host`].
//!
//! Flow of a command: [`scanner`] finds the body in a text stream → [`parser::parse`] turns
//! it into an [`ast::Command`] → [`interp::Interpreter`] checks [`permissions`] and runs it,
//! answering with a [`interp::CommandOutcome`] for the `cmd_result` frame.

pub mod agent;
pub mod ast;
pub mod fuzz;
pub mod help;
pub mod inline;
pub mod interp;
pub mod lex;
pub mod parser;
pub mod permissions;
pub mod scanner;
pub mod template;
pub mod vars;
