//! The loopback floor, shared by `benches/loopback_floor.rs` and `benches/load.rs`: what the
//! kernel alone needs to fan a small message out to N TCP sockets on this machine, with no
//! WebSocket, JSON, hub or async runtime in the way.
//!
//! N loopback connections are opened. Sender threads (as many as the hub has cores) write one
//! message to every socket; one receiver thread waits in epoll (mio) and reads, like a load
//! tool would. Latency is taken per socket from the round's start to the read, exactly as
//! `benches/load.rs` takes it per tab, so the two figures compare directly.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mio::net::TcpStream as MioStream;
use mio::{Events, Interest, Poll, Token};

/// What to measure (`benches/loopback_floor.rs`; the load tool runs a [`Rig`]'s rounds itself).
#[allow(dead_code)]
pub struct Floor {
    pub sockets: usize,
    pub senders: usize,
    pub bytes: usize,
    pub rounds: usize,
    pub warmup: usize,
}

/// What was measured (warm-up rounds left out).
#[allow(dead_code)]
pub struct FloorRun {
    /// Every socket's latency in every round, in ms, sorted.
    pub per_socket: Vec<f64>,
    /// Each round's last arrival, in ms, in round order.
    pub rounds: Vec<f64>,
    /// CPU time of the senders and the receiver per round, in ms (kernel included).
    pub cpu_ms_per_round: f64,
}

/// CPU time a process has used so far, in ms (summed over its threads; Linux only).
pub fn cpu_ms(pid: u32) -> Option<f64> {
    let mut ns = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        ns += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(ns as f64 / 1e6)
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Reads every socket until each has delivered `bytes` more; returns each socket's arrival.
fn receive_round(
    poll: &mut Poll,
    events: &mut Events,
    clients: &mut [MioStream],
    bytes: usize,
) -> Vec<Instant> {
    let mut got = vec![0usize; clients.len()];
    let mut at = vec![None; clients.len()];
    let mut left = clients.len();
    let mut buf = [0u8; 4096];
    let give_up = Instant::now() + Duration::from_secs(30);
    while left > 0 {
        assert!(
            Instant::now() < give_up,
            "{left} sockets got nothing in 30 s"
        );
        poll.poll(events, Some(Duration::from_millis(100)))
            .expect("epoll");
        for ev in events.iter() {
            let i = ev.token().0;
            // mio is edge-triggered: read until the socket would block.
            loop {
                match clients[i].read(&mut buf) {
                    Ok(0) => panic!("socket {i} closed"),
                    Ok(n) => {
                        got[i] += n;
                        if got[i] >= bytes && at[i].is_none() {
                            at[i] = Some(Instant::now());
                            left -= 1;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => panic!("read: {e}"),
                }
            }
        }
    }
    at.into_iter().map(|t| t.expect("arrived")).collect()
}

/// Open loopback sockets with their sender threads, ready to run rounds one at a time: the
/// load tool runs one floor round right before each of the hub's rounds, so that both see
/// the same moment of this machine's noise.
pub struct Rig {
    poll: Poll,
    events: Events,
    clients: Vec<MioStream>,
    starts: Vec<mpsc::Sender<()>>,
    handles: Vec<std::thread::JoinHandle<()>>,
    bytes: usize,
}

impl Rig {
    /// Opens `sockets` loopback connections, their server ends shared out to `senders`
    /// threads that each write `bytes` to every socket of theirs per round.
    pub fn open(sockets: usize, senders: usize, bytes: usize) -> Rig {
        let senders = senders.max(1);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let poll = Poll::new().expect("poll");
        let mut clients = Vec::with_capacity(sockets);
        let mut servers: Vec<Vec<TcpStream>> = (0..senders).map(|_| Vec::new()).collect();
        for i in 0..sockets {
            let c = TcpStream::connect(addr).expect("connect");
            c.set_nonblocking(true).expect("nonblocking");
            let mut c = MioStream::from_std(c);
            poll.registry()
                .register(&mut c, Token(i), Interest::READABLE)
                .expect("register");
            clients.push(c);
            let (s, _) = listener.accept().expect("accept");
            s.set_nodelay(true).expect("nodelay");
            servers[i % senders].push(s);
        }
        // Each sender waits for a round's start, writes its share and waits again.
        let msg = vec![b'x'; bytes];
        let mut starts = Vec::new();
        let mut handles = Vec::new();
        for mut share in servers {
            let (tx, rx) = mpsc::channel::<()>();
            starts.push(tx);
            let msg = msg.clone();
            handles.push(std::thread::spawn(move || {
                while rx.recv().is_ok() {
                    for s in &mut share {
                        s.write_all(&msg).expect("write");
                    }
                }
            }));
        }
        Rig {
            poll,
            events: Events::with_capacity(1024),
            clients,
            starts,
            handles,
            bytes,
        }
    }

    /// One round: every socket's latency from the round's start to its read, in ms, in
    /// socket order.
    pub fn round(&mut self) -> Vec<f64> {
        let t0 = Instant::now();
        for s in &self.starts {
            s.send(()).expect("sender alive");
        }
        let at = receive_round(
            &mut self.poll,
            &mut self.events,
            &mut self.clients,
            self.bytes,
        );
        at.iter()
            .map(|t| t.duration_since(t0).as_secs_f64() * 1000.0)
            .collect()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.starts.clear();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// Runs the rounds back to back (`benches/loopback_floor.rs`); panics (with what went wrong) if the loopback misbehaves.
#[allow(dead_code)]
pub fn measure(f: &Floor) -> FloorRun {
    let mut rig = Rig::open(f.sockets, f.senders, f.bytes);
    let mut all = Vec::new();
    let mut rounds = Vec::new();
    let mut cpu = 0.0;
    for round in 0..f.warmup + f.rounds {
        let cpu0 = cpu_ms(std::process::id());
        let ms = rig.round();
        if round >= f.warmup {
            rounds.push(ms.iter().copied().fold(0.0, f64::max));
            all.extend(ms);
            if let (Some(a), Some(b)) = (cpu0, cpu_ms(std::process::id())) {
                cpu += b - a;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(rig);
    all.sort_by(|a, b| a.total_cmp(b));
    FloorRun {
        per_socket: all,
        rounds,
        cpu_ms_per_round: cpu / f.rounds.max(1) as f64,
    }
}
