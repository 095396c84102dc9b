//! Text with variable references (`$name`), as the parser leaves it and the interpreter
//! expands it.

use std::fmt;

/// Text with variable references; expanded at run time, and the values are never re-parsed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Template {
    /// Literal pieces and references, in order.
    pub parts: Vec<Part>,
}

/// One piece of a [`Template`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Literal text.
    Lit(String),
    /// `$name`, `${name}` or `${node.output}`.
    Var(String),
}

impl Template {
    /// A template holding only literal text.
    pub fn literal(text: impl Into<String>) -> Self {
        let text = text.into();
        if text.is_empty() {
            return Self::default();
        }
        Self {
            parts: vec![Part::Lit(text)],
        }
    }

    /// The variable names referenced, in order.
    pub fn vars(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Var(v) => Some(v.as_str()),
            Part::Lit(_) => None,
        })
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in &self.parts {
            match p {
                Part::Lit(s) => f.write_str(&s.replace('$', "\\$"))?,
                Part::Var(v) => write!(f, "${{{v}}}")?,
            }
        }
        Ok(())
    }
}
