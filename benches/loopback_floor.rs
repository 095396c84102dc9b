//! Loopback floor: what the kernel alone needs to fan a small message out to N TCP sockets on
//! this machine, with no WebSocket, JSON, hub or async runtime in the way (see
//! `benches/support/floor.rs`). `benches/load.rs` runs one round of the same measurement right
//! before each of its own rounds and prints its fan-out as a multiple of this floor.
//!
//! Run: `cargo bench --bench loopback_floor -- --sockets 1000 --senders 2 --rounds 20`

use clap::Parser;

#[path = "support/floor.rs"]
mod floor;

#[derive(Parser, Debug)]
#[command(about = "Loopback TCP fan-out floor (no hub): the kernel's share of a fan-out")]
struct Args {
    /// Sockets each round writes to (the fan-out width).
    #[arg(long, default_value_t = 1_000)]
    sockets: usize,
    /// Sender threads; the hub runs one runtime worker per core.
    #[arg(long, default_value_t = 2)]
    senders: usize,
    /// Bytes per message (a `task` frame is about 300).
    #[arg(long, default_value_t = 300)]
    bytes: usize,
    /// Rounds to measure.
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// Rounds run first and left out of the figures.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() {
    let mut args = Args::parse();
    if !args.bench {
        // Run by `cargo test --all-targets`: a small smoke run that proves the tool works.
        args.sockets = args.sockets.min(50);
        args.rounds = args.rounds.min(2);
    }
    let f = floor::Floor {
        sockets: args.sockets,
        senders: args.senders.max(1),
        bytes: args.bytes,
        rounds: args.rounds,
        warmup: args.warmup,
    };
    println!(
        "loopback floor: {} sockets, {} sender threads, 1 epoll receiver, {} B per message",
        f.sockets, f.senders, f.bytes
    );
    let run = floor::measure(&f);
    let mut sorted = run.rounds.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let in_order: Vec<String> = run.rounds.iter().map(|ms| format!("{ms:.1}")).collect();
    println!(
        "per-socket latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; whole round p50 {:.2} ms",
        floor::percentile(&run.per_socket, 0.50),
        floor::percentile(&run.per_socket, 0.99),
        run.per_socket.last().copied().unwrap_or(f64::NAN),
        floor::percentile(&sorted, 0.50),
    );
    println!("whole rounds in order (ms): {}", in_order.join(" "));
    println!(
        "CPU per round (senders + receiver, kernel included): {:.2} ms, {:.1} µs per message",
        run.cpu_ms_per_round,
        run.cpu_ms_per_round / f.sockets.max(1) as f64 * 1000.0
    );
}
