//! `kiln generate`: text from a Llama-architecture GGUF model (SmolLM2), streamed to stdout as
//! it is produced.

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use kiln_models::{CausalLM, GenerateOptions, SamplingOptions};
use std::io::Write;

#[derive(clap::Args)]
pub struct Args {
    /// The .gguf file, e.g. what scripts/fetch-smollm2.sh puts in build/models/smollm2.
    #[arg(long)]
    model: String,
    /// The prompt (with --chat: the user's message).
    #[arg(long)]
    prompt: String,
    /// Most tokens to generate.
    #[arg(long, default_value = "128")]
    max_tokens: usize,
    /// 0 is greedy.
    #[arg(long, default_value = "0")]
    temperature: f32,
    /// Sample among the k likeliest tokens only (0: all).
    #[arg(long, default_value = "0")]
    top_k: usize,
    /// Sample among the likeliest tokens whose probabilities add up to p.
    #[arg(long, default_value = "1.0")]
    top_p: f32,
    /// Penalise tokens among the last 64 (llama.cpp's rule; 1.0: off).
    #[arg(long, default_value = "1.0")]
    repetition_penalty: f32,
    /// Seed of the sampler: the same seed gives the same text on every device.
    #[arg(long, default_value = "0")]
    seed: u64,
    /// Stop before this string (may be repeated).
    #[arg(long)]
    stop: Vec<String>,
    /// Wrap the prompt in the model's chat template (ChatML) as a user message.
    #[arg(long)]
    chat: bool,
}

pub fn main(args: Args) -> Result<()> {
    if !(args.top_p > 0.0 && args.top_p <= 1.0) {
        bail!("--top-p must be in (0, 1]");
    }
    if !(args.temperature >= 0.0 && args.temperature.is_finite()) {
        bail!("--temperature must be 0 or more");
    }
    if !(args.repetition_penalty > 0.0 && args.repetition_penalty.is_finite()) {
        bail!("--repetition-penalty must be positive");
    }
    let bar = ProgressBar::new(0);
    bar.set_style(ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len}").unwrap().progress_chars("=> "));
    bar.set_message("loading");
    let model = CausalLM::load_with_progress(&args.model, |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })
    .with_context(|| format!("loading {}", args.model))?;
    bar.finish_and_clear();

    let prompt = if args.chat { model.chat_prompt(&args.prompt)? } else { args.prompt.clone() };
    let opts = GenerateOptions {
        max_tokens: args.max_tokens,
        sampling: SamplingOptions {
            temperature: args.temperature,
            top_k: args.top_k,
            top_p: args.top_p,
            repetition_penalty: args.repetition_penalty,
            seed: args.seed,
            ..Default::default()
        },
        stop: args.stop,
        stop_at_eos: true,
    };
    let mut generation = model.generate(&prompt, opts)?;
    let mut out = std::io::stdout().lock();
    if !args.chat {
        write!(out, "{}", args.prompt)?;
        out.flush()?;
    }
    for piece in generation.by_ref() {
        out.write_all(piece?.as_bytes())?;
        out.flush()?;
    }
    writeln!(out)?;
    let s = generation.stats();
    eprintln!(
        "prompt {} tokens in {:.2} s ({:.1} tok/s); generated {} tokens, decode {:.1} tok/s",
        s.prompt_tokens,
        s.prefill.as_secs_f64(),
        s.prefill_tokens_per_s(),
        s.generated_tokens,
        s.decode_tokens_per_s()
    );
    Ok(())
}
