//! What a loaded program skill is (docs/memory-and-skills.md): its language, what it returns,
//! and the exact bytes that run with their hash. Plain data, named by both the loader (a
//! skill's `Body`) and `program` (parsing and running one), so neither names the other.

use std::sync::Arc;

/// The language of a program skill, from its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Python,
    Node,
    Shell,
}

impl Lang {
    /// The language of a file name's extension (`py`, `js`, `sh`).
    pub fn of(ext: &str) -> Option<Lang> {
        match ext {
            "py" => Some(Lang::Python),
            "js" => Some(Lang::Node),
            "sh" => Some(Lang::Shell),
            _ => None,
        }
    }

    pub fn ext(self) -> &'static str {
        match self {
            Lang::Python => "py",
            Lang::Node => "js",
            Lang::Shell => "sh",
        }
    }

    /// The program that runs it (found on the PATH like any command).
    pub fn interpreter(self) -> &'static str {
        match self {
            Lang::Python if cfg!(windows) => "python",
            Lang::Python => "python3",
            Lang::Node => "node",
            Lang::Shell => "sh",
        }
    }

    pub(super) fn comment(self) -> &'static str {
        match self {
            Lang::Node => "//",
            Lang::Python | Lang::Shell => "#",
        }
    }
}

/// What a program skill answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returns {
    /// Its stdout.
    Text,
    /// The one file it leaves in `$AICARD_OUT` (its stdout as the text beside it).
    File,
}

/// A loaded program skill: the exact bytes that run, and their hash.
#[derive(Debug, Clone)]
pub struct ProgramSpec {
    pub lang: Lang,
    pub returns: Returns,
    /// Lower-case hex SHA-256 of [`Self::source`]: what a pin must match.
    pub sha256: String,
    pub source: Arc<[u8]>,
}
