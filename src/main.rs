//! The `aicard` binary: parses the command line and hands over to `aicard::cli`.

use clap::Parser;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("aicard=info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = aicard::cli::Cli::parse();
    match aicard::cli::run(cli).await {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("aicard: {e:#}");
            std::process::exit(2);
        }
    }
}
