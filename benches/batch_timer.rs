//! What a fan-out's deadline costs per task: one timer per task (each reply raced against
//! its own `Sleep`) against one timer for the batch (each reply raced against a shared
//! cancellation, which the batch's single `Sleep` fires). This is the waiting pattern of
//! `HubHost::ask_all` / `Ticket::wait_until`, without sockets, so the difference is not
//! lost in the kernel's send.
//!
//! Run: `cargo bench --bench batch_timer -- --tasks 1000 --rounds 400`

use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::future::join_all;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

#[derive(Parser, Debug)]
#[command(
    about = "What a fan-out's deadline costs per task: a timer per task against one for the batch"
)]
struct Args {
    /// Tasks in each fan-out.
    #[arg(long, default_value_t = 1000)]
    tasks: usize,
    /// Rounds of each kind, alternating.
    #[arg(long, default_value_t = 400)]
    rounds: usize,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// Every task waits on its reply or its own deadline.
async fn per_task(n: usize) -> Duration {
    let t0 = Instant::now();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| oneshot::channel::<u32>()).unzip();
    let all = join_all(
        rxs.into_iter()
            .map(|rx| async move { tokio::time::timeout_at(deadline, rx).await.is_ok() }),
    );
    tokio::pin!(all);
    // Every wait is registered (first poll) before the replies come, as in a fan-out.
    assert!(futures_util::poll!(&mut all).is_pending());
    for tx in txs {
        let _ = tx.send(1);
    }
    let done = all.await;
    assert!(done.iter().all(|ok| *ok));
    t0.elapsed()
}

/// Every task waits on its reply or the batch's cancellation; one timer fires it.
async fn one_timer(n: usize) -> Duration {
    let t0 = Instant::now();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    let expired = CancellationToken::new();
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| oneshot::channel::<u32>()).unzip();
    let all = join_all(rxs.into_iter().map(|rx| {
        let expired = &expired;
        async move {
            tokio::select! {
                biased;
                r = rx => r.is_ok(),
                () = expired.cancelled() => false,
            }
        }
    }));
    tokio::pin!(all);
    let timer = tokio::time::sleep_until(deadline);
    tokio::pin!(timer);
    assert!(futures_util::poll!(&mut all).is_pending());
    assert!(futures_util::poll!(&mut timer).is_pending());
    for tx in txs {
        let _ = tx.send(1);
    }
    let done = tokio::select! {
        done = &mut all => done,
        () = &mut timer => {
            expired.cancel();
            all.await
        }
    };
    assert!(done.iter().all(|ok| *ok));
    t0.elapsed()
}

fn median_us(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e6
}

fn main() {
    let a = Args::parse();
    // One thread: the time measured is the CPU the waiting costs.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let (mut each, mut shared) = (Vec::new(), Vec::new());
    rt.block_on(async {
        for _ in 0..20 {
            per_task(a.tasks).await;
            one_timer(a.tasks).await;
        }
        // Alternating, so drift on a noisy machine falls on both.
        for _ in 0..a.rounds {
            each.push(per_task(a.tasks).await);
            shared.push(one_timer(a.tasks).await);
        }
    });
    let (e, s) = (median_us(each), median_us(shared));
    let n = a.tasks as f64;
    println!(
        "{} tasks × {} rounds (median): a timer per task {:.1} µs ({:.3} µs per task); \
         one timer for the batch {:.1} µs ({:.3} µs per task); ratio {:.2}×",
        a.tasks,
        a.rounds,
        e,
        e / n,
        s,
        s / n,
        e / s
    );
}
