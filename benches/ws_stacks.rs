//! What one WebSocket connection holds on the server's heap, for the hub's stack and the
//! alternatives, side by side in one run: the hub's own frames (`hub::wsframe`), tungstenite
//! 0.29 as the hub configured it before (512-byte read buffer, no write buffer),
//! tokio-websockets 0.13 and fastwebsockets 0.10.
//!
//! `hub::wsframe` reads through one 32 KiB scratch buffer per server thread; it is made on
//! the first read and counted here, shared by the connections (32 KiB / N each).
//!
//! Each stack serves N connections over loopback, taken over after the handshake (the HTTP
//! upgrade is the same for all three and is not what a connection keeps). A counting
//! allocator counts only the server runtime's threads; the clients (tokio-tungstenite) run
//! on another runtime. Live heap per connection is read three times:
//! 1. idle, just connected;
//! 2. after one long exchange: the client sends `--long` bytes, the server answers with as
//!    many (a long reply in, a long task out);
//! 3. after a short exchange that follows it (what an idle tab keeps once it has worked).
//!
//! Run: `cargo bench --bench ws_stacks -- --conns 400 --long 4096`

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, Ordering};

use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

static LIVE: AtomicI64 = AtomicI64::new(0);

thread_local! {
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn counted() -> bool {
    COUNTED.try_with(|c| c.get()).unwrap_or(false)
}

/// Counts the live bytes that the server's threads allocated (and freed, wherever freed).
struct Counting;

/// Every allocation carries a header holding whether it was counted, so a block freed on
/// another thread is subtracted only if it was added. The header takes `offset` bytes (the
/// block's alignment, 16 at the least), so the block after it keeps its alignment.
const HEADER: usize = 16;

fn with_header(layout: Layout) -> Option<(Layout, usize)> {
    let offset = layout.align().max(HEADER);
    let full = Layout::from_size_align(layout.size().checked_add(offset)?, offset).ok()?;
    Some((full, offset))
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some((full, offset)) = with_header(layout) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `full` has a non-zero size (it includes the header).
        let base = unsafe { System.alloc(full) };
        if base.is_null() {
            return base;
        }
        let on = counted();
        if on {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        // SAFETY: `base` is aligned to at least 16 and valid for `offset` ≥ 16 bytes.
        unsafe {
            base.cast::<u64>().write(u64::from(on));
            base.add(offset)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let (full, offset) = with_header(layout).expect("the layout was allocated");
        // SAFETY: `ptr` came from `alloc` above, `offset` bytes past the block's start.
        unsafe {
            let base = ptr.sub(offset);
            if base.cast::<u64>().read() == 1 {
                LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
            }
            System.dealloc(base, full);
        }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

#[derive(Parser, Debug)]
#[command(
    about = "Live heap per WebSocket connection: the hub's own frames against tungstenite, tokio-websockets and fastwebsockets"
)]
struct Args {
    /// Connections each stack serves.
    #[arg(long, default_value_t = 400)]
    conns: usize,
    /// Bytes of the long message sent each way.
    #[arg(long, default_value_t = 4096)]
    long: usize,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Clone, Copy, Debug)]
enum Stack {
    Hub,
    Tungstenite,
    TokioWebsockets,
    FastWebsockets,
}

impl Stack {
    fn name(self) -> &'static str {
        match self {
            Stack::Hub => "the hub's own frames (hub::wsframe)",
            Stack::Tungstenite => "tungstenite 0.29 (512 B read buffer)",
            Stack::TokioWebsockets => "tokio-websockets 0.13",
            Stack::FastWebsockets => "fastwebsockets 0.10",
        }
    }
}

/// One server connection: answers every text message with a text of the same length, and
/// reports each answer on `done`.
async fn serve(stack: Stack, tcp: TcpStream, done: mpsc::UnboundedSender<()>) {
    match stack {
        Stack::Hub => {
            use aicard::hub::wsframe::{Incoming, Reader, Writer};
            // Split as the hub splits its upgraded connection.
            let (rd, wr) = tokio::io::split(tcp);
            let (mut reader, mut writer) = (Reader::new(rd, 1 << 20), Writer::new(wr));
            while let Some(Ok(msg)) = reader.next().await {
                match msg {
                    Incoming::Text(t) => {
                        if writer.text("a".repeat(t.len())).await.is_err() {
                            return;
                        }
                        let _ = done.send(());
                    }
                    Incoming::Close(_) => return,
                    _ => {}
                }
            }
        }
        Stack::Tungstenite => {
            let config = WebSocketConfig::default()
                .read_buffer_size(512)
                .write_buffer_size(0);
            let mut ws = WebSocketStream::from_raw_socket(tcp, Role::Server, Some(config)).await;
            while let Some(Ok(msg)) = ws.next().await {
                if let Message::Text(t) = msg {
                    let answer = "a".repeat(t.len());
                    if ws.send(Message::Text(answer.into())).await.is_err() {
                        return;
                    }
                    let _ = done.send(());
                }
            }
        }
        Stack::TokioWebsockets => {
            let mut ws = tokio_websockets::ServerBuilder::new().serve(tcp);
            while let Some(Ok(msg)) = ws.next().await {
                if let Some(t) = msg.as_text() {
                    let answer = "a".repeat(t.len());
                    if ws
                        .send(tokio_websockets::Message::text(answer))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    let _ = done.send(());
                }
            }
        }
        Stack::FastWebsockets => {
            let mut ws =
                fastwebsockets::WebSocket::after_handshake(tcp, fastwebsockets::Role::Server);
            ws.set_auto_pong(true);
            while let Ok(frame) = ws.read_frame().await {
                match frame.opcode {
                    fastwebsockets::OpCode::Text => {
                        let answer = vec![b'a'; frame.payload.len()];
                        let out =
                            fastwebsockets::Frame::text(fastwebsockets::Payload::Owned(answer));
                        if ws.write_frame(out).await.is_err() {
                            return;
                        }
                        let _ = done.send(());
                    }
                    fastwebsockets::OpCode::Close => return,
                    _ => {}
                }
            }
        }
    }
}

type Client = WebSocketStream<TcpStream>;

/// Every client sends `len` bytes and reads the answer.
async fn exchange(clients: &mut [Client], len: usize, done: &mut mpsc::UnboundedReceiver<()>) {
    let text = "q".repeat(len);
    for c in clients.iter_mut() {
        c.send(Message::Text(text.clone().into()))
            .await
            .expect("client send");
    }
    for c in clients.iter_mut() {
        loop {
            match c.next().await.expect("open").expect("read") {
                Message::Text(t) => {
                    assert_eq!(t.len(), len);
                    break;
                }
                _ => continue,
            }
        }
    }
    for _ in 0..clients.len() {
        done.recv().await.expect("server answered");
    }
}

fn per_conn(before: i64, n: usize) -> f64 {
    (LIVE.load(Ordering::Relaxed) - before) as f64 / n as f64
}

async fn measure(stack: Stack, a: &Args, server: &tokio::runtime::Handle) -> (f64, f64, f64) {
    let (done_tx, mut done) = mpsc::unbounded_channel();
    let listener = server
        .spawn(async { TcpListener::bind("127.0.0.1:0").await.expect("bind") })
        .await
        .expect("bind task");
    let addr = listener.local_addr().expect("addr");
    let (accepted_tx, mut accepted) = mpsc::unbounded_channel::<()>();
    let n = a.conns;
    let before = LIVE.load(Ordering::Relaxed);
    let acceptor = server.spawn(async move {
        let mut conns = Vec::with_capacity(n);
        for _ in 0..n {
            let (tcp, _) = listener.accept().await.expect("accept");
            let done = done_tx.clone();
            conns.push(tokio::spawn(serve(stack, tcp, done)));
            let _ = accepted_tx.send(());
        }
        conns
    });
    let mut clients = Vec::with_capacity(n);
    for _ in 0..n {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        clients.push(WebSocketStream::from_raw_socket(tcp, Role::Client, None).await);
    }
    for _ in 0..n {
        accepted.recv().await.expect("accepted");
    }
    let conns = acceptor.await.expect("acceptor");
    // A first short exchange: every server connection has polled its socket once.
    exchange(&mut clients, 16, &mut done).await;
    let idle = per_conn(before, n);
    exchange(&mut clients, a.long, &mut done).await;
    let after_long = per_conn(before, n);
    exchange(&mut clients, 16, &mut done).await;
    let after_short = per_conn(before, n);
    for mut c in clients {
        let _ = c.close(None).await;
    }
    // Every server connection has ended (and freed what it held) before the next stack is
    // counted.
    for conn in conns {
        conn.await.expect("connection task");
    }
    (idle, after_long, after_short)
}

fn main() {
    let a = Args::parse();
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .on_thread_start(|| COUNTED.with(|c| c.set(true)))
        .build()
        .expect("server runtime");
    let clients = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    println!(
        "live heap per connection on the server ({} connections; long = {} bytes):",
        a.conns, a.long
    );
    for stack in [
        Stack::Hub,
        Stack::Tungstenite,
        Stack::TokioWebsockets,
        Stack::FastWebsockets,
    ] {
        let (idle, long, short) = clients.block_on(measure(stack, &a, server.handle()));
        println!(
            "  {:<40} idle {:>7.0} B   after a long exchange {:>7.0} B   after a short one that follows {:>7.0} B",
            stack.name(),
            idle,
            long,
            short
        );
    }
}
