//! `kiln serve-load`: the load test of kiln-serve (serve/src/load.rs) with its numbers printed.

use anyhow::{bail, Result};
use clap::Args as ClapArgs;
use kiln_serve::load::{describe, run, LoadOptions};
use std::time::Duration;

#[derive(ClapArgs)]
pub struct Args {
    /// Well-behaved concurrent clients.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// Seconds in all (half alone, half with the attackers).
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// At most this many requests per phase.
    #[arg(long, default_value_t = 200_000)]
    pub max_requests: u64,
    /// The bound: p99 with attackers <= FACTOR x p99 alone + SLACK ms.
    #[arg(long, default_value_t = 3.0)]
    pub bound_factor: f64,
    #[arg(long, default_value_t = 250)]
    pub bound_slack_ms: u64,
}

pub fn main(a: Args) -> Result<()> {
    let o = LoadOptions {
        clients: a.clients,
        duration: Duration::from_secs(a.seconds),
        max_requests: a.max_requests,
        bound_factor: a.bound_factor,
        bound_slack: Duration::from_millis(a.bound_slack_ms),
    };
    println!(
        "serve-load: {} clients, {} s, bound p99(attacked) <= {} x p99(alone) + {} ms",
        a.clients, a.seconds, a.bound_factor, a.bound_slack_ms
    );
    match run(&o) {
        Ok((alone, attacked)) => {
            println!("{}", describe("alone", &alone));
            println!("{}", describe("with attackers", &attacked));
            println!("serve-load: ok");
            Ok(())
        }
        Err(e) => bail!("serve-load failed: {e}"),
    }
}
