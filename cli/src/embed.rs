//! `kiln embed`: sentence embeddings from a sentence-transformers model directory (kiln-models).

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use kiln_models::{EncodeOptions, LoadOptions, Precision, SentenceEmbedder};
use std::io::{BufRead, Write};

#[derive(clap::Args)]
pub struct Args {
    /// The model directory (config.json, model.safetensors, tokenizer.json, ...), e.g. what
    /// scripts/fetch-minilm.sh puts in build/models/all-MiniLM-L6-v2.
    #[arg(long)]
    model: String,
    /// Texts per forward pass.
    #[arg(long, default_value = "32")]
    batch_size: usize,
    /// Skip the L2 normalisation the model's modules.json asks for.
    #[arg(long)]
    no_normalize: bool,
    /// Compute in f16 (weights cast once at load; needs an adapter with SHADER_F16). The
    /// output is float32 either way.
    #[arg(long)]
    f16: bool,
    /// Write the embeddings as one float32 .npy [n, dim] instead of printing them (one JSON
    /// array per line).
    #[arg(long)]
    out: Option<String>,
    /// The texts; when none are given, one per line from stdin.
    texts: Vec<String>,
}

fn bar(len: usize, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len as u64);
    pb.set_style(ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len}").unwrap().progress_chars("=> "));
    pb.set_message(what.to_string());
    pb
}

pub fn main(args: Args) -> Result<()> {
    if args.batch_size == 0 {
        bail!("--batch-size must be at least 1");
    }
    let texts = if args.texts.is_empty() {
        std::io::stdin().lock().lines().collect::<std::io::Result<Vec<String>>>().context("reading texts from stdin")?
    } else {
        args.texts
    };
    // Hidden until the first report brings the real total (a bar of length 0 draws full, "0/0").
    let load_bar = bar(0, "loading");
    load_bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    let mut shown = false;
    let precision = if args.f16 { Precision::F16 } else { Precision::F32 };
    let model = SentenceEmbedder::load_with(&args.model, LoadOptions { precision }, |done, total| {
        load_bar.set_length(total as u64);
        load_bar.set_position(done as u64);
        if !shown {
            shown = true;
            load_bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
    })
    .with_context(|| format!("loading the model in {}", args.model))?;
    load_bar.finish_and_clear();

    let refs: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
    let opts = EncodeOptions { batch_size: args.batch_size, normalize: args.no_normalize.then_some(false) };
    let enc_bar = bar(refs.len(), "embedding");
    if refs.len() <= args.batch_size {
        enc_bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let e = model.encode_progress(&refs, opts, |done, _| enc_bar.set_position(done as u64))?;
    enc_bar.finish_and_clear();

    match &args.out {
        Some(path) => {
            crate::npy::write_vec(path, &[e.rows as u64, e.dim as u64], &e.data)?;
            eprintln!("kiln embed: {} x {} float32 -> {path}", e.rows, e.dim);
        }
        None => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            for i in 0..e.rows {
                let row: Vec<String> = e.row(i).iter().map(|x| format!("{x:e}")).collect();
                writeln!(out, "[{}]", row.join(","))?;
            }
            out.flush()?;
        }
    }
    Ok(())
}
