//! `kiln generate`: text from a Llama-architecture GGUF model (SmolLM2), streamed to stdout as
//! it is produced.

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kiln_models::{CausalLM, GenerateOptions, GenerationStats, SamplingOptions};
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
    /// 0 is greedy. (Negative numbers parse, so that `--temperature -1` is refused by name
    /// rather than read as an unknown option.)
    #[arg(long, default_value = "0", allow_negative_numbers = true)]
    temperature: f32,
    /// Sample among the k likeliest tokens only (0: all).
    #[arg(long, default_value = "0")]
    top_k: usize,
    /// Sample among the likeliest tokens whose probabilities add up to p.
    #[arg(long, default_value = "1.0", allow_negative_numbers = true)]
    top_p: f32,
    /// Penalise tokens among the last 64 (llama.cpp's rule; 1.0: off).
    #[arg(long, default_value = "1.0", allow_negative_numbers = true)]
    repetition_penalty: f32,
    /// Seed of the sampler: the same seed gives the same text on every device.
    #[arg(long, default_value = "0")]
    seed: u64,
    /// Stop before this string (may be repeated).
    #[arg(long)]
    stop: Vec<String>,
    /// Wrap the prompt in the model's chat template (the GGUF's, or ChatML) as a user message.
    #[arg(long)]
    chat: bool,
    /// Print how long each phase of this process's start took (instance, device, probes,
    /// pipeline cache, tokenizer, weights, pipelines, prefill, readback) to stderr.
    #[arg(long)]
    timings: bool,
}

pub fn main(args: Args) -> Result<()> {
    crate::timings::start(args.timings);
    if !(args.top_p > 0.0 && args.top_p <= 1.0) {
        bail!("--top-p must be in (0, 1], got {}", args.top_p);
    }
    if !(args.temperature >= 0.0 && args.temperature.is_finite()) {
        bail!("--temperature must be >= 0 (0 is greedy), got {}", args.temperature);
    }
    if !(args.repetition_penalty > 0.0 && args.repetition_penalty.is_finite()) {
        bail!("--repetition-penalty must be positive (1.0 is off), got {}", args.repetition_penalty);
    }
    // The bar appears with the file's real total (layers + 1) at its first report, not as a full
    // bar at "0/0", and is left drawn at total/total: finish() draws the last position, which
    // indicatif's rate limit may have skipped (it was seen stopping at 14/31 before a clear).
    let bar = ProgressBar::hidden();
    let mut shown = false;
    let loading = kiln_core::startup::span("model load (CausalLM)");
    let model = CausalLM::load_with_progress(&args.model, |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        if !shown {
            shown = true;
            bar.set_style(ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len}").unwrap().progress_chars("=> "));
            bar.set_message("loading");
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    })
    .with_context(|| format!("loading {}", args.model))?;
    bar.finish();
    drop(loading);

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
    let mut generation = kiln_core::startup::time("prompt tokenized", || model.generate(&prompt, opts))?;
    let prompt_tokens = generation.stats().prompt_tokens;
    // Prefill (the whole prompt through the model) runs in the first step and takes seconds on
    // a CPU adapter: a spinner says so until the first piece, then goes before any text is
    // written to stdout (both may be one terminal).
    let spinner = ProgressBar::new_spinner();
    spinner.set_message(format!("prefill: {prompt_tokens} prompt tokens"));
    if args.max_tokens > 0 {
        spinner.enable_steady_tick(std::time::Duration::from_millis(100));
    }
    let first = kiln_core::startup::time("first token (prefill, sampling, readback)", || generation.next());
    spinner.finish_and_clear();
    let mut out = std::io::stdout().lock();
    if !args.chat {
        write!(out, "{}", args.prompt)?;
        out.flush()?;
    }
    let rest = kiln_core::startup::span("the rest of the text (decode, written)");
    for piece in first.into_iter().chain(generation.by_ref()) {
        out.write_all(piece?.as_bytes())?;
        out.flush()?;
    }
    writeln!(out)?;
    drop(rest);
    eprintln!("{}", summary(generation.stats()));
    drop(generation);
    crate::timings::finish(model);
    Ok(())
}

/// The timing line: a rate only where something was timed (`--max-tokens 0` runs no prefill,
/// and one token needs no decode step).
fn summary(s: &GenerationStats) -> String {
    let prompt = if s.prefill.is_zero() {
        format!("prompt {} tokens (prefill not run)", s.prompt_tokens)
    } else {
        format!(
            "prompt {} tokens in {:.2} s ({:.1} tok/s)",
            s.prompt_tokens,
            s.prefill.as_secs_f64(),
            s.prefill_tokens_per_s()
        )
    };
    let decode =
        if s.decode.is_zero() { String::new() } else { format!(", decode {:.1} tok/s", s.decode_tokens_per_s()) };
    format!("{prompt}; generated {} tokens{decode}", s.generated_tokens)
}

#[cfg(test)]
mod tests {
    use super::summary;
    use kiln_models::GenerationStats;
    use std::time::Duration;

    #[test]
    fn no_rate_for_what_did_not_run() {
        // Issue 28: --max-tokens 0 printed ~1e9 tok/s (the prompt over a zero duration).
        let s = GenerationStats { prompt_tokens: 9, ..Default::default() };
        let line = summary(&s);
        assert_eq!(line, "prompt 9 tokens (prefill not run); generated 0 tokens");
        assert_eq!(s.prefill_tokens_per_s(), 0.0);
        // One token: prefill ran, no decode step.
        let s = GenerationStats {
            prompt_tokens: 9,
            prefill: Duration::from_millis(500),
            generated_tokens: 1,
            ..Default::default()
        };
        assert_eq!(summary(&s), "prompt 9 tokens in 0.50 s (18.0 tok/s); generated 1 tokens");
        let s = GenerationStats { decode: Duration::from_secs(2), generated_tokens: 5, ..s };
        assert!(summary(&s).ends_with("generated 5 tokens, decode 2.0 tok/s"), "{}", summary(&s));
    }
}
