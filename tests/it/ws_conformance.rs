//! RFC 6455 conformance of the hub's own WebSocket layer, over raw TCP with hand-built frames:
//! the Autobahn case groups (framing, ping/pong, reserved bits, opcodes, fragmentation, UTF-8,
//! close handling, masking, limits, handshake) as tables of cases, each input → what the hub
//! answers (its replies and pongs, or the close code it fails the connection with).
//!
//! The hub does not echo: a text frame that is not JSON is answered with `bad_json`, a binary
//! frame with `bad_frame`, a ping with its pong. A case that keeps the connection open ends
//! with a probe ping; everything the hub sent before the probe's pong is the case's answer.
//!
//! Run: `cargo test --test it ws_conformance::`.

use crate::common;

use std::time::Duration;

use common::{TestHub, TOKEN};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The longest message the conformance hub takes (over 64 KiB: the 16-bit length is covered).
const MAX: usize = 256 * 1024;
/// How long any one answer may take.
const WAIT: Duration = Duration::from_secs(5);

const FIN: u8 = 0x80;
const RSV1: u8 = 0x40;
const RSV2: u8 = 0x20;
const RSV3: u8 = 0x10;
const CONT: u8 = 0x0;
const TEXT: u8 = 0x1;
const BINARY: u8 = 0x2;
const CLOSE: u8 = 0x8;
const PING: u8 = 0x9;
const PONG: u8 = 0xA;

/// A hub whose own pings and deadlines stay out of the cases' way.
async fn hub() -> TestHub {
    TestHub::start_with(|c| {
        c.limits.max_frame_bytes = MAX;
        c.timing.hello_timeout = Duration::from_secs(5);
        c.timing.ping_interval = Duration::from_secs(30);
        c.timing.dead_after = Duration::from_secs(60);
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// Frames and the wire

/// A client's frame: `b0` is FIN, RSV and opcode; masked (as a client must) with a fixed key.
fn frame(b0: u8, payload: &[u8]) -> Vec<u8> {
    framed(b0, payload, Some([0x8d, 0x1f, 0x62, 0xe4]))
}

/// A frame with no mask, which no client may send.
fn unmasked(b0: u8, payload: &[u8]) -> Vec<u8> {
    framed(b0, payload, None)
}

fn framed(b0: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let bit = if mask.is_some() { 0x80 } else { 0 };
    let mut f = vec![b0];
    match payload.len() {
        n @ 0..=125 => f.push(bit | n as u8),
        n @ 126..=0xFFFF => {
            f.push(bit | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(bit | 127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    match mask {
        Some(m) => {
            f.extend_from_slice(&m);
            f.extend(payload.iter().enumerate().map(|(i, b)| b ^ m[i % 4]));
        }
        None => f.extend_from_slice(payload),
    }
    f
}

/// A frame's header alone, announcing `len` bytes that are never sent.
fn header_only(b0: u8, len: u64) -> Vec<u8> {
    let mut f = vec![b0, 0x80 | 127];
    f.extend_from_slice(&len.to_be_bytes());
    f.extend_from_slice(&[1, 2, 3, 4]);
    f
}

/// A close frame's body: the code and the reason's bytes.
fn close_body(code: u16, reason: &[u8]) -> Vec<u8> {
    let mut b = code.to_be_bytes().to_vec();
    b.extend_from_slice(reason);
    b
}

/// A text message cut into fragments of `size` bytes (a fragment at least, even when empty).
fn fragmented(payload: &[u8], size: usize) -> Vec<u8> {
    let pieces: Vec<&[u8]> = if payload.is_empty() {
        vec![&[]]
    } else {
        payload.chunks(size).collect()
    };
    let mut wire = Vec::new();
    for (i, piece) in pieces.iter().enumerate() {
        let opcode = if i == 0 { TEXT } else { CONT };
        let fin = if i + 1 == pieces.len() { FIN } else { 0 };
        wire.extend(frame(fin | opcode, piece));
    }
    wire
}

fn cat(frames: &[Vec<u8>]) -> Vec<u8> {
    frames.concat()
}

/// A frame from the hub, as read off the wire.
#[derive(Debug)]
enum Got {
    Text(String),
    Binary,
    Ping,
    Pong(Vec<u8>),
    Close(Option<u16>),
    /// The connection ended with no close frame.
    End,
}

/// One raw connection to the hub after its `101`.
struct Conn {
    io: BufReader<TcpStream>,
}

impl Conn {
    async fn send(&mut self, wire: &[u8], chop: usize) {
        let io = self.io.get_mut();
        if chop == 0 {
            let _ = io.write_all(wire).await;
            return;
        }
        for piece in wire.chunks(chop) {
            if io.write_all(piece).await.is_err() {
                return;
            }
            let _ = io.flush().await;
        }
    }

    /// The hub's next frame. Every server frame is unmasked, with no reserved bit set.
    async fn next(&mut self) -> Got {
        let mut head = [0u8; 2];
        if self.io.read_exact(&mut head).await.is_err() {
            return Got::End;
        }
        assert_eq!(head[0] & 0x70, 0, "the hub set a reserved bit");
        assert_eq!(head[1] & 0x80, 0, "the hub masked a frame");
        let len = match head[1] & 0x7F {
            126 => {
                let mut b = [0u8; 2];
                if self.io.read_exact(&mut b).await.is_err() {
                    return Got::End;
                }
                u64::from(u16::from_be_bytes(b))
            }
            127 => {
                let mut b = [0u8; 8];
                if self.io.read_exact(&mut b).await.is_err() {
                    return Got::End;
                }
                u64::from_be_bytes(b)
            }
            n => u64::from(n),
        };
        let mut payload = vec![0u8; usize::try_from(len).expect("a frame that fits")];
        if self.io.read_exact(&mut payload).await.is_err() {
            return Got::End;
        }
        match head[0] & 0x0F {
            TEXT => Got::Text(String::from_utf8(payload).expect("the hub sends UTF-8")),
            BINARY => Got::Binary,
            PING => Got::Ping,
            PONG => Got::Pong(payload),
            CLOSE => {
                assert!(payload.len() != 1, "a close frame of one byte");
                if payload.len() > 2 {
                    assert!(std::str::from_utf8(&payload[2..]).is_ok(), "close reason");
                }
                Got::Close(payload.get(..2).map(|c| u16::from_be_bytes([c[0], c[1]])))
            }
            other => panic!("the hub sent opcode {other}"),
        }
    }

    /// The next frame within `WAIT`, `None` if none came.
    async fn next_in_time(&mut self) -> Option<Got> {
        tokio::time::timeout(WAIT, self.next()).await.ok()
    }

    /// Sends a ping with `token` and collects what the hub answers until its pong: the
    /// connection is still open then. The hub's own pings are skipped.
    async fn probe(&mut self, token: &[u8]) -> Outcome {
        self.send(&frame(FIN | PING, token), 0).await;
        let mut answers = Vec::new();
        loop {
            match self.next_in_time().await {
                None => return Outcome::Silent(answers),
                Some(Got::Pong(p)) if p == token => return Outcome::Open(answers),
                Some(Got::Pong(p)) => answers.push(Answer::Pong(p)),
                Some(Got::Text(t)) => answers.push(Answer::Reply(reply_kind(&t))),
                Some(Got::Binary) => answers.push(Answer::Reply("binary".into())),
                Some(Got::Ping) => continue,
                Some(Got::Close(code)) => return Outcome::Closed(code),
                Some(Got::End) => return Outcome::Dropped,
            }
        }
    }

    /// Reads until the hub closes: its close code (what it sent before is not asked).
    async fn closing(&mut self) -> Outcome {
        let mut answers = Vec::new();
        loop {
            match self.next_in_time().await {
                None => return Outcome::Silent(answers),
                Some(Got::Close(code)) => return Outcome::Closed(code),
                Some(Got::End) => return Outcome::Dropped,
                Some(Got::Text(t)) => answers.push(Answer::Reply(reply_kind(&t))),
                Some(Got::Pong(p)) => answers.push(Answer::Pong(p)),
                Some(_) => continue,
            }
        }
    }

    async fn send_json(&mut self, v: &Value) {
        self.send(&frame(FIN | TEXT, v.to_string().as_bytes()), 0)
            .await;
    }

    /// The next JSON frame, skipping pings.
    async fn json(&mut self) -> Value {
        loop {
            match self.next_in_time().await {
                Some(Got::Text(t)) => return serde_json::from_str(&t).expect("JSON"),
                Some(Got::Ping) => continue,
                other => panic!("expected a JSON frame, got {other:?}"),
            }
        }
    }
}

/// A reply's kind: its error code for an error, else its type.
fn reply_kind(text: &str) -> String {
    let v: Value = serde_json::from_str(text).expect("the hub sends JSON");
    match v["type"].as_str() {
        Some("error") => v["code"].as_str().unwrap_or("error").to_string(),
        Some(t) => t.to_string(),
        None => text.to_string(),
    }
}

#[derive(Debug, PartialEq)]
enum Answer {
    Pong(Vec<u8>),
    Reply(String),
}

fn pong(p: &[u8]) -> Answer {
    Answer::Pong(p.to_vec())
}

fn reply(kind: &str) -> Answer {
    Answer::Reply(kind.to_string())
}

/// How a case ended.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// Still open, after these answers.
    Open(Vec<Answer>),
    /// The hub sent a close frame with this code.
    Closed(Option<u16>),
    /// The connection ended without a close frame.
    Dropped,
    /// Nothing more came in time, after these answers.
    Silent(Vec<Answer>),
}

/// The request headers of a good opening handshake (the hub's `Host`, no Origin).
fn good_headers(addr: &str) -> Vec<(String, String)> {
    [
        ("Host", addr),
        ("Connection", "Upgrade"),
        ("Upgrade", "websocket"),
        ("Sec-WebSocket-Version", "13"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Sends an opening handshake by hand; gives the status, the response's header lines and,
/// on `101`, the connection.
async fn handshake(
    h: &TestHub,
    method: &str,
    path: &str,
    headers: &[(String, String)],
) -> (u16, Vec<String>, Conn) {
    let tcp = TcpStream::connect(h.running.addr).await.expect("connect");
    tcp.set_nodelay(true).expect("nodelay");
    let mut io = BufReader::new(tcp);
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    io.get_mut()
        .write_all(req.as_bytes())
        .await
        .expect("request");
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        let n = tokio::time::timeout(WAIT, io.read_line(&mut line))
            .await
            .expect("an answer in time")
            .expect("read");
        let line = line.trim_end().to_string();
        if n == 0 || line.is_empty() {
            break;
        }
        lines.push(line);
    }
    let status = lines
        .first()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, lines, Conn { io })
}

/// An identified tab on `/realtime`: upgraded, `hello` said, `welcome` read, and anything
/// the hub sends a new tab read up to a first probe.
async fn tab(h: &TestHub) -> Conn {
    let addr = h.running.addr.to_string();
    let (status, lines, mut c) = handshake(h, "GET", "/realtime", &good_headers(&addr)).await;
    assert_eq!(status, 101, "{lines:?}");
    c.send_json(&json!({"type":"hello","token":TOKEN,"site":"conformance"}))
        .await;
    assert_eq!(c.json().await["type"], "welcome");
    match c.probe(b"ready").await {
        Outcome::Open(_) => c,
        other => panic!("a new tab: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The cases

/// What a case must end in.
#[derive(Debug)]
enum Want {
    /// These answers, and the connection still open.
    Open(Vec<Answer>),
    /// The hub fails (or closes) the connection with this code.
    Close(u16),
}

struct Case {
    name: String,
    wire: Vec<u8>,
    /// Bytes per write (0: the whole wire in one write).
    chop: usize,
    want: Want,
}

fn case(name: impl Into<String>, wire: Vec<u8>, want: Want) -> Case {
    Case {
        name: name.into(),
        wire,
        chop: 0,
        want,
    }
}

fn chopped(name: impl Into<String>, wire: Vec<u8>, chop: usize, want: Want) -> Case {
    Case {
        chop,
        ..case(name, wire, want)
    }
}

fn open(answers: Vec<Answer>) -> Want {
    Want::Open(answers)
}

/// A text message that is not JSON is read whole and answered `bad_json`.
fn read_text() -> Want {
    open(vec![reply("bad_json")])
}

/// Group 1: text and binary messages at each length boundary, whole and chopped.
fn framing() -> Vec<Case> {
    let mut cases = Vec::new();
    for len in [0usize, 125, 126, 127, 128, 65535, 65536] {
        let text = vec![b'*'; len];
        cases.push(case(
            format!("1.1 text of {len}"),
            frame(FIN | TEXT, &text),
            read_text(),
        ));
        cases.push(case(
            format!("1.2 binary of {len}"),
            frame(FIN | BINARY, &text),
            open(vec![reply("bad_frame")]),
        ));
    }
    let long = vec![b'*'; 65536];
    cases.push(chopped(
        "1.1.8 text of 65536 in writes of 997",
        frame(FIN | TEXT, &long),
        997,
        read_text(),
    ));
    cases.push(chopped(
        "1.2.8 binary of 65536 in writes of 997",
        frame(FIN | BINARY, &long),
        997,
        open(vec![reply("bad_frame")]),
    ));
    cases.push(case(
        "1.x a heartbeat is answered",
        frame(FIN | TEXT, br#"{"type":"heartbeat","time":1}"#),
        open(vec![reply("heartbeat")]),
    ));
    cases
}

/// Group 2: pings and pongs.
fn ping_pong() -> Vec<Case> {
    let p125: Vec<u8> = (0..125u8).collect();
    let binary = [0x00, 0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0x00, 0xff];
    let ten: Vec<Vec<u8>> = (0..10).map(|i| format!("ping {i}").into_bytes()).collect();
    vec![
        case(
            "2.1 empty ping",
            frame(FIN | PING, b""),
            open(vec![pong(b"")]),
        ),
        case(
            "2.2 text ping",
            frame(FIN | PING, b"Hello, world!"),
            open(vec![pong(b"Hello, world!")]),
        ),
        case(
            "2.3 binary ping",
            frame(FIN | PING, &binary),
            open(vec![pong(&binary)]),
        ),
        case(
            "2.4 ping of 125 bytes",
            frame(FIN | PING, &p125),
            open(vec![pong(&p125)]),
        ),
        case(
            "2.5 ping of 126 bytes",
            frame(FIN | PING, &[b'x'; 126]),
            Want::Close(1002),
        ),
        case("2.6 unsolicited pong", frame(FIN | PONG, b""), open(vec![])),
        case(
            "2.7 unsolicited pong with payload",
            frame(FIN | PONG, b"unsolicited"),
            open(vec![]),
        ),
        case(
            "2.8 unsolicited pong, then a ping",
            cat(&[frame(FIN | PONG, b"x"), frame(FIN | PING, b"y")]),
            open(vec![pong(b"y")]),
        ),
        chopped(
            "2.9 ping of 125 bytes a byte at a time",
            frame(FIN | PING, &p125),
            1,
            open(vec![pong(&p125)]),
        ),
        case(
            "2.10 ten pings",
            ten.iter().flat_map(|p| frame(FIN | PING, p)).collect(),
            open(ten.iter().map(|p| pong(p)).collect()),
        ),
        chopped(
            "2.11 ten pings a byte at a time",
            ten.iter().flat_map(|p| frame(FIN | PING, p)).collect(),
            1,
            open(ten.iter().map(|p| pong(p)).collect()),
        ),
    ]
}

/// Group 3: no extension was agreed, so a reserved bit fails the connection.
fn reserved_bits() -> Vec<Case> {
    vec![
        case(
            "3.1 RSV1 on text",
            frame(FIN | RSV1 | TEXT, b"a"),
            Want::Close(1002),
        ),
        case(
            "3.2 RSV2 on text after a good one",
            cat(&[frame(FIN | TEXT, b"a"), frame(FIN | RSV2 | TEXT, b"b")]),
            Want::Close(1002),
        ),
        case(
            "3.3 RSV1|RSV2 on text",
            frame(FIN | RSV1 | RSV2 | TEXT, b"a"),
            Want::Close(1002),
        ),
        case(
            "3.4 RSV3 on text",
            frame(FIN | RSV3 | TEXT, b"a"),
            Want::Close(1002),
        ),
        case(
            "3.5 RSV1|RSV3 on binary",
            frame(FIN | RSV1 | RSV3 | BINARY, &[0xff; 8]),
            Want::Close(1002),
        ),
        case(
            "3.6 RSV2|RSV3 on ping",
            frame(FIN | RSV2 | RSV3 | PING, b"p"),
            Want::Close(1002),
        ),
        case(
            "3.7 all RSV bits on close",
            frame(FIN | RSV1 | RSV2 | RSV3 | CLOSE, &close_body(1000, b"")),
            Want::Close(1002),
        ),
    ]
}

/// Group 4: opcodes RFC 6455 reserves.
fn opcodes() -> Vec<Case> {
    let mut cases = Vec::new();
    for opcode in [3u8, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF] {
        cases.push(case(
            format!("4.x opcode {opcode:#x}"),
            frame(FIN | opcode, b""),
            Want::Close(1002),
        ));
        cases.push(case(
            format!("4.x opcode {opcode:#x} with payload, after a ping"),
            cat(&[
                frame(FIN | PING, b"first"),
                frame(FIN | opcode, b"reserved"),
            ]),
            Want::Close(1002),
        ));
    }
    cases
}

/// Group 5: fragmentation, and control frames between fragments.
fn fragmentation() -> Vec<Case> {
    let frags = |parts: &[&[u8]]| -> Vec<u8> {
        let mut wire = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            let opcode = if i == 0 { TEXT } else { CONT };
            let fin = if i + 1 == parts.len() { FIN } else { 0 };
            wire.extend(frame(fin | opcode, p));
        }
        wire
    };
    vec![
        case("5.1 fragmented ping", frame(PING, b"p"), Want::Close(1002)),
        case("5.2 fragmented pong", frame(PONG, b"p"), Want::Close(1002)),
        case(
            "5.3 fragmented close",
            frame(CLOSE, &close_body(1000, b"")),
            Want::Close(1002),
        ),
        case(
            "5.4 text in two fragments",
            frags(&[b"frag", b"ment"]),
            read_text(),
        ),
        chopped(
            "5.5 text in two fragments, a byte at a time",
            frags(&[b"frag", b"ment"]),
            1,
            read_text(),
        ),
        case(
            "5.6 a ping between fragments",
            cat(&[
                frame(TEXT, b"frag"),
                frame(FIN | PING, b"between"),
                frame(FIN | CONT, b"ment"),
            ]),
            open(vec![pong(b"between"), reply("bad_json")]),
        ),
        chopped(
            "5.7 a ping between fragments, a byte at a time",
            cat(&[
                frame(TEXT, b"frag"),
                frame(FIN | PING, b"between"),
                frame(FIN | CONT, b"ment"),
            ]),
            1,
            open(vec![pong(b"between"), reply("bad_json")]),
        ),
        case(
            "5.8 a pong between fragments",
            cat(&[
                frame(TEXT, b"frag"),
                frame(FIN | PONG, b"between"),
                frame(FIN | CONT, b"ment"),
            ]),
            read_text(),
        ),
        case(
            "5.9 a continuation with no message",
            frame(FIN | CONT, b"alone"),
            Want::Close(1002),
        ),
        case(
            "5.10 an unfinished continuation with no message",
            frame(CONT, b"alone"),
            Want::Close(1002),
        ),
        case(
            "5.11 continuations with no message, then a text",
            cat(&[
                frame(CONT, b"a"),
                frame(FIN | CONT, b"b"),
                frame(FIN | TEXT, b"c"),
            ]),
            Want::Close(1002),
        ),
        case(
            "5.12 a new text before the fragmented one ended",
            cat(&[frame(TEXT, b"a"), frame(FIN | TEXT, b"b")]),
            Want::Close(1002),
        ),
        case(
            "5.13 a binary inside a fragmented text",
            cat(&[frame(TEXT, b"a"), frame(FIN | BINARY, b"b")]),
            Want::Close(1002),
        ),
        case(
            "5.14 a heartbeat in five fragments with pings between",
            cat(&[
                frame(TEXT, br#"{"type":"#),
                frame(FIN | PING, b"1"),
                frame(CONT, br#""heart"#),
                frame(FIN | PING, b"2"),
                frame(CONT, br#"beat","#),
                frame(CONT, br#""time":"#),
                frame(FIN | PING, b"3"),
                frame(FIN | CONT, b"1}"),
            ]),
            open(vec![pong(b"1"), pong(b"2"), pong(b"3"), reply("heartbeat")]),
        ),
        case(
            "5.15 fragments of nothing",
            cat(&[frame(TEXT, b""), frame(CONT, b""), frame(FIN | CONT, b"")]),
            read_text(),
        ),
        case(
            "5.16 a binary in three fragments",
            cat(&[
                frame(BINARY, b"a"),
                frame(CONT, b"b"),
                frame(FIN | CONT, b"c"),
            ]),
            open(vec![reply("bad_frame")]),
        ),
    ]
}

/// Group 6's vectors (after Markus Kuhn's UTF-8 decoder stress test): name, bytes, and
/// whether they are valid UTF-8. Each is sent as one text message.
const UTF8: &[(&str, &[u8], bool)] = &[
    // 6.1 empty
    ("6.1 empty", b"", true),
    // 6.2 valid text
    (
        "6.2 Hello-µ@ßöäüàá-UTF-8!!",
        "Hello-µ@ßöäüàá-UTF-8!!".as_bytes(),
        true,
    ),
    // 6.3 invalid: a surrogate inside κόσμε
    (
        "6.3 κόσμε with a surrogate",
        &[
            0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xcf, 0x83, 0xce, 0xbc, 0xce, 0xb5, 0xed, 0xa0, 0x80,
            0x65, 0x64, 0x69, 0x74, 0x65, 0x64,
        ],
        false,
    ),
    // 6.5 valid
    (
        "6.5.1 κόσμε",
        &[
            0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xcf, 0x83, 0xce, 0xbc, 0xce, 0xb5,
        ],
        true,
    ),
    ("6.5.2 κ", &[0xce, 0xba], true),
    ("6.5.3 ό", &[0xe1, 0xbd, 0xb9], true),
    ("6.5.4 🌍", &[0xf0, 0x9f, 0x8c, 0x8d], true),
    ("6.5.5 ASCII", b"abc", true),
    // 6.6 κόσμε cut after each byte
    ("6.6.1", &[0xce], false),
    ("6.6.2", &[0xce, 0xba], true),
    ("6.6.3", &[0xce, 0xba, 0xe1], false),
    ("6.6.4", &[0xce, 0xba, 0xe1, 0xbd], false),
    ("6.6.5", &[0xce, 0xba, 0xe1, 0xbd, 0xb9], true),
    ("6.6.6", &[0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xcf], false),
    ("6.6.7", &[0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xcf, 0x83], true),
    (
        "6.6.8",
        &[0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xcf, 0x83, 0xce],
        false,
    ),
    (
        "6.6.9",
        &[0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xcf, 0x83, 0xce, 0xbc],
        true,
    ),
    (
        "6.6.10",
        &[0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xcf, 0x83, 0xce, 0xbc, 0xce],
        false,
    ),
    (
        "6.6.11",
        &[
            0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xcf, 0x83, 0xce, 0xbc, 0xce, 0xb5,
        ],
        true,
    ),
    // 6.7 the first sequence of each length
    ("6.7.1 U+0000", &[0x00], true),
    ("6.7.2 U+0080", &[0xc2, 0x80], true),
    ("6.7.3 U+0800", &[0xe0, 0xa0, 0x80], true),
    ("6.7.4 U+10000", &[0xf0, 0x90, 0x80, 0x80], true),
    // 6.8 five and six bytes
    ("6.8.1 five bytes", &[0xf8, 0x88, 0x80, 0x80, 0x80], false),
    (
        "6.8.2 six bytes",
        &[0xfc, 0x84, 0x80, 0x80, 0x80, 0x80],
        false,
    ),
    // 6.9 the last sequence of each length
    ("6.9.1 U+007F", &[0x7f], true),
    ("6.9.2 U+07FF", &[0xdf, 0xbf], true),
    ("6.9.3 U+FFFF", &[0xef, 0xbf, 0xbf], true),
    ("6.9.4 U+10FFFF", &[0xf4, 0x8f, 0xbf, 0xbf], true),
    // 6.10 past the last
    ("6.10.1 U+110000", &[0xf4, 0x90, 0x80, 0x80], false),
    ("6.10.2 U+1FFFFF", &[0xf7, 0xbf, 0xbf, 0xbf], false),
    ("6.10.3 U+3FFFFFF", &[0xfb, 0xbf, 0xbf, 0xbf, 0xbf], false),
    (
        "6.10.4 U+7FFFFFFF",
        &[0xfd, 0xbf, 0xbf, 0xbf, 0xbf, 0xbf],
        false,
    ),
    // 6.11 other boundaries
    ("6.11.1 U+D7FF", &[0xed, 0x9f, 0xbf], true),
    ("6.11.2 U+E000", &[0xee, 0x80, 0x80], true),
    ("6.11.3 U+FFFD", &[0xef, 0xbf, 0xbd], true),
    ("6.11.4 U+10FFFF", &[0xf4, 0x8f, 0xbf, 0xbf], true),
    ("6.11.5 U+110000", &[0xf4, 0x90, 0x80, 0x80], false),
    // 6.12 unexpected continuation bytes
    ("6.12.1", &[0x80], false),
    ("6.12.2", &[0xbf], false),
    ("6.12.3", &[0x80, 0xbf], false),
    ("6.12.4", &[0x80, 0xbf, 0x80], false),
    ("6.12.5", &[0x80, 0xbf, 0x80, 0xbf], false),
    ("6.12.6", &[0x80, 0xbf, 0x80, 0xbf, 0x80], false),
    ("6.12.7", &[0x80, 0xbf, 0x80, 0xbf, 0x80, 0xbf], false),
    (
        "6.12.8 every continuation byte",
        &[
            0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d,
            0x8e, 0x8f, 0x90, 0x91, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0x9b,
            0x9c, 0x9d, 0x9e, 0x9f, 0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9,
            0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf, 0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7,
            0xb8, 0xb9, 0xba, 0xbb, 0xbc, 0xbd, 0xbe, 0xbf,
        ],
        false,
    ),
    // 6.13 lonely start bytes, each followed by a space
    (
        "6.13.1 two-byte starts",
        &[
            0xc0, 0x20, 0xc1, 0x20, 0xc2, 0x20, 0xc3, 0x20, 0xc4, 0x20, 0xc5, 0x20, 0xc6, 0x20,
            0xc7, 0x20, 0xc8, 0x20, 0xc9, 0x20, 0xca, 0x20, 0xcb, 0x20, 0xcc, 0x20, 0xcd, 0x20,
            0xce, 0x20, 0xcf, 0x20, 0xd0, 0x20, 0xd1, 0x20, 0xd2, 0x20, 0xd3, 0x20, 0xd4, 0x20,
            0xd5, 0x20, 0xd6, 0x20, 0xd7, 0x20, 0xd8, 0x20, 0xd9, 0x20, 0xda, 0x20, 0xdb, 0x20,
            0xdc, 0x20, 0xdd, 0x20, 0xde, 0x20, 0xdf, 0x20,
        ],
        false,
    ),
    (
        "6.13.2 three-byte starts",
        &[
            0xe0, 0x20, 0xe1, 0x20, 0xe2, 0x20, 0xe3, 0x20, 0xe4, 0x20, 0xe5, 0x20, 0xe6, 0x20,
            0xe7, 0x20, 0xe8, 0x20, 0xe9, 0x20, 0xea, 0x20, 0xeb, 0x20, 0xec, 0x20, 0xed, 0x20,
            0xee, 0x20, 0xef, 0x20,
        ],
        false,
    ),
    (
        "6.13.3 four-byte starts",
        &[
            0xf0, 0x20, 0xf1, 0x20, 0xf2, 0x20, 0xf3, 0x20, 0xf4, 0x20, 0xf5, 0x20, 0xf6, 0x20,
            0xf7, 0x20,
        ],
        false,
    ),
    (
        "6.13.4 five-byte starts",
        &[0xf8, 0x20, 0xf9, 0x20, 0xfa, 0x20, 0xfb, 0x20],
        false,
    ),
    ("6.13.5 six-byte starts", &[0xfc, 0x20, 0xfd, 0x20], false),
    // 6.14 the last byte missing
    ("6.14.1", &[0xc0], false),
    ("6.14.2", &[0xe0, 0x80], false),
    ("6.14.3", &[0xf0, 0x80, 0x80], false),
    ("6.14.4", &[0xf8, 0x80, 0x80, 0x80], false),
    ("6.14.5", &[0xfc, 0x80, 0x80, 0x80, 0x80], false),
    ("6.14.6", &[0xdf], false),
    ("6.14.7", &[0xef, 0xbf], false),
    ("6.14.8", &[0xf7, 0xbf, 0xbf], false),
    ("6.14.9", &[0xfb, 0xbf, 0xbf, 0xbf], false),
    ("6.14.10", &[0xfd, 0xbf, 0xbf, 0xbf, 0xbf], false),
    // 6.15 all of 6.14 together
    (
        "6.15.1",
        &[
            0xc0, 0xe0, 0x80, 0xf0, 0x80, 0x80, 0xf8, 0x80, 0x80, 0x80, 0xfc, 0x80, 0x80, 0x80,
            0x80, 0xdf, 0xef, 0xbf, 0xf7, 0xbf, 0xbf, 0xfb, 0xbf, 0xbf, 0xbf, 0xfd, 0xbf, 0xbf,
            0xbf, 0xbf,
        ],
        false,
    ),
    // 6.16 bytes that never occur
    ("6.16.1", &[0xfe], false),
    ("6.16.2", &[0xff], false),
    ("6.16.3", &[0xfe, 0xfe, 0xff, 0xff], false),
    // 6.17 overlong `/`
    ("6.17.1", &[0xc0, 0xaf], false),
    ("6.17.2", &[0xe0, 0x80, 0xaf], false),
    ("6.17.3", &[0xf0, 0x80, 0x80, 0xaf], false),
    ("6.17.4", &[0xf8, 0x80, 0x80, 0x80, 0xaf], false),
    ("6.17.5", &[0xfc, 0x80, 0x80, 0x80, 0x80, 0xaf], false),
    // 6.18 the longest overlong of each length
    ("6.18.1", &[0xc1, 0xbf], false),
    ("6.18.2", &[0xe0, 0x9f, 0xbf], false),
    ("6.18.3", &[0xf0, 0x8f, 0xbf, 0xbf], false),
    ("6.18.4", &[0xf8, 0x87, 0xbf, 0xbf, 0xbf], false),
    ("6.18.5", &[0xfc, 0x83, 0xbf, 0xbf, 0xbf, 0xbf], false),
    // 6.19 overlong NUL
    ("6.19.1", &[0xc0, 0x80], false),
    ("6.19.2", &[0xe0, 0x80, 0x80], false),
    ("6.19.3", &[0xf0, 0x80, 0x80, 0x80], false),
    ("6.19.4", &[0xf8, 0x80, 0x80, 0x80, 0x80], false),
    ("6.19.5", &[0xfc, 0x80, 0x80, 0x80, 0x80, 0x80], false),
    // 6.20 lone UTF-16 surrogates
    ("6.20.1 U+D800", &[0xed, 0xa0, 0x80], false),
    ("6.20.2 U+DB7F", &[0xed, 0xad, 0xbf], false),
    ("6.20.3 U+DB80", &[0xed, 0xae, 0x80], false),
    ("6.20.4 U+DBFF", &[0xed, 0xaf, 0xbf], false),
    ("6.20.5 U+DC00", &[0xed, 0xb0, 0x80], false),
    ("6.20.6 U+DF80", &[0xed, 0xbe, 0x80], false),
    ("6.20.7 U+DFFF", &[0xed, 0xbf, 0xbf], false),
    // 6.21 paired UTF-16 surrogates
    ("6.21.1", &[0xed, 0xa0, 0x80, 0xed, 0xb0, 0x80], false),
    ("6.21.2", &[0xed, 0xa0, 0x80, 0xed, 0xbf, 0xbf], false),
    ("6.21.3", &[0xed, 0xad, 0xbf, 0xed, 0xb0, 0x80], false),
    ("6.21.4", &[0xed, 0xad, 0xbf, 0xed, 0xbf, 0xbf], false),
    ("6.21.5", &[0xed, 0xae, 0x80, 0xed, 0xb0, 0x80], false),
    ("6.21.6", &[0xed, 0xae, 0x80, 0xed, 0xbf, 0xbf], false),
    ("6.21.7", &[0xed, 0xaf, 0xbf, 0xed, 0xb0, 0x80], false),
    ("6.21.8", &[0xed, 0xaf, 0xbf, 0xed, 0xbf, 0xbf], false),
    // 6.22 noncharacters: valid UTF-8
    ("6.22.1 U+FFFE", &[0xef, 0xbf, 0xbe], true),
    ("6.22.2 U+FFFF", &[0xef, 0xbf, 0xbf], true),
    ("6.22.3 U+1FFFE", &[0xf0, 0x9f, 0xbf, 0xbe], true),
    ("6.22.4 U+1FFFF", &[0xf0, 0x9f, 0xbf, 0xbf], true),
    ("6.22.5 U+2FFFE", &[0xf0, 0xaf, 0xbf, 0xbe], true),
    ("6.22.6 U+2FFFF", &[0xf0, 0xaf, 0xbf, 0xbf], true),
    ("6.22.7 U+3FFFE", &[0xf0, 0xbf, 0xbf, 0xbe], true),
    ("6.22.8 U+3FFFF", &[0xf0, 0xbf, 0xbf, 0xbf], true),
    ("6.22.9 U+4FFFE", &[0xf1, 0x8f, 0xbf, 0xbe], true),
    ("6.22.10 U+4FFFF", &[0xf1, 0x8f, 0xbf, 0xbf], true),
    ("6.22.11 U+5FFFE", &[0xf1, 0x9f, 0xbf, 0xbe], true),
    ("6.22.12 U+5FFFF", &[0xf1, 0x9f, 0xbf, 0xbf], true),
    ("6.22.13 U+6FFFE", &[0xf1, 0xaf, 0xbf, 0xbe], true),
    ("6.22.14 U+6FFFF", &[0xf1, 0xaf, 0xbf, 0xbf], true),
    ("6.22.15 U+7FFFE", &[0xf1, 0xbf, 0xbf, 0xbe], true),
    ("6.22.16 U+7FFFF", &[0xf1, 0xbf, 0xbf, 0xbf], true),
    ("6.22.17 U+8FFFE", &[0xf2, 0x8f, 0xbf, 0xbe], true),
    ("6.22.18 U+8FFFF", &[0xf2, 0x8f, 0xbf, 0xbf], true),
    ("6.22.19 U+9FFFE", &[0xf2, 0x9f, 0xbf, 0xbe], true),
    ("6.22.20 U+9FFFF", &[0xf2, 0x9f, 0xbf, 0xbf], true),
    ("6.22.21 U+AFFFE", &[0xf2, 0xaf, 0xbf, 0xbe], true),
    ("6.22.22 U+AFFFF", &[0xf2, 0xaf, 0xbf, 0xbf], true),
    ("6.22.23 U+BFFFE", &[0xf2, 0xbf, 0xbf, 0xbe], true),
    ("6.22.24 U+BFFFF", &[0xf2, 0xbf, 0xbf, 0xbf], true),
    ("6.22.25 U+CFFFE", &[0xf3, 0x8f, 0xbf, 0xbe], true),
    ("6.22.26 U+CFFFF", &[0xf3, 0x8f, 0xbf, 0xbf], true),
    ("6.22.27 U+DFFFE", &[0xf3, 0x9f, 0xbf, 0xbe], true),
    ("6.22.28 U+DFFFF", &[0xf3, 0x9f, 0xbf, 0xbf], true),
    ("6.22.29 U+EFFFE", &[0xf3, 0xaf, 0xbf, 0xbe], true),
    ("6.22.30 U+EFFFF", &[0xf3, 0xaf, 0xbf, 0xbf], true),
    ("6.22.31 U+FFFFE", &[0xf3, 0xbf, 0xbf, 0xbe], true),
    ("6.22.32 U+FFFFF", &[0xf3, 0xbf, 0xbf, 0xbf], true),
    ("6.22.33 U+10FFFE", &[0xf4, 0x8f, 0xbf, 0xbe], true),
    ("6.22.34 U+10FFFF", &[0xf4, 0x8f, 0xbf, 0xbf], true),
    // 6.23 the replacement character and other specials
    ("6.23.1 U+FFFD", &[0xef, 0xbf, 0xbd], true),
    (
        "6.23.2 U+FFFD in text",
        &[0x61, 0xef, 0xbf, 0xbd, 0x62],
        true,
    ),
    ("6.23.3 a BOM", &[0xef, 0xbb, 0xbf, 0x61], true),
    ("6.23.4 U+FDD0", &[0xef, 0xb7, 0x90], true),
    ("6.23.5 U+FDEF", &[0xef, 0xb7, 0xaf], true),
    ("6.23.6 NUL inside", &[0x61, 0x00, 0x62], true),
    (
        "6.23.7 a CESU-8 pair",
        &[0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80],
        false,
    ),
];

/// Group 6: each vector whole; and cut into fragments of one byte, and of three.
fn utf8() -> Vec<Case> {
    let mut cases = Vec::new();
    for &(name, bytes, valid) in UTF8 {
        let want = || {
            if valid {
                read_text()
            } else {
                Want::Close(1007)
            }
        };
        cases.push(case(
            format!("{name} whole"),
            frame(FIN | TEXT, bytes),
            want(),
        ));
        cases.push(case(
            format!("{name} in 1-byte fragments"),
            fragmented(bytes, 1),
            want(),
        ));
        if bytes.len() > 3 {
            cases.push(chopped(
                format!("{name} in 3-byte fragments, a byte per write"),
                fragmented(bytes, 3),
                1,
                want(),
            ));
        }
    }
    cases
}

/// Group 7: the closing handshake, close codes and reasons.
fn close_handling() -> Vec<Case> {
    let mut cases = vec![
        case(
            "7.1 close with no body",
            frame(FIN | CLOSE, b""),
            Want::Close(1000),
        ),
        case(
            "7.2 close 1000",
            frame(FIN | CLOSE, &close_body(1000, b"")),
            Want::Close(1000),
        ),
        case(
            "7.3 close after a ping",
            cat(&[
                frame(FIN | PING, b"p"),
                frame(FIN | CLOSE, &close_body(1000, b"")),
            ]),
            Want::Close(1000),
        ),
        case(
            "7.3.2 close of one byte",
            frame(FIN | CLOSE, &[0x03]),
            Want::Close(1002),
        ),
        case(
            "7.3.3 close 1000 with a reason",
            frame(FIN | CLOSE, &close_body(1000, "再见 / bye".as_bytes())),
            Want::Close(1000),
        ),
        case(
            "7.3.4 close with a reason of 123 bytes",
            frame(FIN | CLOSE, &close_body(1000, &[b'*'; 123])),
            Want::Close(1000),
        ),
        case(
            "7.3.5 close with a reason of 124 bytes (126 in all)",
            frame(FIN | CLOSE, &close_body(1000, &[b'*'; 124])),
            Want::Close(1002),
        ),
        case(
            "7.5.1 close with a reason that is not UTF-8",
            frame(
                FIN | CLOSE,
                &close_body(
                    1000,
                    &[0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xcf, 0x83, 0xce, 0xbc, 0xed],
                ),
            ),
            Want::Close(1007),
        ),
        case(
            "7.5.2 close with a surrogate in its reason",
            frame(FIN | CLOSE, &close_body(1000, &[0xed, 0xa0, 0x80])),
            Want::Close(1007),
        ),
    ];
    for code in [
        1000u16, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999,
        4000, 4999,
    ] {
        cases.push(case(
            format!("7.7 close code {code}"),
            frame(FIN | CLOSE, &close_body(code, b"ok")),
            Want::Close(1000),
        ));
    }
    for code in [
        0u16, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535,
    ] {
        cases.push(case(
            format!("7.9 close code {code}"),
            frame(FIN | CLOSE, &close_body(code, b"")),
            Want::Close(1002),
        ));
    }
    cases
}

/// Masking: a client must mask every frame.
fn masking() -> Vec<Case> {
    vec![
        case(
            "m.1 unmasked text",
            unmasked(FIN | TEXT, b"hi"),
            Want::Close(1002),
        ),
        case(
            "m.2 unmasked ping",
            unmasked(FIN | PING, b"hi"),
            Want::Close(1002),
        ),
        case(
            "m.3 unmasked close",
            unmasked(FIN | CLOSE, &close_body(1000, b"")),
            Want::Close(1002),
        ),
        case(
            "m.4 unmasked continuation",
            cat(&[frame(TEXT, b"a"), unmasked(FIN | CONT, b"b")]),
            Want::Close(1002),
        ),
    ]
}

/// Limits (group 9 in spirit): the longest message passes; longer fails with 1009 as soon as
/// a header says so.
fn limits() -> Vec<Case> {
    vec![
        case(
            "9.1 text of exactly the limit",
            frame(FIN | TEXT, &vec![b'*'; MAX]),
            read_text(),
        ),
        case(
            "9.2 text one byte over, announced",
            header_only(FIN | TEXT, MAX as u64 + 1),
            Want::Close(1009),
        ),
        case(
            "9.3 binary of 2^63 bytes, announced",
            header_only(FIN | BINARY, 1 << 63),
            Want::Close(1009),
        ),
        case(
            "9.4 fragments adding up to one byte over",
            cat(&[
                frame(TEXT, &vec![b'*'; MAX / 2]),
                header_only(FIN | CONT, (MAX / 2) as u64 + 1),
            ]),
            Want::Close(1009),
        ),
    ]
}

/// Runs each case on a tab of its own; gives the cases that did not end as they must.
async fn run(h: &TestHub, cases: Vec<Case>) -> Vec<String> {
    let mut failed = Vec::new();
    for (i, c) in cases.into_iter().enumerate() {
        let mut conn = tab(h).await;
        conn.send(&c.wire, c.chop).await;
        let got = match &c.want {
            Want::Open(_) => conn.probe(format!("probe {i}").as_bytes()).await,
            Want::Close(_) => conn.closing().await,
        };
        let ok = match (&c.want, &got) {
            (Want::Open(want), Outcome::Open(answers)) => want == answers,
            (Want::Close(code), Outcome::Closed(got)) => Some(*code) == *got,
            _ => false,
        };
        if !ok {
            failed.push(format!("{}: want {:?}, got {got:?}", c.name, c.want));
        }
    }
    failed
}

async fn group(cases: Vec<Case>) {
    let h = hub().await;
    let n = cases.len();
    let failed = run(&h, cases).await;
    assert!(
        failed.is_empty(),
        "{} of {n} cases failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[tokio::test]
async fn group_1_framing() {
    group(framing()).await;
}

#[tokio::test]
async fn group_2_ping_pong() {
    group(ping_pong()).await;
}

#[tokio::test]
async fn group_3_reserved_bits() {
    group(reserved_bits()).await;
}

#[tokio::test]
async fn group_4_opcodes() {
    group(opcodes()).await;
}

#[tokio::test]
async fn group_5_fragmentation() {
    group(fragmentation()).await;
}

#[tokio::test]
async fn group_6_utf8() {
    for &(name, bytes, valid) in UTF8 {
        assert_eq!(
            std::str::from_utf8(bytes).is_ok(),
            valid,
            "the table: {name}"
        );
    }
    assert!(UTF8.len() >= 130, "{} vectors", UTF8.len());
    group(utf8()).await;
}

#[tokio::test]
async fn group_7_close_handling() {
    group(close_handling()).await;
}

#[tokio::test]
async fn masking_every_client_frame() {
    group(masking()).await;
}

#[tokio::test]
async fn limits_end_with_1009() {
    group(limits()).await;
}

// ---------------------------------------------------------------------------------------------
// The opening handshake

/// How a case changes the good handshake's headers.
enum Edit {
    Set(&'static str, String),
    Add(&'static str, &'static str),
    Remove(&'static str),
}

fn edited(addr: &str, edits: &[Edit]) -> Vec<(String, String)> {
    let mut headers = good_headers(addr);
    for edit in edits {
        match edit {
            Edit::Set(k, v) => {
                headers.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
                headers.push((k.to_string(), v.clone()));
            }
            Edit::Add(k, v) => headers.push((k.to_string(), v.to_string())),
            Edit::Remove(k) => headers.retain(|(name, _)| !name.eq_ignore_ascii_case(k)),
        }
    }
    headers
}

#[tokio::test]
async fn handshake_key_version_and_upgrade_are_checked() {
    let h = hub().await;
    let addr = h.running.addr.to_string();
    let key = |k: &str| Edit::Set("Sec-WebSocket-Key", k.to_string());
    let cases: Vec<(&str, &str, Vec<Edit>, u16)> = vec![
        ("a good handshake", "GET", vec![], 101),
        ("a POST", "POST", vec![], 405),
        ("no Upgrade", "GET", vec![Edit::Remove("Upgrade")], 426),
        (
            "Upgrade: h2c",
            "GET",
            vec![Edit::Set("Upgrade", "h2c".into())],
            426,
        ),
        (
            "no Connection",
            "GET",
            vec![Edit::Remove("Connection")],
            426,
        ),
        (
            "version 8",
            "GET",
            vec![Edit::Set("Sec-WebSocket-Version", "8".into())],
            426,
        ),
        (
            "no version",
            "GET",
            vec![Edit::Remove("Sec-WebSocket-Version")],
            426,
        ),
        (
            "no key",
            "GET",
            vec![Edit::Remove("Sec-WebSocket-Key")],
            400,
        ),
        ("a short key", "GET", vec![key("c2hvcnQ=")], 400),
        (
            "a key of 24 characters, not base64",
            "GET",
            vec![key("!!!!!!!!!!!!!!!!!!!!!!==")],
            400,
        ),
        (
            "a key of 15 bytes",
            "GET",
            vec![key("AAECAwQFBgcICQoLDA0O")],
            400,
        ),
        (
            "a key of 17 bytes",
            "GET",
            vec![key("AAECAwQFBgcICQoLDA0ODxA=")],
            400,
        ),
        (
            "a key with stray bits",
            "GET",
            vec![key("dGhlIHNhbXBsZSBub25jZR==")],
            400,
        ),
        (
            "an unpadded key",
            "GET",
            vec![key("dGhlIHNhbXBsZSBub25jZQ")],
            400,
        ),
        (
            "two keys",
            "GET",
            vec![Edit::Add("Sec-WebSocket-Key", "AQIDBAUGBwgJCgsMDQ4PEA==")],
            400,
        ),
        (
            "a foreign Host",
            "GET",
            vec![Edit::Set("Host", "evil.example:8027".into())],
            403,
        ),
    ];
    let mut failed = Vec::new();
    for (name, method, edits, want) in cases {
        let (status, lines, _) = handshake(&h, method, "/realtime", &edited(&addr, &edits)).await;
        if status != want {
            failed.push(format!("{name}: want {want}, got {lines:?}"));
        }
        if status == 101 && want == 101 {
            let accept = lines.iter().find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("sec-websocket-accept")
                    .then(|| value.trim().to_string())
            });
            // RFC 6455 §1.3's own example key and answer.
            assert_eq!(
                accept.as_deref(),
                Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
                "{lines:?}"
            );
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[tokio::test]
async fn origins_are_the_hubs_own_the_chat_sites_and_extensions_only() {
    let h = hub().await;
    let addr = h.running.addr.to_string();
    let port = h.running.addr.port();
    let other = port.wrapping_add(1).max(1);
    let cases: Vec<(String, u16)> = vec![
        (format!("http://127.0.0.1:{port}"), 101),
        (format!("http://localhost:{port}"), 101),
        (format!("http://[::1]:{port}"), 101),
        (format!("http://aicard-0a1b2c3d.localhost:{port}"), 101),
        ("https://chat.deepseek.com".into(), 101),
        ("https://claude.ai".into(), 101),
        (
            "chrome-extension://abcdefghijklmnopabcdefghijklmnop".into(),
            101,
        ),
        (
            "moz-extension://0b4c1a9e-7f0d-4f43-9d7e-2f1c3c4b5a6d".into(),
            101,
        ),
        (
            "safari-web-extension://0b4c1a9e-7f0d-4f43-9d7e-2f1c3c4b5a6d".into(),
            101,
        ),
        ("http://127.0.0.1:1".into(), 403),
        (format!("http://127.0.0.1:{other}"), 403),
        (format!("http://localhost:{other}"), 403),
        ("http://evil.localhost:3000".into(), 403),
        (format!("http://evil.localhost:{port}"), 403),
        (format!("http://aicard-x.evil.localhost:{port}"), 403),
        (format!("https://127.0.0.1:{port}"), 403),
        ("https://evil.example".into(), 403),
        ("http://claude.ai".into(), 403),
        ("null".into(), 403),
    ];
    let mut failed = Vec::new();
    for path in ["/realtime", "/heartbeat"] {
        for (origin, want) in &cases {
            let headers = edited(&addr, &[Edit::Set("Origin", origin.clone())]);
            let (status, lines, _) = handshake(&h, "GET", path, &headers).await;
            if status != *want {
                failed.push(format!(
                    "{path} Origin {origin}: want {want}, got {lines:?}"
                ));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// `/heartbeat`, and bursts

/// A `/heartbeat` socket for the tab `client_id`, after its `hello`.
async fn heartbeat_socket(h: &TestHub, client_id: &str) -> Conn {
    let addr = h.running.addr.to_string();
    let (status, lines, mut c) = handshake(h, "GET", "/heartbeat", &good_headers(&addr)).await;
    assert_eq!(status, 101, "{lines:?}");
    c.send_json(&json!({"type":"hello","token":TOKEN,"client_id":client_id}))
        .await;
    c
}

async fn client_id(c: &mut Conn) -> String {
    c.send_json(&json!({"type":"hello","token":TOKEN,"site":"conformance"}))
        .await;
    let welcome = c.json().await;
    welcome["client_id"]
        .as_str()
        .expect("client_id")
        .to_string()
}

#[tokio::test]
async fn heartbeat_answers_a_close_frame_with_one() {
    let h = hub().await;
    let addr = h.running.addr.to_string();
    let (_, _, mut rt) = handshake(&h, "GET", "/realtime", &good_headers(&addr)).await;
    let id = client_id(&mut rt).await;
    for (body, want) in [
        (close_body(1000, b""), Some(1000)),
        (close_body(4000, "走了 / gone".as_bytes()), Some(1000)),
        (Vec::new(), Some(1000)),
        (close_body(1005, b""), Some(1002)),
        (close_body(1000, &[0xff]), Some(1007)),
    ] {
        let mut hb = heartbeat_socket(&h, &id).await;
        hb.send_json(&json!({"type":"heartbeat","time":1})).await;
        assert_eq!(hb.json().await["type"], "heartbeat");
        hb.send(&frame(FIN | CLOSE, &body), 0).await;
        assert_eq!(hb.closing().await, Outcome::Closed(want), "{body:?}");
    }
}

/// How many of `n` answers of `kind` come back in order before the hub stops; panics on
/// anything else.
async fn count_answers(c: &mut Conn, n: usize, is: impl Fn(&Got, usize) -> bool) -> usize {
    let mut got = 0;
    while got < n {
        match c.next_in_time().await {
            Some(Got::Ping) => continue,
            Some(g) if is(&g, got) => got += 1,
            Some(other) => panic!("after {got} answers: {other:?}"),
            None => break,
        }
    }
    got
}

#[tokio::test]
async fn a_burst_of_300_pings_or_heartbeats_gets_300_answers() {
    let h = hub().await;
    const N: usize = 300;
    let pings: Vec<u8> = (0..N)
        .flat_map(|i| frame(FIN | PING, format!("{i}").as_bytes()))
        .collect();
    let beats: Vec<u8> = (0..N)
        .flat_map(|i| {
            frame(
                FIN | TEXT,
                json!({"type":"heartbeat","time":i}).to_string().as_bytes(),
            )
        })
        .collect();
    let is_pong =
        |g: &Got, i: usize| matches!(g, Got::Pong(p) if *p == format!("{i}").into_bytes());
    let is_beat = |g: &Got, _: usize| matches!(g, Got::Text(t) if reply_kind(t) == "heartbeat");

    let mut rt = tab(&h).await;
    rt.send(&pings, 0).await;
    assert_eq!(
        count_answers(&mut rt, N, is_pong).await,
        N,
        "/realtime pings"
    );
    rt.send(&beats, 0).await;
    assert_eq!(
        count_answers(&mut rt, N, is_beat).await,
        N,
        "/realtime heartbeats"
    );
    assert!(matches!(rt.probe(b"still open").await, Outcome::Open(a) if a.is_empty()));

    let addr = h.running.addr.to_string();
    let (_, _, mut owner) = handshake(&h, "GET", "/realtime", &good_headers(&addr)).await;
    let id = client_id(&mut owner).await;
    let mut hb = heartbeat_socket(&h, &id).await;
    hb.send(&pings, 0).await;
    assert_eq!(
        count_answers(&mut hb, N, is_pong).await,
        N,
        "/heartbeat pings"
    );
    hb.send(&beats, 0).await;
    assert_eq!(
        count_answers(&mut hb, N, is_beat).await,
        N,
        "/heartbeat heartbeats"
    );
}
