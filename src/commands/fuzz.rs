//! The fuzz harness over scanner + parser, shared by `fuzz/fuzz_targets/scan_parse.rs`
//! (cargo-fuzz, nightly) and a proptest run below (stable, in CI).
//!
//! Invariants checked on arbitrary input: nothing panics; scanning in chunks split anywhere
//! finds exactly what scanning the whole text finds; every command's offsets point at
//! `?<body>!`-framed text; `turn_end` after the full stream reports nothing new; every parse
//! error points inside the body and carries a usage line.

use super::parser;
use super::scanner::{scan_text, Scanner, TurnScanner};

/// Run every invariant on one input. The first byte picks the chunk sizes.
pub fn scan_parse(data: &[u8]) {
    let Some((&seed, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let pieces = split(&text, seed);

    let whole = scan_text(&text);
    let mut scanner = Scanner::new();
    let streamed: Vec<_> = pieces.iter().flat_map(|p| scanner.push(p)).collect();
    assert_eq!(whole, streamed, "chunked scan differs from whole scan");

    let mut turn = TurnScanner::new();
    for p in &pieces {
        turn.push_chunk(p);
    }
    assert!(
        turn.turn_end(&text).is_empty(),
        "turn_end repeated a command"
    );

    for cmd in whole.iter().flatten() {
        let framed = text
            .get(cmd.start..cmd.end)
            .expect("offsets on char boundaries");
        assert_eq!(
            framed,
            format!("?<{}>!", cmd.body),
            "offsets do not frame the body"
        );
        check_parse(&cmd.body);
    }
    // The raw text as a body too: the parser must cope with anything.
    check_parse(&text);
}

fn check_parse(body: &str) {
    if let Err(e) = parser::parse(body) {
        assert!(e.pos <= body.len(), "error position {} past the end", e.pos);
        assert!(!e.usage.is_empty(), "parse error without usage: {e}");
    }
}

/// Chunk sizes cycle through 1..=(seed % 16 + 1) bytes, moved to character boundaries.
fn split(text: &str, seed: u8) -> Vec<&str> {
    let max = usize::from(seed % 16) + 1;
    let mut out = Vec::new();
    let (mut start, mut k) = (0, 0);
    while start < text.len() {
        let mut end = (start + k % max + 1).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
        k += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bytes biased towards the syntax: openers, closers, quotes, keywords, CJK.
    fn input() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"?<".to_vec()),
            Just(b">!".to_vec()),
            Just(b"\"".to_vec()),
            Just(b"'".to_vec()),
            Just(b" -> ".to_vec()),
            Just(b"$(".to_vec()),
            Just(b")".to_vec()),
            Just(b"[".to_vec()),
            Just(b"]".to_vec()),
            Just(b",".to_vec()),
            Just(b":".to_vec()),
            Just(b"${a.b}".to_vec()),
            Just(b"if x then ".to_vec()),
            Just(b" else ".to_vec()),
            Just(b"for i in {1..3} do ".to_vec()),
            Just(b"parallel to=[a: ".to_vec()),
            Just(b"manager run f k=v ".to_vec()),
            Just(b"set x = ".to_vec()),
            Just("中文".as_bytes().to_vec()),
            prop::collection::vec(any::<u8>(), 0..6),
        ];
        (any::<u8>(), prop::collection::vec(piece, 0..48)).prop_map(|(seed, parts)| {
            let mut v = vec![seed];
            v.extend(parts.concat());
            v
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        #[test]
        fn harness_holds_on_random_inputs(data in input()) {
            scan_parse(&data);
        }
    }

    #[test]
    fn harness_handles_edge_inputs() {
        for data in [
            &b""[..],
            b"\x00",
            b"\x05?<",
            b"\x01?<a>!",
            b"\x07\xff\xfe?<\xe4>!",
            b"\x02?<?<>!",
        ] {
            scan_parse(data);
        }
    }
}
