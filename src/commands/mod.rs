//! Command language: streaming `?<…>!` detection, the grammar and its typed AST.
