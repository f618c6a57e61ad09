//! `kiln embed`: sentence embeddings from a sentence-transformers model directory, or CLIP image
//! and text embeddings from a transformers CLIPModel folder (kiln-models).

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use kiln_models::{ClipModel, Embeddings, EncodeOptions, Image, LoadOptions, Precision, SentenceEmbedder};
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
    /// An image to embed with a CLIP folder (config.json model_type "clip"): a .npy of uint8
    /// [height, width, 3] RGB (numpy's `np.save(f, np.asarray(pil_image))`). Repeatable; image
    /// rows come before text rows.
    #[arg(long)]
    image: Vec<String>,
    /// Spread the texts' batches over several GPUs, one copy of the model on each: "all" (every
    /// GPU of the best kind) or adapter indices as `kiln devices` lists them ("0,1").
    #[arg(long)]
    devices: Option<String>,
    /// Print how long each phase of this process's start took (instance, device, probes,
    /// pipeline cache, tokenizer, weights, pipelines, first compute, readback) to stderr.
    #[arg(long)]
    timings: bool,
    /// The texts; when none are given (and no --image), one per line from stdin.
    texts: Vec<String>,
}

/// Whether `dir` holds a CLIPModel (config.json's model_type "clip").
fn is_clip(dir: &str) -> bool {
    let cfg = std::fs::read_to_string(std::path::Path::new(dir).join("config.json")).unwrap_or_default();
    serde_json::from_str::<serde_json::Value>(&cfg).is_ok_and(|v| v["model_type"] == "clip")
}

/// An RGB image from a .npy of uint8 [H, W, 3].
fn read_image(path: &str) -> Result<(Vec<u8>, usize, usize)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {path}"))?;
    let f = npyz::NpyFile::new(&bytes[..]).with_context(|| format!("{path}: not a .npy file"))?;
    let shape = f.shape().to_vec();
    let descr = f.dtype().descr();
    if shape.len() != 3 || shape[2] != 3 {
        bail!("{path}: a .npy of uint8 [height, width, 3] RGB expected, got {descr} {shape:?}");
    }
    let (h, w) = (shape[0] as usize, shape[1] as usize);
    let px = f.into_vec::<u8>().with_context(|| format!("{path}: uint8 pixels expected, got {descr}"))?;
    Ok((px, h, w))
}

/// `kiln embed` for a CLIP folder: images, then texts.
fn clip(args: &Args, texts: &[String]) -> Result<Embeddings> {
    if args.f16 || args.batch_size != 32 {
        bail!("--f16 and --batch-size are for sentence-transformers models; a CLIP folder runs in f32, 32 per pass");
    }
    if args.devices.is_some() {
        bail!("--devices is for sentence-transformers models; a CLIP folder runs on one GPU");
    }
    let model = ClipModel::load(&args.model).with_context(|| format!("loading the CLIP model in {}", args.model))?;
    let images = args.image.iter().map(|p| read_image(p)).collect::<Result<Vec<_>>>()?;
    let views: Vec<Image> = images.iter().map(|(p, h, w)| Image { pixels: p, height: *h, width: *w }).collect();
    let normalize = !args.no_normalize;
    let mut e = model.encode_image(&views, normalize)?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let t = model.encode_text(&refs, normalize)?;
    e.data.extend(t.data);
    e.rows += t.rows;
    Ok(e)
}

fn bar(len: usize, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len as u64);
    pb.set_style(ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len}").unwrap().progress_chars("=> "));
    pb.set_message(what.to_string());
    pb
}

pub fn main(args: Args) -> Result<()> {
    crate::timings::start(args.timings);
    if args.batch_size == 0 {
        bail!("--batch-size must be at least 1");
    }
    let texts = if args.texts.is_empty() && args.image.is_empty() {
        std::io::stdin().lock().lines().collect::<std::io::Result<Vec<String>>>().context("reading texts from stdin")?
    } else {
        args.texts.clone()
    };
    if is_clip(&args.model) {
        let e = clip(&args, &texts)?;
        return write(&args, &e);
    }
    if !args.image.is_empty() {
        bail!("--image needs a CLIP folder (config.json model_type \"clip\"); {} is not one", args.model);
    }
    let precision = if args.f16 { Precision::F16 } else { Precision::F32 };
    let refs: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
    let opts = EncodeOptions { batch_size: args.batch_size, normalize: args.no_normalize.then_some(false) };
    if let Some(spec) = &args.devices {
        let devices = if spec.trim() == "all" {
            kiln_models::replicas::all_devices()?
        } else {
            let ix = spec
                .split(',')
                .map(|p| p.trim().parse::<usize>())
                .collect::<Result<Vec<_>, _>>()
                .with_context(|| format!("--devices {spec:?}: \"all\" or adapter indices such as 0,1"))?;
            kiln_models::replicas::devices(&ix)?
        };
        let model = SentenceEmbedder::load_replicated(&args.model, &devices, LoadOptions { precision })
            .with_context(|| format!("loading the model in {}", args.model))?;
        return write(&args, &model.encode_with(&refs, opts)?);
    }
    // Hidden until the first report brings the real total (a bar of length 0 draws full, "0/0").
    let load_bar = bar(0, "loading");
    load_bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    let mut shown = false;
    let loading = kiln_core::startup::span("model load (SentenceEmbedder)");
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
    drop(loading);

    let enc_bar = bar(refs.len(), "embedding");
    if refs.len() <= args.batch_size {
        enc_bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let embedding = kiln_core::startup::span("embeddings (tokenize, forward, readback)");
    let e = model.encode_progress(&refs, opts, |done, _| enc_bar.set_position(done as u64))?;
    enc_bar.finish_and_clear();
    drop(embedding);
    kiln_core::startup::time("result written", || write(&args, &e))?;
    crate::timings::finish(model);
    Ok(())
}

/// The embeddings to `--out` as .npy, or to stdout as one JSON array per line.
fn write(args: &Args, e: &Embeddings) -> Result<()> {
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
