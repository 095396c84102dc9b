//! The `aicard` binary: parses the command line and hands over to `aicard::cli`.

use clap::Parser;
use tracing_subscriber::EnvFilter;

/// The hub allocates many small, short-lived buffers per frame across thousands of sockets;
/// mimalloc's per-thread free lists cost far less than glibc malloc there (see
/// docs/benchmarks.md).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let cli = aicard::cli::Cli::parse();
    // The demo prints its own progress; the hub's info logs would drown it.
    let default = match cli.command {
        aicard::cli::Command::Demo(_) => "aicard=warn",
        _ => "aicard=info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default)),
        )
        .with_writer(std::io::stderr)
        .init();
    match aicard::cli::run(cli).await {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("aicard: {e:#}");
            std::process::exit(2);
        }
    }
}
