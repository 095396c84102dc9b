//! Spawning the hub's cold-path tasks (start-up loops, followers, per-run and per-call work):
//! each future is boxed first, so tokio's task cell and harness are built once per output
//! type instead of once per `async` block. They are built for both of tokio's schedulers,
//! and with some hundred spawn sites that was over a tenth of the crate's LLVM IR and of the
//! release build's thin-LTO time (docs/benchmarks.md, "The loop of minutes"). The cost is one
//! allocation per task and a virtual call per poll, which only the per-connection and
//! per-task paths of the hub would feel; those (`hub::ws`, `hub::serve`, `hub::tasks`,
//! `ask`, …) keep calling `tokio::spawn` with their own future types.

use std::future::Future;
use std::pin::Pin;

use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

/// A spawned task's future once boxed: the one future type tokio instantiates per output.
pub type BoxedTask<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// `tokio::spawn` of the boxed future.
pub fn task<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> JoinHandle<T> {
    tokio::spawn(Box::pin(fut) as BoxedTask<T>)
}

/// `tracker.spawn` of the boxed future: the tracker waits for it at shutdown.
pub fn tracked<T: Send + 'static>(
    tracker: &TaskTracker,
    fut: impl Future<Output = T> + Send + 'static,
) -> JoinHandle<T> {
    tracker.spawn(Box::pin(fut) as BoxedTask<T>)
}
