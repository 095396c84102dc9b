//! Lexical rules shared by the streaming scanner and the parser, so both agree on what is
//! quoted and what is nested.
//!
//! A quote character opens a quoted string only at the start of a word: when the byte before
//! it is not an ASCII letter/digit/`_` and not part of a multi-byte (non-ASCII) character.
//! That keeps English contractions (`what's`, `don't`) and Chinese text around `"` from
//! swallowing the rest of a command. Inside `"…"` a backslash escapes the next byte; inside
//! `'…'` nothing is special.

/// The command opener `?<`.
pub const OPEN: &[u8; 2] = b"?<";
/// The command closer `>!`.
pub const CLOSE: &[u8; 2] = b">!";

/// Whether a quote character preceded by `prev` (0 = start of text) opens a quoted string.
#[inline]
pub fn opens_quote(prev: u8) -> bool {
    !(prev.is_ascii_alphanumeric() || prev == b'_' || prev >= 0x80)
}

/// Which quoted string, if any, the walker is inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Quote {
    /// Not inside a quoted string.
    #[default]
    None,
    /// Inside `'…'`: no escapes.
    Single,
    /// Inside `"…"`: backslash escapes the next byte.
    Double,
    /// Inside `"…"`, right after a backslash.
    DoubleEscape,
}

/// Byte-at-a-time quote and nesting tracker for the inside of a command.
///
/// Used by the scanner (over a stream) and by the parser (over a whole body). `depth` counts
/// nested `?<…>!`; the parser tracks `$(…)` on top of it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Nesting {
    /// Current quote state.
    pub quote: Quote,
    /// Nested `?<…>!` depth inside the outer command.
    pub depth: u32,
    /// Previous unquoted byte (0 at the start), for `?<`, `>!` and the quote-opening rule.
    pub prev: u8,
}

/// What one byte did to the nesting state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteStep {
    /// An ordinary byte (quoted or not, nested or not).
    Plain,
    /// This byte completed a `>!` at depth 0: the outer command ends here.
    Close,
}

impl Nesting {
    /// Feed one byte; reports whether it closed the outer command.
    #[inline]
    pub fn step(&mut self, b: u8) -> ByteStep {
        match self.quote {
            Quote::Single => {
                if b == b'\'' {
                    self.quote = Quote::None;
                    self.prev = b;
                }
                return ByteStep::Plain;
            }
            Quote::Double => {
                if b == b'\\' {
                    self.quote = Quote::DoubleEscape;
                } else if b == b'"' {
                    self.quote = Quote::None;
                    self.prev = b;
                }
                return ByteStep::Plain;
            }
            Quote::DoubleEscape => {
                self.quote = Quote::Double;
                return ByteStep::Plain;
            }
            Quote::None => {}
        }
        let prev = self.prev;
        self.prev = b;
        match b {
            b'"' if opens_quote(prev) => self.quote = Quote::Double,
            b'\'' if opens_quote(prev) => self.quote = Quote::Single,
            b'<' if prev == b'?' => {
                self.depth += 1;
                // `?<>!` must not read the `<` as half of a `>`-token; reset.
                self.prev = 0;
            }
            b'!' if prev == b'>' => {
                self.prev = 0;
                if self.depth == 0 {
                    return ByteStep::Close;
                }
                self.depth -= 1;
            }
            _ => {}
        }
        ByteStep::Plain
    }

    /// Whether the walker is at top level: not quoted and not inside a nested command.
    #[inline]
    pub fn top_level(&self) -> bool {
        self.quote == Quote::None && self.depth == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close_at(s: &str) -> Option<usize> {
        let mut n = Nesting::default();
        s.bytes().position(|b| n.step(b) == ByteStep::Close)
    }

    #[test]
    fn closes_at_first_top_level_close() {
        assert_eq!(close_at("echo hi>! rest"), Some(8));
        assert_eq!(close_at(">!"), Some(1));
    }

    #[test]
    fn quotes_and_nesting_hide_the_close() {
        assert_eq!(close_at(r#"echo "a>!b">!"#), Some(12));
        assert_eq!(close_at("echo 'a>!b'>!"), Some(12));
        assert_eq!(close_at("x ?<inner>! y>!"), Some(14));
        assert_eq!(close_at(r#"echo "a\">!">!"#), Some(13));
    }

    #[test]
    fn contractions_do_not_open_quotes() {
        assert_eq!(close_at("what's up>!"), Some(10));
        assert_eq!(close_at("他说\"你好>!"), Some("他说\"你好>!".len() - 1));
    }

    #[test]
    fn quote_rule() {
        assert!(opens_quote(0));
        assert!(opens_quote(b' '));
        assert!(opens_quote(b'='));
        assert!(!opens_quote(b'a'));
        assert!(!opens_quote(b'_'));
        assert!(!opens_quote(0xe5));
    }
}
