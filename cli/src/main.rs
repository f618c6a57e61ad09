//! The `kiln` command: list adapters, run the op demo, run a custom kernel on .npy files,
//! benchmark the op library.

mod bench;
mod bench_dp;
mod bench_embed;
mod bench_llm;
mod conformance;
mod demo;
mod embed;
mod fuzz;
mod generate;
mod npy;
mod run;
mod serve;
mod serve_load;
mod timings;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "kiln",
    version,
    about = "Kiln: one WebGPU compute runtime for Rust, C, Julia, Elixir and Python",
    after_help = DEV_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The developer commands, hidden from the command list above it (they serve the build and CI:
/// the Makefile runs them) but still runnable; a test checks that every hidden command is here.
const DEV_HELP: &str = "\
Developer commands (for Kiln's own build and tests; `kiln <command> --help` for each):
  conformance  Run the cross-language conformance vectors through kiln-core
  fuzz         Attack the kernel compiler or the op API with seeded random input
  serve-load   Load-test `kiln serve` in-process on localhost";

#[derive(Subcommand)]
enum Command {
    /// List every adapter and mark the one Kiln uses (KILN_ADAPTER / KILN_BACKENDS override).
    Devices,
    /// Run every op family on the chosen adapter and check it against the CPU reference.
    Demo(demo::Args),
    /// Run a custom WGSL kernel on .npy inputs and write .npy outputs.
    Run(run::Args),
    /// Time the op library at realistic sizes (GB/s, TFLOP/s).
    Bench(bench::Args),
    /// Sentence embeddings from a sentence-transformers model directory (BERT family: bert,
    /// roberta, xlm-roberta, mpnet; all-MiniLM-L6-v2, bge, e5, all-mpnet-base-v2, ...):
    /// `kiln embed --model DIR [--batch-size N] [--out FILE.npy] TEXT...` (stdin when no TEXT);
    /// or CLIP image and text embeddings from a CLIPModel folder: `kiln embed --model DIR
    /// [--image IMG.npy]... [TEXT...]`.
    Embed(embed::Args),
    /// Text from a Llama-architecture GGUF model (SmolLM2), streamed as it is produced:
    /// `kiln generate --model FILE.gguf --prompt TEXT [--max-tokens N] [--temperature T] [--seed S] [--chat]`.
    Generate(generate::Args),
    /// Run the cross-language conformance vectors (tests/conformance) through kiln-core.
    #[command(hide = true)]
    Conformance(conformance::Args),
    /// Attack the kernel compiler (wgsl) or the op API (ops) with seeded random input for a
    /// bounded time; fails on a panic, an INTERNAL error or a device that stops working.
    #[command(hide = true)]
    Fuzz(fuzz::Args),
    /// Serve sessions, tensors, ops and WGSL kernels over HTTP to many tenants:
    /// `kiln serve [--config FILE.toml]` (default: one `dev` tenant on 127.0.0.1:8080).
    Serve(serve::Args),
    /// Load-test `kiln serve` in-process on localhost: well-behaved clients alone, then with a
    /// flooding tenant and an infinite-loop kernel; reports throughput and p50/p99 latency.
    #[command(hide = true)]
    ServeLoad(serve_load::Args),
}

fn devices() -> anyhow::Result<()> {
    let list = kiln_core::adapters();
    if list.is_empty() {
        kiln_core::device()?;
    }
    println!(
        "{:<3} {:<2} {:<40} {:<14} {:<8} {:<28} {:>10} {:>10} {:>5} {:>4} {:>4}",
        "#", "", "name", "type", "backend", "driver", "max buf", "max wg/dim", "f16", "ts", "sg"
    );
    for a in list {
        let driver = format!("{} {}", a.driver, a.driver_info);
        println!(
            "{:<3} {:<2} {:<40} {:<14} {:<8} {:<28} {:>10} {:>10} {:>5} {:>4} {:>4}",
            a.index,
            if a.chosen { "*" } else { "" },
            truncate(&a.name, 40),
            a.device_type,
            a.backend,
            truncate(driver.trim(), 28),
            human_bytes(a.max_buffer_size),
            a.max_compute_workgroups_per_dimension,
            yes(a.shader_f16),
            yes(a.timestamp_query),
            yes(a.subgroups)
        );
    }
    println!("* = chosen. Override with KILN_ADAPTER=<index or name part>, KILN_BACKENDS=vulkan,gl,metal,dx12.");
    Ok(())
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

pub(crate) fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Devices => devices(),
        Command::Demo(args) => demo::main(args),
        Command::Run(args) => run::main(args),
        Command::Embed(args) => embed::main(args),
        Command::Generate(args) => generate::main(args),
        Command::Bench(args) => bench::main(args),
        Command::Conformance(args) => conformance::main(args),
        Command::Fuzz(args) => fuzz::main(args),
        Command::Serve(args) => serve::main(args),
        Command::ServeLoad(args) => serve_load::main(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kiln: {}", error_chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes joined by ": ", leaving out what the message already holds: a
/// cause whose Display includes its source (`path: cause` errors) would otherwise print the
/// cause twice ("model directory not found: model directory not found"), and a context naming
/// the file, then the error naming it again, the path twice.
fn error_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let mut text = cause.to_string();
        while let Some((head, rest)) = text.split_once(": ") {
            if head.is_empty() || !out.contains(head) {
                break;
            }
            text = rest.to_string();
        }
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}
