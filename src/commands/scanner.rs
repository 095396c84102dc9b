//! Streaming `?<…>!` detection over a reply that arrives in chunks split at any byte.
//!
//! One [`Scanner`] per (tab, turn). Outside a command it only runs `memchr` for `?`, keeps
//! one bit of state (was the last byte a `?`) and allocates nothing; inside a command it walks
//! byte by byte with the shared [`Nesting`] rules (quotes and nested `?<…>!` belong to the
//! outer command) and buffers the body up to a length cap. [`TurnScanner`] adds the dedup
//! against the full text that `turn_end` repeats.

use super::lex::{ByteStep, Nesting};
use thiserror::Error;

/// Default cap on the length of one command body (64 KiB).
pub const DEFAULT_MAX_COMMAND_LEN: usize = 64 * 1024;

/// One complete command found in a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundCommand {
    /// The text between `?<` and `>!`, verbatim (not trimmed).
    pub body: String,
    /// Byte offset of the `?<` in the turn's text.
    pub start: usize,
    /// Byte offset just after the `>!`.
    pub end: usize,
}

/// A command the scanner had to give up on; reported once so the tab gets an answer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ScanError {
    /// The body grew past the cap before its `>!` arrived; it is skipped up to its `>!`.
    #[error("命令过长 / command too long: more than {limit} bytes without a closing `>!` (starts at byte {start}); ignored")]
    TooLong {
        /// Byte offset of the `?<`.
        start: usize,
        /// The cap in force.
        limit: usize,
    },
}

/// What one push can yield: a command or a scan error, in stream order.
pub type ScanItem = Result<FoundCommand, ScanError>;

/// A command that was still open when the turn finished (it runs nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unfinished {
    /// Byte offset of its `?<`.
    pub start: usize,
    /// How many body bytes had arrived.
    pub len: usize,
}

/// Where the scanner is in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScanMode {
    /// Looking for `?<`.
    Outside,
    /// Inside a command, buffering its body.
    Inside,
    /// Inside a command that exceeded the cap: tracking nesting until its `>!`, not buffering.
    Skipping,
}

/// Streaming detector for one (tab, turn) text stream.
///
/// Exists because replies stream in arbitrary pieces: a command must be found exactly once,
/// as soon as its `>!` arrives, whatever the chunk boundaries are.
#[derive(Debug, Clone)]
pub struct Scanner {
    /// Current mode.
    mode: ScanMode,
    /// Outside: the previous chunk ended with `?` (half an opener).
    pending_q: bool,
    /// Body bytes of the open command (empty, unallocated, while outside).
    body: Vec<u8>,
    /// Quote/nesting state of the open command.
    nesting: Nesting,
    /// Bytes consumed in this turn so far.
    offset: usize,
    /// Offset of the open command's `?<`.
    start: usize,
    /// Body length cap.
    max_len: usize,
}

impl Default for Scanner {
    fn default() -> Self {
        Self::new()
    }
}

impl Scanner {
    /// A scanner with the default 64 KiB body cap.
    pub fn new() -> Self {
        Self::with_max_len(DEFAULT_MAX_COMMAND_LEN)
    }

    /// A scanner with a custom body cap (bytes).
    pub fn with_max_len(max_len: usize) -> Self {
        Self {
            mode: ScanMode::Outside,
            pending_q: false,
            body: Vec::new(),
            nesting: Nesting::default(),
            offset: 0,
            start: 0,
            max_len,
        }
    }

    /// Feed the next chunk; returns the commands completed by it, in order.
    ///
    /// Returns an empty (unallocated) `Vec` when the chunk completes no command.
    pub fn push(&mut self, chunk: &str) -> Vec<ScanItem> {
        let mut out = Vec::new();
        self.push_with(chunk, |item| out.push(item));
        out
    }

    /// Feed the next chunk, calling `on_item` for each completed command or error.
    pub fn push_with(&mut self, chunk: &str, mut on_item: impl FnMut(ScanItem)) {
        let bytes = chunk.as_bytes();
        let base = self.offset;
        self.offset += bytes.len();
        let mut i = 0;
        while i < bytes.len() {
            i = match self.mode {
                ScanMode::Outside => self.scan_outside(bytes, i, base),
                ScanMode::Inside | ScanMode::Skipping => {
                    self.scan_inside(bytes, i, base, &mut on_item)
                }
            };
        }
    }

    /// End of the turn: drop any unfinished command and reset for the next turn.
    pub fn finish(&mut self) -> Option<Unfinished> {
        let unfinished = (self.mode != ScanMode::Outside).then_some(Unfinished {
            start: self.start,
            len: self.body.len(),
        });
        *self = Self::with_max_len(self.max_len);
        unfinished
    }

    /// Whether a command is open (its `>!` has not arrived yet).
    pub fn in_command(&self) -> bool {
        self.mode != ScanMode::Outside
    }

    /// Outside a command: find the next `?<`; returns the index to continue from.
    fn scan_outside(&mut self, bytes: &[u8], mut i: usize, base: usize) -> usize {
        if self.pending_q {
            self.pending_q = false;
            if bytes[i] == b'<' {
                self.open(base + i - 1);
                return i + 1;
            }
        }
        while let Some(p) = memchr::memchr(b'?', &bytes[i..]) {
            let q = i + p;
            match bytes.get(q + 1) {
                Some(b'<') => {
                    self.open(base + q);
                    return q + 2;
                }
                Some(_) => i = q + 1,
                None => {
                    self.pending_q = true;
                    return bytes.len();
                }
            }
        }
        bytes.len()
    }

    /// Start a command whose `?<` is at stream offset `start`.
    fn open(&mut self, start: usize) {
        self.mode = ScanMode::Inside;
        self.start = start;
        self.nesting = Nesting::default();
        self.body.clear();
    }

    /// Inside a command: walk bytes until its `>!`; returns the index to continue from.
    fn scan_inside(
        &mut self,
        bytes: &[u8],
        from: usize,
        base: usize,
        on_item: &mut impl FnMut(ScanItem),
    ) -> usize {
        for (k, &b) in bytes[from..].iter().enumerate() {
            let at = from + k;
            let closed = self.nesting.step(b) == ByteStep::Close;
            if closed {
                self.close(base + at + 1, on_item);
                return at + 1;
            }
            if self.mode == ScanMode::Inside {
                self.body.push(b);
                if self.body.len() > self.max_len + 1 {
                    // +1: the body may legitimately hold the `>` of its closer.
                    self.overflow(on_item);
                }
            }
        }
        bytes.len()
    }

    /// The `>!` at stream offset `end - 1` closed the open command.
    fn close(&mut self, end: usize, on_item: &mut impl FnMut(ScanItem)) {
        if self.mode == ScanMode::Inside {
            // The buffered body ends with the `>` of `>!`.
            self.body.pop();
            let body = match String::from_utf8(std::mem::take(&mut self.body)) {
                Ok(s) => s,
                Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
            };
            on_item(Ok(FoundCommand {
                body,
                start: self.start,
                end,
            }));
        }
        self.mode = ScanMode::Outside;
        self.nesting = Nesting::default();
    }

    /// The open command passed the cap: report it once and skip to its `>!`.
    fn overflow(&mut self, on_item: &mut impl FnMut(ScanItem)) {
        on_item(Err(ScanError::TooLong {
            start: self.start,
            limit: self.max_len,
        }));
        self.mode = ScanMode::Skipping;
        self.body = Vec::new();
    }
}

/// Scan a complete text (e.g. a `user_input`) in one go.
pub fn scan_text(text: &str) -> Vec<ScanItem> {
    let mut scanner = Scanner::new();
    scanner.push(text)
}

/// A [`Scanner`] for one turn plus the record needed to dedup against `turn_end`.
///
/// Sites repeat the whole reply in `turn_end`; commands already found in the chunks must not
/// run twice, while commands the chunks never delivered (a lost chunk, a site that only sends
/// the final text) must still run. Matching is by body text, as a multiset in order: the
/// k-th occurrence of a body in the full text is "already reported" if the chunks reported it
/// at least k times. Offsets are not used because a site's final text may differ from the
/// concatenated deltas (markdown normalisation) before the command.
#[derive(Debug, Clone, Default)]
pub struct TurnScanner {
    /// The streaming scanner for the chunks.
    scanner: Scanner,
    /// Bodies reported from chunks in this turn (multiset).
    reported: Vec<String>,
    /// How many too-long errors the chunks already reported.
    too_long_reported: usize,
}

impl TurnScanner {
    /// A fresh per-turn scanner with the default cap.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh per-turn scanner with a custom cap.
    pub fn with_max_len(max_len: usize) -> Self {
        Self {
            scanner: Scanner::with_max_len(max_len),
            ..Self::default()
        }
    }

    /// Feed one streamed chunk; returns what it completed and remembers it for the dedup.
    pub fn push_chunk(&mut self, chunk: &str) -> Vec<ScanItem> {
        let items = self.scanner.push(chunk);
        for item in &items {
            match item {
                Ok(cmd) => self.reported.push(cmd.body.clone()),
                Err(ScanError::TooLong { .. }) => self.too_long_reported += 1,
            }
        }
        items
    }

    /// The turn ended with `full_text`: returns the commands in it that the chunks did not
    /// already report, and resets for the next turn. An unfinished streamed command runs
    /// nothing (the full text decides).
    pub fn turn_end(&mut self, full_text: &str) -> Vec<ScanItem> {
        let mut reported = std::mem::take(&mut self.reported);
        let mut too_long = std::mem::take(&mut self.too_long_reported);
        self.scanner.finish();
        let mut fresh = Scanner::with_max_len(self.scanner.max_len);
        let mut out = Vec::new();
        fresh.push_with(full_text, |item| match item {
            Ok(cmd) => match reported.iter().position(|b| *b == cmd.body) {
                Some(k) => {
                    reported.swap_remove(k);
                }
                None => out.push(Ok(cmd)),
            },
            Err(_) if too_long > 0 => too_long -= 1,
            Err(e) => out.push(Err(e)),
        });
        out
    }

    /// Drop the turn without a `turn_end` (tab gone, new turn started): nothing runs.
    pub fn abandon(&mut self) -> Option<Unfinished> {
        self.reported.clear();
        self.too_long_reported = 0;
        self.scanner.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bodies(items: &[ScanItem]) -> Vec<String> {
        items
            .iter()
            .map(|i| match i {
                Ok(c) => c.body.clone(),
                Err(e) => format!("ERR {e}"),
            })
            .collect()
    }

    fn scan_chunks(chunks: &[&str]) -> Vec<ScanItem> {
        let mut s = Scanner::new();
        chunks.iter().flat_map(|c| s.push(c)).collect()
    }

    #[test]
    fn finds_a_simple_command_with_offsets() {
        let items = scan_text("hi ?<echo hello>! bye");
        assert_eq!(
            items,
            vec![Ok(FoundCommand {
                body: "echo hello".into(),
                start: 3,
                end: 17
            })]
        );
    }

    #[test]
    fn split_inside_opener_and_closer() {
        let items = scan_chunks(&["a ?", "<echo", " hi>", "!", " b"]);
        assert_eq!(bodies(&items), vec!["echo hi"]);
        let Ok(c) = &items[0] else {
            panic!("{items:?}")
        };
        assert_eq!((c.start, c.end), (2, 13));
    }

    #[test]
    fn found_as_soon_as_close_arrives() {
        let mut s = Scanner::new();
        assert!(s.push("x ?<a").is_empty());
        assert!(s.push(">").is_empty());
        assert_eq!(bodies(&s.push("! tail")), vec!["a"]);
    }

    #[test]
    fn quotes_and_nested_commands_belong_to_the_outer() {
        let text = r#"?<manager create f from "a >! b ?<echo x>!" ?<echo y>!>!"#;
        assert_eq!(
            bodies(&scan_text(text)),
            vec![r#"manager create f from "a >! b ?<echo x>!" ?<echo y>!"#]
        );
    }

    #[test]
    fn several_commands_and_empty_ones() {
        assert_eq!(
            bodies(&scan_text("?<a>!?<>! ??< b >!?")),
            vec!["a", "", " b "]
        );
    }

    #[test]
    fn no_command_yields_nothing_and_keeps_no_buffer() {
        let mut s = Scanner::new();
        assert!(s.push("what? <not a command> !").is_empty());
        assert!(!s.in_command());
        assert_eq!(s.body.capacity(), 0);
    }

    #[test]
    fn unfinished_command_runs_nothing_and_does_not_leak() {
        let mut s = Scanner::new();
        assert!(s.push("?<echo never").is_empty());
        assert_eq!(s.finish(), Some(Unfinished { start: 0, len: 10 }));
        assert!(s.push(" done>! ?<b>!").iter().all(|i| i.is_ok()));
        // After finish, the old body is gone: only `b` is found in the next turn.
        let mut s2 = Scanner::new();
        s2.push("?<x");
        s2.finish();
        assert_eq!(bodies(&s2.push("y>!?<b>!")), vec!["b"]);
    }

    #[test]
    fn too_long_is_reported_once_then_skipped_to_its_close() {
        let mut s = Scanner::with_max_len(8);
        let mut items = s.push("?<0123456789");
        items.extend(s.push("abc ?<nested>! more>! ?<ok>!"));
        assert_eq!(
            bodies(&items),
            vec![
                "ERR 命令过长 / command too long: more than 8 bytes without a closing `>!` (starts at byte 0); ignored",
                "ok"
            ]
        );
    }

    #[test]
    fn body_exactly_at_cap_is_kept() {
        let mut s = Scanner::with_max_len(4);
        assert_eq!(bodies(&s.push("?<abcd>!")), vec!["abcd"]);
    }

    #[test]
    fn turn_end_dedups_streamed_commands() {
        let mut t = TurnScanner::new();
        let mut streamed = t.push_chunk("run ?<echo a");
        streamed.extend(t.push_chunk(">! then ?<echo b"));
        assert_eq!(bodies(&streamed), vec!["echo a"]);
        // The stream was cut before `echo b` closed; the full text has it, and a repeat of a.
        let fresh = t.turn_end("run ?<echo a>! then ?<echo b>! and ?<echo a>!");
        assert_eq!(bodies(&fresh), vec!["echo b", "echo a"]);
        // Next turn starts clean.
        assert_eq!(bodies(&t.turn_end("?<echo a>!")), vec!["echo a"]);
    }

    #[test]
    fn turn_end_without_chunks_reports_everything() {
        let mut t = TurnScanner::new();
        assert_eq!(bodies(&t.turn_end("?<a>! ?<b>!")), vec!["a", "b"]);
    }

    #[test]
    fn chinese_text_around_commands() {
        let text = "好的，我来执行：?<to 深度求索: 总结一下“这段话”>!。完成？";
        assert_eq!(
            bodies(&scan_text(text)),
            vec!["to 深度求索: 总结一下“这段话”"]
        );
    }

    /// Text fragments that stress the scanner: openers, closers, quotes, nesting, CJK.
    fn fragment() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("?<".to_string()),
            Just(">!".to_string()),
            Just("?".to_string()),
            Just(">".to_string()),
            Just("!".to_string()),
            Just("<".to_string()),
            Just("\"".to_string()),
            Just("'".to_string()),
            Just(" ".to_string()),
            Just("\\".to_string()),
            Just("中文".to_string()),
            Just("echo hi".to_string()),
            Just("?<echo \"a >! b\">!".to_string()),
            Just("?<outer ?<inner>! tail>!".to_string()),
            "[a-z ]{0,8}",
        ]
    }

    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(fragment(), 0..40).prop_map(|v| v.concat())
    }

    /// Split points as byte offsets, moved to char boundaries.
    fn split(text: &str, mut cuts: Vec<usize>) -> Vec<&str> {
        cuts.iter_mut().for_each(|c| {
            *c %= text.len() + 1;
            while !text.is_char_boundary(*c) {
                *c -= 1;
            }
        });
        cuts.sort_unstable();
        let mut out = Vec::new();
        let mut prev = 0;
        for c in cuts {
            out.push(&text[prev..c]);
            prev = c;
        }
        out.push(&text[prev..]);
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn any_split_finds_the_same_commands(t in text(), cuts in prop::collection::vec(0usize..10_000, 0..24)) {
            let whole = scan_text(&t);
            let mut s = Scanner::with_max_len(DEFAULT_MAX_COMMAND_LEN);
            let mut parts = Vec::new();
            for piece in split(&t, cuts) {
                parts.extend(s.push(piece));
            }
            prop_assert_eq!(whole, parts);
        }

        #[test]
        fn any_split_with_small_cap_agrees(t in text(), cuts in prop::collection::vec(0usize..10_000, 0..24)) {
            let mut whole_s = Scanner::with_max_len(6);
            let whole = whole_s.push(&t);
            let mut s = Scanner::with_max_len(6);
            let mut parts = Vec::new();
            for piece in split(&t, cuts) {
                parts.extend(s.push(piece));
            }
            prop_assert_eq!(whole, parts);
        }

        #[test]
        fn embedded_commands_are_found_with_their_offsets(
            pre in "[a-z 中文!<>]{0,20}",
            body in "[a-z 中文]{0,20}",
            post in "[a-z 中文]{0,20}",
        ) {
            let t = format!("{pre}?<{body}>!{post}");
            let items = scan_text(&t);
            prop_assert_eq!(items, vec![Ok(FoundCommand { body: body.clone(), start: pre.len(), end: pre.len() + body.len() + 4 })]);
        }

        #[test]
        fn turn_end_after_full_stream_reports_nothing_new(t in text(), cuts in prop::collection::vec(0usize..10_000, 0..24)) {
            let mut ts = TurnScanner::new();
            for piece in split(&t, cuts) {
                ts.push_chunk(piece);
            }
            prop_assert!(ts.turn_end(&t).is_empty());
        }
    }
}
