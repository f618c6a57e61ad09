//! `kiln serve [--config FILE]`: runs kiln-serve until SIGTERM or Ctrl-C. Without a config it
//! runs the embedded default (one `dev` tenant on localhost), whose token is `KILN_SERVE_TOKEN`
//! or a random one printed here.

use anyhow::{anyhow, Context, Result};
use clap::Args as ClapArgs;
use kiln_serve::config;
use std::path::PathBuf;

#[derive(ClapArgs)]
pub struct Args {
    /// A TOML config (docs/DESIGN.md, "kiln serve"); default: the embedded one.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

pub fn main(args: Args) -> Result<()> {
    let cfg = match &args.config {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            config::parse(&text).map_err(|e| anyhow!("{}: {e}", p.display()))?
        }
        None => {
            let mut c = config::parse(config::DEFAULT_CONFIG).map_err(|e| anyhow!(e))?;
            let (token, generated) = config::apply_dev_token(&mut c).map_err(|e| anyhow!(e))?;
            if generated {
                println!("kiln serve: tenant \"dev\", token {token} (set {} to choose it)", config::DEV_TOKEN_ENV);
            } else {
                println!("kiln serve: tenant \"dev\", token from {}", config::DEV_TOKEN_ENV);
            }
            c
        }
    };
    let s = kiln_serve::run_until_signal(cfg, |running| {
        println!("kiln serve: API on http://{}, metrics on http://{}/metrics", running.api_addr, running.metrics_addr);
        let devices: Vec<String> =
            running.state.devices.iter().map(|d| format!("{} ({}, {})", d.index, d.name, d.backend)).collect();
        if devices.is_empty() {
            println!("kiln serve: no GPU adapter found: sessions cannot open (`kiln devices` says why)");
        } else {
            println!("kiln serve: sessions placed on devices {}", devices.join(", "));
        }
    })
    .context("binding the listeners")?;
    println!(
        "kiln serve: stopped; {} sessions closed{}",
        s.sessions_closed,
        if s.drained { "" } else { "; requests still running at the grace period were answered SHUTTING_DOWN" }
    );
    Ok(())
}
