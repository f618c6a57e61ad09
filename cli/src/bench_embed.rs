//! `kiln bench`'s embed section: all-MiniLM-L6-v2 sentence embeddings end to end (texts in,
//! float32 embeddings on the host out, tokenization included), as bench/torch_embed.py measures
//! sentence-transformers on CUDA: latency of one 16-token sentence, throughput of 256 sentences
//! of 128 tokens, f32 and f16, and the peak GPU memory in use during each.

use crate::bench::{gpu_steps, wall_median};
use anyhow::{ensure, Result};
use kiln_models::{EncodeOptions, LoadOptions, Precision, SentenceEmbedder};
use serde_json::{json, Value};
use std::path::Path;

/// Whole-token words of BERT's uncased vocabulary (entries 2000–3000 of vocab.txt that are
/// lower-case words of 4+ letters): each is one token, so a sentence of n - 2 of them is n
/// tokens with [CLS] and [SEP]. bench/torch_embed.py has the same list and formula.
pub(crate) const WORDS: [&str; 48] = [
    "with", "that", "from", "were", "this", "they", "which", "have", "first", "also", "their", "been", "when", "after",
    "there", "into", "time", "would", "what", "about", "said", "over", "then", "other", "more", "like", "back", "them",
    "only", "some", "could", "where", "just", "during", "before", "made", "school", "through", "than", "years", "most",
    "world", "between", "down", "well", "three", "year", "while",
];

/// Sentence `i` of `tokens` tokens.
pub(crate) fn sentence(i: usize, tokens: usize) -> String {
    (0..tokens.saturating_sub(2)).map(|j| WORDS[(i * 7 + j) % WORDS.len()]).collect::<Vec<_>>().join(" ")
}

pub fn run(model_dir: &Path, quick: bool, reps: usize) -> Result<Vec<Value>> {
    let dev = kiln_core::device()?;
    let (batch, seq) = if quick { (16, 32) } else { (256, 128) };
    let one = [sentence(0, 16)];
    let many: Vec<String> = (0..batch).map(|i| sentence(i, seq)).collect();
    let mut rows = Vec::new();
    for precision in [Precision::F32, Precision::F16] {
        if precision == Precision::F16 && !dev.has_f16() {
            continue;
        }
        let tag = if precision == Precision::F16 { "f16" } else { "f32" };
        let model = SentenceEmbedder::load_with(model_dir, LoadOptions { precision }, |_, _| {})?;
        let lens = model.tokenize(&[one[0].as_str(), many[0].as_str()])?;
        ensure!(lens[0].0.len() == 16 && lens[1].0.len() == seq, "bench sentences are not 16 / {seq} tokens");
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let opts = EncodeOptions { batch_size: batch, normalize: None };

        dev.synchronize()?;
        dev.reset_peak_memory();
        let s1 = wall_median(3, (4 * reps).max(10), || {
            model.encode_with(&[one[0].as_str()], opts)?;
            Ok(())
        })?;
        let peak1 = dev.memory_stats().peak_bytes;
        dev.reset_peak_memory();
        let sb = wall_median(1, reps.max(3), || {
            model.encode_with(&refs, opts)?;
            Ok(())
        })?;
        let peakb = dev.memory_stats().peak_bytes;
        let steps = gpu_steps(|mark| model.encode_batch_marked(&refs, true, mark))?;
        let gpu1: f64 = gpu_steps(|mark| model.encode_batch_marked(&[one[0].as_str()], true, mark))?
            .iter()
            .map(|s| s.seconds)
            .sum();
        if gpu1 > 0.0 {
            println!("  one 16-token sentence ({tag}): {:.3} ms of GPU time, {:.3} ms wall", gpu1 * 1e3, s1 * 1e3);
        }
        let tok = wall_median(1, reps.max(3), || {
            model.tokenize(&refs)?;
            Ok(())
        })?;
        for (op, size, s, n, peak) in [
            (format!("embed_b1_{tag}"), "1x16 tokens".to_string(), s1, 1, peak1),
            (format!("embed_b{batch}_{tag}"), format!("{batch}x{seq} tokens"), sb, batch, peakb),
        ] {
            let per_s = n as f64 / s;
            println!(
                "{op:<20} {size:<22} {:>10.3} {:>10.0} sentences/s, peak GPU memory {:.1} MiB",
                s * 1e3,
                per_s,
                peak as f64 / (1 << 20) as f64
            );
            rows.push(json!({
                "op": op, "size": size, "seconds": s, "timer": "wall", "wall_seconds": s,
                "sentences_per_s": per_s, "peak_gpu_bytes": peak,
            }));
        }
        if !steps.is_empty() {
            let total: f64 = steps.iter().map(|s| s.seconds).sum();
            println!("  GPU time per step of one {batch}x{seq} batch ({tag}; each step summed over the layers):");
            for s in &steps {
                let (step, t) = (s.name, s.seconds);
                println!("    {step:<44} {:>8.2} ms {:>5.1}%", t * 1e3, 100.0 * t / total);
            }
            println!("    {:<44} {:>8.2} ms of {:.2} ms wall per batch", "GPU total", total * 1e3, sb * 1e3);
            println!("    {:<44} {:>8.2} ms (host)", "tokenize", tok * 1e3);
            let map: serde_json::Map<String, Value> =
                steps.iter().map(|s| (s.name.to_string(), json!(s.seconds))).collect();
            if let Some(last) = rows.last_mut() {
                last["gpu_steps_seconds"] = Value::Object(map);
                last["tokenize_seconds"] = json!(tok);
            }
        }
    }
    Ok(rows)
}
