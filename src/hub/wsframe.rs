//! RFC 6455 for the hub's sockets: the opening handshake's checks and answer, and the frames,
//! with no buffer kept between frames.
//!
//! The libraries measured (tungstenite, tokio-websockets, fastwebsockets: `benches/ws_stacks.rs`
//! and `docs/benchmarks.md`) each keep a read and a write buffer per socket, as large as the
//! longest frame it has carried: a tab that was sent a 64 KiB prompt and answered 64 KiB holds
//! about 130 KiB for as long as it stays connected, idle. Here:
//! - reads go into one scratch buffer per worker thread, borrowed only within a poll; a frame's
//!   payload is read into a `Vec` of its own length, which becomes the message's `String`, and
//!   long payloads are read into it directly, with no copy;
//! - a frame is written from the caller's own bytes, with its header, in one vectored write; the
//!   bytes are dropped as soon as they are written;
//! - what an idle socket keeps is its state: a partial header, at most 14 bytes inline.
//!
//! The reader is cancel-safe: each poll parses what it read before it returns, so dropping
//! `Reader::next` (a timeout, a `select!`) loses nothing.

use std::cell::RefCell;
use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Version};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The opcodes of RFC 6455 §5.2.
pub mod op {
    pub const CONTINUATION: u8 = 0x0;
    pub const TEXT: u8 = 0x1;
    pub const BINARY: u8 = 0x2;
    pub const CLOSE: u8 = 0x8;
    pub const PING: u8 = 0x9;
    pub const PONG: u8 = 0xA;
}

/// The answer to an opening handshake: the `101` headers, or why it is refused.
pub fn handshake(
    method: &Method,
    version: Version,
    headers: &HeaderMap,
) -> Result<HeaderMap, (StatusCode, HeaderMap, &'static str)> {
    let refuse = |status, why| Err((status, HeaderMap::new(), why));
    if method != Method::GET {
        return refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "WebSocket 握手须用 GET / the WebSocket handshake is a GET",
        );
    }
    if version < Version::HTTP_11 {
        return refuse(
            StatusCode::BAD_REQUEST,
            "WebSocket 需要 HTTP/1.1 / a WebSocket needs HTTP/1.1",
        );
    }
    if !has_token(headers, header::CONNECTION, "upgrade") {
        return refuse(
            StatusCode::UPGRADE_REQUIRED,
            "这里只接受 WebSocket（Connection 缺少 upgrade）/ WebSocket only: `Connection` does not include `upgrade`",
        );
    }
    if !has_token(headers, header::UPGRADE, "websocket") {
        return refuse(
            StatusCode::UPGRADE_REQUIRED,
            "这里只接受 WebSocket（Upgrade 不是 websocket）/ WebSocket only: `Upgrade` is not `websocket`",
        );
    }
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_none_or(|v| v.as_bytes() != b"13")
    {
        let mut h = HeaderMap::new();
        h.insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        return Err((
            StatusCode::UPGRADE_REQUIRED,
            h,
            "只支持 WebSocket 第 13 版 / only WebSocket version 13 is spoken",
        ));
    }
    // The key is 16 random bytes in base64, sent once (RFC 6455 §4.1, §11.3.1).
    let mut keys = headers.get_all(header::SEC_WEBSOCKET_KEY).iter();
    let key = match (keys.next(), keys.next()) {
        (Some(k), None) if key_is_16_bytes(k.as_bytes()) => k,
        (Some(_), Some(_)) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "Sec-WebSocket-Key 只能出现一次 / `Sec-WebSocket-Key` must appear once",
            )
        }
        _ => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "Sec-WebSocket-Key 缺失或格式不对 / `Sec-WebSocket-Key` is missing or not 16 bytes in base64",
            )
        }
    };
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let mut h = HeaderMap::new();
    h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(
        header::SEC_WEBSOCKET_ACCEPT,
        HeaderValue::from_str(&accept).expect("base64 is a header value"),
    );
    Ok(h)
}

/// Whether a handshake key is base64 (padded, canonical) for exactly 16 bytes.
fn key_is_16_bytes(key: &[u8]) -> bool {
    use base64::Engine as _;
    let mut out = [0u8; 18];
    base64::engine::general_purpose::STANDARD
        .decode_slice(key, &mut out)
        .is_ok_and(|n| n == 16)
}

/// Whether a comma-separated header holds `token`, in any case.
fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|v| {
        v.to_str()
            .is_ok_and(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    })
}

/// A message from the peer.
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming {
    Text(String),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong,
    /// The peer's close frame, with its code if it gave one.
    Close(Option<u16>),
}

/// Why a socket's frames cannot be read on; each maps to the close code to answer with.
#[derive(Debug, thiserror::Error)]
pub enum WsError {
    #[error("message of {size} bytes or more is over the limit of {max}")]
    TooBig { size: u64, max: usize },
    #[error("protocol error: {0}")]
    Protocol(&'static str),
    #[error("a text message is not UTF-8")]
    NotUtf8,
    #[error("connection: {0}")]
    Io(#[from] io::Error),
}

impl WsError {
    /// The close code that tells the peer why (RFC 6455 §7.4.1); none for a dead connection.
    pub fn close_code(&self) -> Option<u16> {
        match self {
            WsError::TooBig { .. } => Some(1009),
            WsError::Protocol(_) => Some(1002),
            WsError::NotUtf8 => Some(1007),
            WsError::Io(_) => None,
        }
    }
}

/// Bytes a worker thread reads into at a time, shared by every socket it polls.
const SCRATCH: usize = 32 * 1024;
/// A payload at least this long (still to come) is read straight into its own buffer.
const DIRECT: usize = 4 * 1024;
/// The most a frame's buffer grows by before its bytes arrive: a peer that announces a
/// long frame and sends little does not get the whole length allocated.
const GROW_AHEAD: usize = 64 * 1024;

thread_local! {
    static SCRATCH_BUF: RefCell<Box<[u8]>> = RefCell::new(vec![0; SCRATCH].into_boxed_slice());
}

/// A frame whose payload is being read.
#[derive(Debug)]
struct Partial {
    fin: bool,
    opcode: u8,
    mask: [u8; 4],
    len: usize,
    payload: Vec<u8>,
}

/// Reads messages: frames reassembled, unmasked and checked.
pub struct Reader<R> {
    io: R,
    max: usize,
    /// The header read so far (2 to 14 bytes).
    head: [u8; 14],
    have: u8,
    /// What is rarely there: on the heap only while it is (every idle socket holds a
    /// `Reader`, and these took about 100 bytes of each socket's task).
    rare: Option<Box<Rare>>,
}

/// A reader's state between reads that an idle socket does not have.
#[derive(Default)]
struct Rare {
    /// A frame whose payload came in more than one read.
    frame: Option<Partial>,
    /// A fragmented text or binary message so far: its opcode and bytes.
    message: Option<(u8, Vec<u8>)>,
    /// Bytes read past the end of a message, parsed before the next read (empty, and
    /// unallocated, once they are).
    rest: Vec<u8>,
    at: usize,
}

impl<R: AsyncRead + Unpin> Reader<R> {
    /// `max`: the longest frame and the longest message taken; longer ends the socket with
    /// 1009 as soon as its header says so.
    pub fn new(io: R, max: usize) -> Self {
        Reader {
            io,
            max,
            head: [0; 14],
            have: 0,
            rare: None,
        }
    }

    /// The rare state, allocated on first use.
    fn rare(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    /// Lets the rare state go once nothing is in it.
    fn tidy(&mut self) {
        if self
            .rare
            .as_ref()
            .is_some_and(|r| r.frame.is_none() && r.message.is_none() && r.at >= r.rest.len())
        {
            self.rare = None;
        }
    }

    /// Bytes that came before the reader took over (read past the HTTP handshake), parsed
    /// before anything is read from the socket.
    pub fn with_pending(mut self, bytes: Vec<u8>) -> Self {
        if !bytes.is_empty() {
            let r = self.rare();
            r.rest = bytes;
            r.at = 0;
        }
        self
    }

    /// The next message; `None` once the connection has ended (cleanly or not).
    pub async fn next(&mut self) -> Option<Result<Incoming, WsError>> {
        poll_fn(|cx| self.poll_next(cx)).await
    }

    /// `next` as a poll (for a socket's task that polls its reader beside its writer, with no
    /// future of the reader's own in its state).
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Incoming, WsError>>> {
        self.tidy();
        let pending = self
            .rare
            .as_mut()
            .filter(|r| r.at < r.rest.len())
            .map(|r| (std::mem::take(&mut r.rest), std::mem::take(&mut r.at)));
        if let Some((rest, at)) = pending {
            let (used, out) = self.feed(&rest[at..]);
            if out.is_some() && at + used < rest.len() {
                let r = self.rare();
                r.at = at + used;
                r.rest = rest;
            }
            if out.is_some() {
                return Poll::Ready(out);
            }
        }
        loop {
            if let Some(f) = self
                .rare
                .as_mut()
                .and_then(|r| r.frame.as_mut())
                .filter(|f| f.len - f.payload.len() >= DIRECT)
            {
                // A long payload: straight into its buffer, never past the frame's end. The
                // buffer grows only once what it has room for has come.
                let left = f.len - f.payload.len();
                if f.payload.capacity() == f.payload.len() {
                    grow(&mut f.payload, f.len, left.min(GROW_AHEAD));
                }
                let start = f.payload.len();
                let want = left.min(f.payload.capacity() - start);
                let spare = &mut f.payload.spare_capacity_mut()[..want];
                let mut buf = ReadBuf::uninit(spare);
                match Pin::new(&mut self.io).poll_read(cx, &mut buf) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(e)) => return Poll::Ready(Some(Err(e.into()))),
                    Poll::Ready(Ok(())) => {
                        let n = buf.filled().len();
                        if n == 0 {
                            return Poll::Ready(None);
                        }
                        // SAFETY: `poll_read` initialised the first `n` spare bytes.
                        unsafe { f.payload.set_len(start + n) };
                        unmask(&mut f.payload[start..], f.mask, start);
                        if f.payload.len() == f.len {
                            let f = self.rare().frame.take().expect("the frame being read");
                            if let Some(out) = self.complete(f) {
                                return Poll::Ready(Some(out));
                            }
                        }
                        continue;
                    }
                }
            }
            let read = SCRATCH_BUF.with(|scratch| {
                let mut scratch = scratch.borrow_mut();
                let mut buf = ReadBuf::new(&mut scratch[..]);
                match Pin::new(&mut self.io).poll_read(cx, &mut buf) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(Err(e)) => Poll::Ready(Some(Some(Err(e.into())))),
                    Poll::Ready(Ok(())) => {
                        let n = buf.filled().len();
                        if n == 0 {
                            return Poll::Ready(Some(None));
                        }
                        let (used, out) = self.feed(&scratch[..n]);
                        if out.is_some() && used < n {
                            let r = self.rare();
                            r.rest = scratch[used..n].to_vec();
                            r.at = 0;
                        }
                        Poll::Ready(out.map(Some))
                    }
                }
            });
            match read {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(out)) => return Poll::Ready(out),
                Poll::Ready(None) => continue,
            }
        }
    }

    /// Parses `bytes` up to the end of the first message they complete; gives how many it
    /// used and that message (or error).
    fn feed(&mut self, bytes: &[u8]) -> (usize, Option<Result<Incoming, WsError>>) {
        let mut i = 0;
        // The frame being read is a local here: it is kept in the rare state only when its
        // payload has not all come in this read.
        let mut frame = self.rare.as_mut().and_then(|r| r.frame.take());
        while i < bytes.len() {
            if let Some(f) = frame.as_mut() {
                let take = (f.len - f.payload.len()).min(bytes.len() - i);
                grow(&mut f.payload, f.len, take);
                let start = f.payload.len();
                f.payload.extend_from_slice(&bytes[i..i + take]);
                unmask(&mut f.payload[start..], f.mask, start);
                i += take;
                if f.payload.len() == f.len {
                    let f = frame.take().expect("the frame being read");
                    if let Some(out) = self.complete(f) {
                        return (i, Some(out));
                    }
                }
                continue;
            }
            // A header: 2 bytes, then the extended length and the mask they announce.
            let need = if self.have < 2 {
                2
            } else {
                header_len(self.head[1])
            };
            let take = (need - self.have as usize).min(bytes.len() - i);
            self.head[self.have as usize..self.have as usize + take]
                .copy_from_slice(&bytes[i..i + take]);
            self.have += take as u8;
            i += take;
            if (self.have as usize) < need || need == 2 && header_len(self.head[1]) > 2 {
                continue;
            }
            match self.start_frame() {
                Err(e) => return (i, Some(Err(e))),
                Ok(Some(f)) if f.len == 0 => {
                    if let Some(out) = self.complete(f) {
                        return (i, Some(out));
                    }
                }
                Ok(Some(f)) => frame = Some(f),
                Ok(None) => unreachable!("a whole header was read"),
            }
        }
        if frame.is_some() {
            self.rare().frame = frame;
        }
        (i, None)
    }

    /// The frame a whole header starts, checked.
    fn start_frame(&mut self) -> Result<Option<Partial>, WsError> {
        let h = &self.head[..self.have as usize];
        let (b0, b1) = (h[0], h[1]);
        let (fin, opcode) = (b0 & 0x80 != 0, b0 & 0x0F);
        if b0 & 0x70 != 0 {
            return Err(WsError::Protocol(
                "reserved bits set: no extension was agreed",
            ));
        }
        if b1 & 0x80 == 0 {
            return Err(WsError::Protocol("a client's frame must be masked"));
        }
        let (len, at) = match b1 & 0x7F {
            126 => (u64::from(u16::from_be_bytes([h[2], h[3]])), 4),
            127 => (
                u64::from_be_bytes(h[2..10].try_into().expect("8 bytes")),
                10,
            ),
            n => (u64::from(n), 2),
        };
        let mask: [u8; 4] = h[at..at + 4].try_into().expect("4 bytes");
        self.have = 0;
        match opcode {
            op::CLOSE | op::PING | op::PONG => {
                if !fin || len > 125 {
                    return Err(WsError::Protocol(
                        "a control frame must be whole and at most 125 bytes",
                    ));
                }
            }
            op::CONTINUATION | op::TEXT | op::BINARY => {
                let message = self.rare.as_ref().and_then(|r| r.message.as_ref());
                let so_far = message.map_or(0, |(_, m)| m.len() as u64);
                if len.saturating_add(so_far) > self.max as u64 {
                    return Err(WsError::TooBig {
                        size: len.saturating_add(so_far),
                        max: self.max,
                    });
                }
                if opcode == op::CONTINUATION && message.is_none() {
                    return Err(WsError::Protocol("a continuation frame with no message"));
                }
                if opcode != op::CONTINUATION && message.is_some() {
                    return Err(WsError::Protocol(
                        "a new message before the fragmented one ended",
                    ));
                }
            }
            _ => return Err(WsError::Protocol("unknown opcode")),
        }
        let len = len as usize;
        Ok(Some(Partial {
            fin,
            opcode,
            mask,
            len,
            payload: Vec::with_capacity(len.min(GROW_AHEAD)),
        }))
    }

    /// A whole frame: the message it ends, if any.
    fn complete(&mut self, f: Partial) -> Option<Result<Incoming, WsError>> {
        match f.opcode {
            op::PING => Some(Ok(Incoming::Ping(f.payload))),
            op::PONG => Some(Ok(Incoming::Pong)),
            op::CLOSE => Some(close_payload(&f.payload)),
            op::CONTINUATION => {
                let (kind, mut bytes) = self.rare().message.take().expect("checked at the header");
                bytes.extend_from_slice(&f.payload);
                if f.fin {
                    Some(finish(kind, bytes))
                } else {
                    self.rare().message = Some((kind, bytes));
                    None
                }
            }
            kind if f.fin => Some(finish(kind, f.payload)),
            kind => {
                self.rare().message = Some((kind, f.payload));
                None
            }
        }
    }
}

/// A close frame's body (RFC 6455 §5.5.1, §7.4): empty, or a code a peer may send followed
/// by a UTF-8 reason.
fn close_payload(body: &[u8]) -> Result<Incoming, WsError> {
    let (code, reason) = match body {
        [] => return Ok(Incoming::Close(None)),
        [_] => return Err(WsError::Protocol("a close frame of one byte")),
        [a, b, reason @ ..] => (u16::from_be_bytes([*a, *b]), reason),
    };
    if !close_code_is_sendable(code) {
        return Err(WsError::Protocol("a close code no endpoint may send"));
    }
    if std::str::from_utf8(reason).is_err() {
        return Err(WsError::NotUtf8);
    }
    Ok(Incoming::Close(Some(code)))
}

/// Whether a peer may put `code` in a close frame: the codes RFC 6455 §7.4.1 defines for the
/// wire and those IANA registered since (1012–1014), and the ranges for libraries (3000–3999)
/// and applications (4000–4999). 1004 is reserved; 1005, 1006 and 1015 only report what
/// happened locally and must never be sent; anything else is unassigned.
pub fn close_code_is_sendable(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

fn finish(kind: u8, bytes: Vec<u8>) -> Result<Incoming, WsError> {
    if kind == op::TEXT {
        String::from_utf8(bytes)
            .map(Incoming::Text)
            .map_err(|_| WsError::NotUtf8)
    } else {
        Ok(Incoming::Binary(bytes))
    }
}

/// A header's whole length, from its second byte (masked: a client's frame).
fn header_len(b1: u8) -> usize {
    let ext = match b1 & 0x7F {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    2 + ext + if b1 & 0x80 != 0 { 4 } else { 0 }
}

/// Room for `more` bytes in a payload that will be `len` long: grown by at most doubling,
/// never past `len`.
fn grow(payload: &mut Vec<u8>, len: usize, more: usize) {
    let free = payload.capacity() - payload.len();
    if free < more {
        let room = more.max(payload.len()).min(len - payload.len());
        payload.reserve_exact(room);
    }
}

/// XORs `buf` with `mask`, `buf[0]` being byte `offset` of the payload.
fn unmask(buf: &mut [u8], mask: [u8; 4], offset: usize) {
    let m: [u8; 4] = std::array::from_fn(|k| mask[(offset + k) % 4]);
    let wide = u64::from_ne_bytes([m[0], m[1], m[2], m[3], m[0], m[1], m[2], m[3]]);
    let mut chunks = buf.chunks_exact_mut(8);
    for c in &mut chunks {
        let v = u64::from_ne_bytes((&*c).try_into().expect("8 bytes")) ^ wide;
        c.copy_from_slice(&v.to_ne_bytes());
    }
    for (k, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= m[k % 4];
    }
}

/// A frame being written: its header and the caller's bytes, each with how much is out.
struct Out {
    head: [u8; 10],
    head_len: u8,
    head_at: u8,
    body: Vec<u8>,
    body_at: usize,
}

/// Writes frames (a server's: unmasked). A frame that does not go out whole stays here, so
/// that the close frame can follow the rest of it.
pub struct Writer<W> {
    io: W,
    out: Option<Out>,
}

impl<W: AsyncWrite + Unpin> Writer<W> {
    pub fn new(io: W) -> Self {
        Writer { io, out: None }
    }

    /// Writes one whole frame (after the rest of an unfinished one).
    pub async fn send(&mut self, opcode: u8, body: Vec<u8>) -> io::Result<()> {
        self.finish().await?;
        if self.start(opcode, body).is_err() {
            unreachable!("no frame is unfinished once `finish` succeeded");
        }
        self.finish().await
    }

    /// Makes `body` the frame to write next (`finish` writes it); gives it back if a frame
    /// is still unfinished.
    pub fn start(&mut self, opcode: u8, body: Vec<u8>) -> Result<(), Vec<u8>> {
        if self.out.is_some() {
            return Err(body);
        }
        let mut head = [0u8; 10];
        head[0] = 0x80 | opcode;
        let head_len = match body.len() {
            n @ 0..=125 => {
                head[1] = n as u8;
                2
            }
            n @ 126..=0xFFFF => {
                head[1] = 126;
                head[2..4].copy_from_slice(&(n as u16).to_be_bytes());
                4
            }
            n => {
                head[1] = 127;
                head[2..10].copy_from_slice(&(n as u64).to_be_bytes());
                10
            }
        };
        self.out = Some(Out {
            head,
            head_len,
            head_at: 0,
            body,
            body_at: 0,
        });
        Ok(())
    }

    pub async fn text(&mut self, text: String) -> io::Result<()> {
        self.send(op::TEXT, text.into_bytes()).await
    }

    pub async fn close(&mut self, code: u16, reason: &str) -> io::Result<()> {
        let mut body = code.to_be_bytes().to_vec();
        // A close frame is at most 125 bytes: the reason is cut at a character's edge.
        let mut end = reason.len().min(123);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        body.extend_from_slice(&reason.as_bytes()[..end]);
        self.send(op::CLOSE, body).await
    }

    /// The text of a frame that did not go out whole, for the caller to keep (the writer
    /// still holds it, to finish it before a close frame).
    pub fn unsent_text(&self) -> Option<String> {
        let out = self.out.as_ref()?;
        String::from_utf8(out.body.clone()).ok()
    }

    /// Writes what is left of an unfinished frame.
    pub async fn finish(&mut self) -> io::Result<()> {
        poll_fn(|cx| self.poll_finish(cx)).await
    }

    /// `finish` as a poll: no future of its own, so a caller's state holds only a borrow of
    /// the writer while a frame waits for room in the socket (each socket's task is sized
    /// by its largest state).
    pub fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(out) = self.out.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        while (out.head_at < out.head_len) || out.body_at < out.body.len() {
            let head = &out.head[out.head_at as usize..out.head_len as usize];
            let body = &out.body[out.body_at..];
            let io = Pin::new(&mut self.io);
            let n = if io.is_write_vectored() || head.is_empty() {
                let bufs = [IoSlice::new(head), IoSlice::new(body)];
                ready!(io.poll_write_vectored(cx, &bufs))?
            } else if body.len() <= 1024 {
                // One write, not a header alone on the wire.
                let mut both = Vec::with_capacity(head.len() + body.len());
                both.extend_from_slice(head);
                both.extend_from_slice(body);
                ready!(io.poll_write(cx, &both))?
            } else {
                ready!(io.poll_write(cx, head))?
            };
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            let from_head = n.min(head.len());
            out.head_at += from_head as u8;
            out.body_at += n - from_head;
        }
        self.out = None;
        Pin::new(&mut self.io).poll_flush(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{duplex, AsyncReadExt, AsyncWriteExt};

    /// A client's frame: masked with a fixed key.
    fn client_frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [0x37, 0xfa, 0x21, 0x3d];
        let mut f = vec![(if fin { 0x80 } else { 0 }) | opcode];
        match payload.len() {
            n @ 0..=125 => f.push(0x80 | n as u8),
            n @ 126..=0xFFFF => {
                f.push(0x80 | 126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                f.push(0x80 | 127);
                f.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(&mask);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        f
    }

    async fn read_all(bytes: Vec<u8>, chunk: usize, max: usize) -> Vec<Result<Incoming, String>> {
        let (mut client, server) = duplex(1 << 20);
        let writer = tokio::spawn(async move {
            for c in bytes.chunks(chunk) {
                client.write_all(c).await.unwrap();
                tokio::task::yield_now().await;
            }
        });
        let mut r = Reader::new(server, max);
        let mut got = Vec::new();
        let end = async {
            while let Some(m) = r.next().await {
                let stop = m.is_err();
                got.push(m.map_err(|e| e.to_string()));
                if stop {
                    break;
                }
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            writer.await.unwrap();
            end.await;
        })
        .await
        .expect("the reader ends");
        got
    }

    #[tokio::test]
    async fn frames_read_whole_whatever_the_reads_split() {
        let long: String = "長い文 long text ".repeat(9000); // over 64 KiB, UTF-8
        let mut wire = client_frame(true, op::TEXT, b"{\"type\":\"chunk\"}");
        wire.extend(client_frame(true, op::PING, b"p"));
        wire.extend(client_frame(true, op::TEXT, long.as_bytes()));
        wire.extend(client_frame(false, op::TEXT, "一".as_bytes()));
        wire.extend(client_frame(true, op::PONG, b""));
        wire.extend(client_frame(false, op::CONTINUATION, "二".as_bytes()));
        wire.extend(client_frame(true, op::CONTINUATION, "三".as_bytes()));
        wire.extend(client_frame(true, op::BINARY, &[0, 1, 2]));
        wire.extend(client_frame(true, op::CLOSE, &1000u16.to_be_bytes()));
        let want = vec![
            Ok(Incoming::Text("{\"type\":\"chunk\"}".into())),
            Ok(Incoming::Ping(b"p".to_vec())),
            Ok(Incoming::Text(long.clone())),
            Ok(Incoming::Pong),
            Ok(Incoming::Text("一二三".into())),
            Ok(Incoming::Binary(vec![0, 1, 2])),
            Ok(Incoming::Close(Some(1000))),
        ];
        for chunk in [1, 3, 7, 100, 5000, 1 << 20] {
            assert_eq!(
                read_all(wire.clone(), chunk, 1 << 20).await,
                want,
                "chunk {chunk}"
            );
        }
    }

    #[tokio::test]
    async fn bad_frames_end_with_the_code_that_says_why() {
        let cases: Vec<(Vec<u8>, u16)> = vec![
            // unmasked
            (vec![0x81, 0x01, b'a'], 1002),
            // reserved bit
            (
                {
                    let mut f = client_frame(true, op::TEXT, b"a");
                    f[0] |= 0x40;
                    f
                },
                1002,
            ),
            (client_frame(true, 0x3, b"a"), 1002),
            (client_frame(false, op::PING, b"a"), 1002),
            (client_frame(true, op::PING, &[0; 126]), 1002),
            (client_frame(true, op::CONTINUATION, b"a"), 1002),
            (
                {
                    let mut f = client_frame(false, op::TEXT, b"a");
                    f.extend(client_frame(true, op::TEXT, b"b"));
                    f
                },
                1002,
            ),
            (client_frame(true, op::TEXT, &[0xff, 0xfe]), 1007),
            (client_frame(true, op::TEXT, &[b'a'; 2000]), 1009),
            (
                {
                    let mut f = client_frame(false, op::TEXT, &[b'a'; 600]);
                    f.extend(client_frame(true, op::CONTINUATION, &[b'a'; 600]));
                    f
                },
                1009,
            ),
        ];
        for (i, (wire, code)) in cases.into_iter().enumerate() {
            let (mut client, server) = duplex(1 << 16);
            client.write_all(&wire).await.unwrap();
            let mut r = Reader::new(server, 1000);
            let err = match r.next().await {
                Some(Err(e)) => e,
                Some(Ok(m)) => panic!("case {i}: read {m:?}"),
                None => panic!("case {i}: ended without an error"),
            };
            assert_eq!(err.close_code(), Some(code), "case {i}: {err}");
        }
    }

    /// What a close frame with this body reads as: its code, or the code the reader fails with.
    async fn read_close(body: &[u8]) -> Result<Option<u16>, Option<u16>> {
        let (mut client, server) = duplex(1 << 10);
        client
            .write_all(&client_frame(true, op::CLOSE, body))
            .await
            .unwrap();
        match Reader::new(server, 1000).next().await {
            Some(Ok(Incoming::Close(code))) => Ok(code),
            Some(Err(e)) => Err(e.close_code()),
            other => panic!("{body:?}: read {other:?}"),
        }
    }

    #[tokio::test]
    async fn close_codes_no_endpoint_may_send_and_reasons_not_utf8_fail_the_connection() {
        let with_code = |code: u16, reason: &[u8]| {
            let mut b = code.to_be_bytes().to_vec();
            b.extend_from_slice(reason);
            b
        };
        for code in [
            0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535,
        ] {
            assert_eq!(
                read_close(&with_code(code, b"")).await,
                Err(Some(1002)),
                "{code}"
            );
        }
        for code in [
            1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999,
            4000, 4999,
        ] {
            assert_eq!(
                read_close(&with_code(code, "理由 reason".as_bytes())).await,
                Ok(Some(code)),
                "{code}"
            );
        }
        assert_eq!(read_close(b"").await, Ok(None));
        assert_eq!(read_close(&[0x03]).await, Err(Some(1002)));
        let not_utf8 = with_code(1000, &[0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xcf, 0x83, 0xff]);
        assert_eq!(read_close(&not_utf8).await, Err(Some(1007)));
    }

    #[tokio::test]
    async fn a_long_frame_announced_but_not_sent_is_not_allocated_whole() {
        let (mut client, server) = duplex(1 << 16);
        let mut head = vec![0x81, 0x80 | 127];
        head.extend_from_slice(&(900u64 << 20).to_be_bytes());
        head.extend_from_slice(&[1, 2, 3, 4]);
        client.write_all(&head).await.unwrap();
        client.write_all(&[0; 10]).await.unwrap();
        let mut r = Reader::new(server, 1 << 30);
        // One poll reads all that was sent (it is in the pipe) and then waits for the rest.
        let pending = futures_util::FutureExt::now_or_never(r.next());
        assert!(pending.is_none(), "nothing whole was sent");
        let f = r.rare.as_ref().and_then(|r| r.frame.as_ref());
        let f = f.expect("a frame under way");
        assert_eq!(f.payload.len(), 10);
        assert!(
            f.payload.capacity() <= GROW_AHEAD,
            "{}",
            f.payload.capacity()
        );
    }

    #[tokio::test]
    async fn the_reader_keeps_nothing_between_messages() {
        let mut wire = client_frame(true, op::TEXT, &[b'x'; 70_000]);
        wire.extend(client_frame(true, op::TEXT, b"a"));
        wire.extend(client_frame(true, op::TEXT, b"b"));
        let (mut client, server) = duplex(1 << 20);
        client.write_all(&wire).await.unwrap();
        let mut r = Reader::new(server, 1 << 20);
        for _ in 0..3 {
            r.next().await.unwrap().unwrap();
        }
        // The next read starts by letting the rare state go: nothing is in it.
        r.tidy();
        assert!(
            r.rare.is_none(),
            "no frame, message or bytes read ahead are kept"
        );
    }

    #[tokio::test]
    async fn frames_written_are_what_a_client_reads() {
        let (client, server) = duplex(64);
        let (mut rd, _wr) = tokio::io::split(client);
        let mut w = Writer::new(server);
        let long = "x".repeat(70_000);
        let sent = long.clone();
        let writing = tokio::spawn(async move {
            w.text("hi".into()).await.unwrap();
            w.text(sent).await.unwrap();
            w.send(op::PING, Vec::new()).await.unwrap();
            w.close(4008, &"很慢".repeat(40)).await.unwrap();
            assert!(w.out.is_none(), "nothing is kept once written");
        });
        let mut got = Vec::new();
        // The writer's end closes when it is done: read to the end.
        rd.read_to_end(&mut got).await.unwrap();
        writing.await.unwrap();
        assert_eq!(got.len(), 4 + 10 + 70_000 + 2 + 2 + 125);
        assert_eq!(&got[..4], &[0x81, 2, b'h', b'i']);
        assert_eq!(&got[4..14], &[0x81, 127, 0, 0, 0, 0, 0, 1, 0x11, 0x70]);
        assert!(got[14..70_014].iter().all(|&b| b == b'x'));
        assert_eq!(&got[70_014..70_016], &[0x89, 0]);
        let close = &got[70_016..];
        assert_eq!(close[0], 0x88);
        assert!(close[1] <= 125);
        assert_eq!(&close[2..4], &4008u16.to_be_bytes());
        assert!(std::str::from_utf8(&close[4..2 + close[1] as usize]).is_ok());
    }

    #[test]
    fn the_handshake_answers_the_rfc_example_and_refuses_what_is_not_one() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, Upgrade"),
        );
        h.insert(header::UPGRADE, HeaderValue::from_static("WebSocket"));
        h.insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        h.insert(
            header::SEC_WEBSOCKET_KEY,
            HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ=="),
        );
        let ok = handshake(&Method::GET, Version::HTTP_11, &h).unwrap();
        // RFC 6455 §1.3's own example.
        assert_eq!(
            ok[header::SEC_WEBSOCKET_ACCEPT],
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        assert_eq!(
            handshake(&Method::POST, Version::HTTP_11, &h)
                .unwrap_err()
                .0,
            StatusCode::METHOD_NOT_ALLOWED
        );
        let mut v8 = h.clone();
        v8.insert(header::SEC_WEBSOCKET_VERSION, HeaderValue::from_static("8"));
        let (status, extra, _) = handshake(&Method::GET, Version::HTTP_11, &v8).unwrap_err();
        assert_eq!(
            (status, &extra[header::SEC_WEBSOCKET_VERSION]),
            (
                StatusCode::UPGRADE_REQUIRED,
                &HeaderValue::from_static("13")
            )
        );
        let mut plain = h.clone();
        plain.remove(header::UPGRADE);
        assert_eq!(
            handshake(&Method::GET, Version::HTTP_11, &plain)
                .unwrap_err()
                .0,
            StatusCode::UPGRADE_REQUIRED
        );
        for bad in [
            "short",
            // 24 characters ending in `==`, but not base64 of 16 bytes
            "!!!!!!!!!!!!!!!!!!!!!!==",
            "dGhlIHNhbXBsZSBub25jZR==", // stray bits after the 16th byte
            "dGhlIHNhbXBsZSBub25jZQ",   // unpadded
            "dGhlIHNhbXBsZSBub25jZSE=", // 17 bytes
            "dGhlIHNhbXBsZSBub25j",     // 15 bytes
        ] {
            let mut nokey = h.clone();
            nokey.insert(header::SEC_WEBSOCKET_KEY, HeaderValue::from_static(bad));
            let (status, _, why) = handshake(&Method::GET, Version::HTTP_11, &nokey).unwrap_err();
            assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
            assert!(why.contains("16 bytes"), "{why}");
        }
        let mut missing = h.clone();
        missing.remove(header::SEC_WEBSOCKET_KEY);
        assert!(handshake(&Method::GET, Version::HTTP_11, &missing).is_err());
        let mut twice = h.clone();
        twice.append(
            header::SEC_WEBSOCKET_KEY,
            HeaderValue::from_static("AQIDBAUGBwgJCgsMDQ4PEA=="),
        );
        let (status, _, why) = handshake(&Method::GET, Version::HTTP_11, &twice).unwrap_err();
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(why.contains("once"), "{why}");
    }

    use proptest::prelude::*;

    /// A message as a client may send it: text or binary, cut into 1–3 frames, with a ping
    /// before it or inside it.
    fn message() -> impl Strategy<Value = (bool, Vec<u8>, usize, Option<usize>)> {
        (
            any::<bool>(),
            prop_oneof![
                prop::collection::vec(any::<u8>(), 0..40),
                prop::collection::vec(any::<u8>(), 4000..9000),
            ],
            1usize..4,
            prop::option::of(0usize..3),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn any_messages_read_back_whatever_their_fragments_and_reads(
            msgs in prop::collection::vec(message(), 1..6),
            chunk in prop_oneof![1usize..8, 8usize..600, 600usize..20_000],
        ) {
            let mut wire = Vec::new();
            let mut want = Vec::new();
            for (text, bytes, parts, ping_at) in msgs {
                let payload = if text {
                    String::from_utf8_lossy(&bytes).into_owned().into_bytes()
                } else {
                    bytes
                };
                let step = payload.len().div_ceil(parts).max(1);
                let pieces: Vec<&[u8]> = if payload.is_empty() {
                    vec![&[]]
                } else {
                    payload.chunks(step).collect()
                };
                for (i, piece) in pieces.iter().enumerate() {
                    if ping_at == Some(i) {
                        wire.extend(client_frame(true, op::PING, b"!"));
                        want.push(Ok(Incoming::Ping(b"!".to_vec())));
                    }
                    let opcode = match (i, text) {
                        (0, true) => op::TEXT,
                        (0, false) => op::BINARY,
                        _ => op::CONTINUATION,
                    };
                    wire.extend(client_frame(i + 1 == pieces.len(), opcode, piece));
                }
                want.push(Ok(if text {
                    Incoming::Text(String::from_utf8(payload).unwrap())
                } else {
                    Incoming::Binary(payload)
                }));
            }
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let got = rt.block_on(read_all(wire, chunk, 1 << 20));
            prop_assert_eq!(got, want);
        }

        #[test]
        fn any_bytes_end_in_a_message_an_error_or_more_to_read(
            data in prop::collection::vec(any::<u8>(), 0..400),
            cut in 1usize..50,
        ) {
            // The parser alone (no socket): it never panics, never reads past what it was
            // given, and never holds a frame longer than the limit.
            let mut r = Reader::new(tokio::io::empty(), 256);
            'feed: for piece in data.chunks(cut) {
                let mut at = 0;
                while at < piece.len() {
                    let (used, out) = r.feed(&piece[at..]);
                    prop_assert!(used <= piece.len() - at);
                    at += used;
                    if let Some(f) = r.rare.as_ref().and_then(|r| r.frame.as_ref()) {
                        prop_assert!(f.len <= 256);
                    }
                    match out {
                        Some(Err(_)) => break 'feed,
                        Some(Ok(_)) => continue,
                        None => prop_assert_eq!(at, piece.len()),
                    }
                }
            }
        }
    }

    #[test]
    fn unmasking_at_any_offset_matches_byte_by_byte() {
        let mask = [1, 2, 3, 4];
        let data: Vec<u8> = (0..=255).collect();
        for off in 0..8 {
            let mut fast = data.clone();
            unmask(&mut fast, mask, off);
            let slow: Vec<u8> = data
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ mask[(i + off) % 4])
                .collect();
            assert_eq!(fast, slow, "offset {off}");
        }
    }
}
