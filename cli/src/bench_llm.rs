//! `kiln bench`'s llm section: SmolLM2-135M-Instruct from its Q4_1 GGUF (kiln-models'
//! CausalLM, weights quantized on the GPU), measured as bench/torch_llm.py measures
//! transformers on CUDA: prefill of a 512-token prompt, time to first token after 128, greedy
//! decode after 128 and after 1920 tokens (a 2048-token context), each token read back to the
//! host, and the peak GPU memory in use. The prompts are the same token ids on both sides.
//! Decode is also measured through `generate` itself, serial (the loop it had) and GPU-resident
//! (ids kept on the GPU, tokens recorded ahead), with each token's split: wall, GPU time, host
//! recording, wait.

use crate::bench::{gpu_steps, host_steps, median, wall_median, StepTime};
use anyhow::Result;
use kiln_models::decode_loop::LOOKAHEAD;
use kiln_models::{Backend, BatchProducts, CausalLM, GenerateOptions};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;

/// SmolLM2's vocabulary: the prompt ids are taken modulo it, as in bench/torch_llm.py.
const VOCAB: usize = 49152;

pub(crate) fn ids(n: usize, salt: usize) -> Vec<u32> {
    (0..n).map(|i| ((i * 7919 + 13 + salt) % VOCAB) as u32).collect()
}

/// GPU seconds per step of one decode token after `ctx` tokens (summed over the layers), from a
/// GPU timer stopped and restarted at each of the model's marks, and the wall time of a token
/// decoded normally: what the GPU does against what the token costs. Returns the GPU seconds of
/// the whole token (None without timestamp queries).
fn decode_breakdown(model: &CausalLM, ctx: usize) -> Result<Option<f64>> {
    let mut cache = model.cache_with_capacity(ctx + 8)?;
    let t = model.forward_greedy(&ids(ctx, 3), &mut cache)?;
    let start = Instant::now();
    let t = model.forward_greedy(&[t], &mut cache)?;
    let wall = start.elapsed().as_secs_f64();
    let steps = gpu_steps(|mark| model.forward_marked(&[t], &mut cache, mark))?;
    if steps.is_empty() {
        return Ok(None);
    }
    let gpu: f64 = steps.iter().map(|s| s.seconds).sum();
    print_steps(&format!("GPU time per step of one decode token after {ctx} tokens"), &steps);
    println!("    a token decoded unmarked: {:.3} ms wall", wall * 1e3);
    let t = model.forward_greedy(&[t], &mut cache)?;
    let (host, wall) = host_steps(|mark| model.forward_marked(&[t], &mut cache, mark))?;
    print_steps("host time recording each step of a decode token", &host);
    let recorded: f64 = host.iter().map(|s| s.seconds).sum();
    println!(
        "    the rest of the token's {:.3} ms wall (submit, wait, readback): {:.3} ms",
        wall * 1e3,
        (wall - recorded) * 1e3
    );
    let mut pcache = model.cache_with_capacity(128)?;
    let steps = gpu_steps(|mark| model.forward_marked(&ids(128, 5), &mut pcache, mark))?;
    print_steps("GPU time per step of a 128-token prefill", &steps);
    Ok(Some(gpu))
}

/// Per decode token of a greedy `generate` run after a `ctx`-token prompt, medians over rounds:
/// wall, host recording, submits and time blocked on token ids (GenerationStats), for the serial loop
/// (lookahead 0: record, read the id, record the next) or the GPU-resident one.
struct LoopSplit {
    wall: f64,
    recording: f64,
    submitting: f64,
    waiting: f64,
}

fn generate_split(model: &CausalLM, ctx: usize, n_decode: usize, lookahead: usize, reps: usize) -> Result<LoopSplit> {
    let (mut wall, mut rec, mut sub, mut wait) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for rep in 0..reps.div_ceil(2).max(1) + 1 {
        let opts = GenerateOptions { max_tokens: n_decode + 1, stop_at_eos: false, ..Default::default() };
        let mut g = model.generate_from_ids(ids(ctx, 3), opts).with_lookahead(lookahead);
        for piece in g.by_ref() {
            piece?;
        }
        let s = g.stats();
        let n = s.generated_tokens.saturating_sub(1).max(1) as f64;
        if rep > 0 {
            wall.push(s.decode.as_secs_f64() / n);
            rec.push(s.decode_recording.as_secs_f64() / n);
            sub.push(s.decode_submitting.as_secs_f64() / n);
            wait.push(s.decode_waiting.as_secs_f64() / n);
        }
    }
    Ok(LoopSplit { wall: median(wall), recording: median(rec), submitting: median(sub), waiting: median(wait) })
}

fn print_steps(title: &str, steps: &[StepTime]) {
    let total: f64 = steps.iter().map(|s| s.seconds).sum();
    println!("  {title} (summed over the layers):");
    for s in steps {
        let (name, passes) = (s.name, s.passes);
        println!("    {name:<44} {:>8.3} ms {:>5.1}%  ({passes} passes)", s.seconds * 1e3, 100.0 * s.seconds / total);
    }
    println!("    {:<44} {:>8.3} ms", "total", total * 1e3);
}

/// The llm section; `prefill_only` (`--filter llm_prefill`) stops after the prefill and
/// first-token rows, with the GPU time per step of a prefill of the same length.
pub fn run(path: &Path, quick: bool, reps: usize, prefill_only: bool) -> Result<Vec<Value>> {
    let dev = kiln_core::device()?;
    let model = CausalLM::load(path)?;
    let (prefill_n, n_decode, long_ctx) = if quick { (64, 16, 256) } else { (512, 128, 2048) };
    // Warm-up at the measured lengths: the product kernels' tilings (and so their pipelines)
    // depend on the row count, and a first compile inside a median of 2 once read as 4x slower
    // prefill on the H200 (2026-11-28).
    model.forward(&ids(prefill_n, 0), &mut model.new_cache()?)?;
    model.forward_greedy(&ids(128, 0), &mut model.new_cache()?)?;
    dev.synchronize()?;
    dev.reset_peak_memory();
    let pre = wall_median(0, reps, || {
        model.forward(&ids(prefill_n, 1), &mut model.new_cache()?)?;
        Ok(())
    })?;
    let ttft = wall_median(0, reps, || {
        model.forward_greedy(&ids(128, 2), &mut model.new_cache()?)?;
        Ok(())
    })?;
    let mut rows = Vec::new();
    let base = |op: String, size: String, seconds: f64| json!({"op": op, "size": size, "seconds": seconds, "timer": "wall", "wall_seconds": seconds});
    let mut push = |mut row: Value, tokens_per_s: Option<f64>, versus: &str| {
        row["compare_to"] = json!([format!("{versus}_f16"), format!("{versus}_f32")]);
        if let Some(t) = tokens_per_s {
            row["tokens_per_s"] = json!(t);
        }
        println!(
            "{:<20} {:<22} {:>10.3} ms{}",
            row["op"].as_str().unwrap_or(""),
            row["size"].as_str().unwrap_or(""),
            row["seconds"].as_f64().unwrap_or(0.0) * 1e3,
            tokens_per_s.map_or(String::new(), |t| format!(" {t:>10.0} tokens/s"))
        );
        rows.push(row);
    };
    push(
        base("llm_prefill".into(), format!("{prefill_n} tokens"), pre / prefill_n as f64),
        Some(prefill_n as f64 / pre),
        "llm_prefill",
    );
    push(base("llm_ttft".into(), "128-token prompt".into(), ttft), None, "llm_ttft");
    if prefill_only {
        let mut cache = model.new_cache()?;
        let steps = gpu_steps(|mark| model.forward_marked(&ids(prefill_n, 5), &mut cache, mark))?;
        print_steps(&format!("GPU time per step of a {prefill_n}-token prefill"), &steps);
        // And per op (each dispatch in a pass of its own): which kernels the steps spend it in.
        let mut cache = model.new_cache()?;
        let (result, profile) = kiln_core::profile::profile(|| model.forward(&ids(prefill_n, 6), &mut cache))?;
        result?;
        println!("  GPU time per op of a {prefill_n}-token prefill (each dispatch in a pass of its own):");
        for r in profile.rows.iter().filter(|r| r.share >= 0.005) {
            println!("    {:<44} {:>8.3} ms {:>5.1}%  ({} calls)", r.op, r.total_s * 1e3, 100.0 * r.share, r.calls);
        }
        println!("    {:<44} {:>8.3} ms", "total", profile.total_s * 1e3);
        return Ok(rows);
    }
    for ctx in [128, long_ctx] {
        let mut samples = Vec::new();
        for rep in 0..reps.div_ceil(2).max(1) + 1 {
            // Greedy as `generate` runs it: the cache sized for the whole run, the argmax on the GPU.
            let mut cache = model.cache_with_capacity(ctx + n_decode)?;
            let mut t = model.forward_greedy(&ids(ctx, 3), &mut cache)?;
            let start = Instant::now();
            for _ in 0..n_decode {
                t = model.forward_greedy(&[t], &mut cache)?;
            }
            if rep > 0 {
                samples.push(start.elapsed().as_secs_f64()); // the first round warms the shapes
            }
        }
        let s = median(samples);
        let op = format!("llm_decode_ctx{ctx}");
        push(
            base(op.clone(), format!("{n_decode} tokens after {ctx}"), s / n_decode as f64),
            Some(n_decode as f64 / s),
            &op,
        );
    }
    // Decode through the real `generate` loop: the serial loop it had (the reference) and the
    // GPU-resident one, with the per-token split.
    let ctx = 128;
    let mut splits = Vec::new();
    for (name, lookahead) in [("serial", 0), ("pipelined", LOOKAHEAD)] {
        let s = generate_split(&model, ctx, n_decode, lookahead, reps)?;
        // llm_generate_*: the loop `generate` runs; llm_serial_*: the serial loop it replaced.
        let op = if lookahead == 0 { format!("llm_serial_ctx{ctx}") } else { format!("llm_generate_ctx{ctx}") };
        let mut row = base(op, format!("{n_decode} tokens after {ctx}"), s.wall);
        row["host_recording_seconds"] = json!(s.recording);
        row["submit_seconds"] = json!(s.submitting);
        row["wait_seconds"] = json!(s.waiting);
        push(row, Some(1.0 / s.wall), &format!("llm_decode_ctx{ctx}"));
        splits.push((name, s));
    }
    // The pipelined loop after a long prompt too (llama-bench's tg128 @ d2048).
    let s = generate_split(&model, long_ctx, n_decode, LOOKAHEAD, reps)?;
    let op = format!("llm_generate_ctx{long_ctx}");
    let mut row = base(op, format!("{n_decode} tokens after {long_ctx}"), s.wall);
    row["host_recording_seconds"] = json!(s.recording);
    push(row, Some(1.0 / s.wall), &format!("llm_decode_ctx{long_ctx}"));
    let peak = dev.memory_stats().peak_bytes;
    let gpu = decode_breakdown(&model, ctx)?;
    println!("  per decode token through generate after {ctx} tokens (ms; GPU time from the marked run above):");
    println!("    {:<10} {:>8} {:>8} {:>8} {:>8} {:>8}", "loop", "wall", "GPU", "record", "submit", "wait");
    for (name, s) in &splits {
        let g = gpu.map_or("-".to_string(), |g| format!("{:.3}", g * 1e3));
        println!(
            "    {name:<10} {:>8.3} {g:>8} {:>8.3} {:>8.3} {:>8.3}",
            s.wall * 1e3,
            s.recording * 1e3,
            s.submitting * 1e3,
            s.waiting * 1e3
        );
    }
    decode_breakdown(&model, long_ctx)?;
    println!("llm: peak GPU memory in use {:.1} MiB", peak as f64 / (1 << 20) as f64);
    for r in &mut rows {
        r["peak_gpu_bytes"] = json!(peak);
    }
    Ok(rows)
}

/// Batch sizes of the llm_batch rows (llama-batched-bench's in bench/anchors/run-on-device.sh).
const BATCHES: [usize; 3] = [1, 4, 16];

/// `kiln bench`'s llm_batch section: greedy `generate_batch` of B sequences at once, each a
/// 128-token prompt (distinct ids) and 128 new tokens, as llama-batched-bench runs them. A row
/// per B: the decode steps' total tokens/s over all sequences (the prefills apart), the time of
/// one step, and the ratios to B = 1 through the same path and to `generate`'s single-sequence
/// loop after the same prompt (issue 29's target: >= 8 at B = 16).
/// On the GPU backend B = 16 is also run with every product on the matrix-vector kernel
/// (`llm_batch16_matvec`) and on the tiled one (`llm_batch16_tiled`): the measurement behind
/// [`BatchProducts::Auto`]'s rule; each B = 16 row prints its step's GPU time per op. `--quick` runs 4-token prompts and 2
/// new tokens (on lavapipe the GPU backend's matvec of 4 rows takes ~0.1 s a call).
pub fn run_batch(path: &Path, quick: bool, reps: usize) -> Result<Vec<Value>> {
    let model = CausalLM::load(path)?;
    let (ctx, n_new): (usize, usize) = if quick { (4, 2) } else { (128, 128) };
    println!("llm_batch: {:?} backend, {ctx}-token prompts, {n_new} new tokens each", model.backend());
    let mut runs: Vec<(usize, BatchProducts, String)> =
        BATCHES.iter().map(|&b| (b, BatchProducts::default(), format!("llm_batch{b}"))).collect();
    if model.backend() == Backend::Gpu {
        runs.push((16, BatchProducts::Matvec, "llm_batch16_matvec".into()));
        runs.push((16, BatchProducts::Tiled, "llm_batch16_tiled".into()));
    }
    // The single-sequence loop `generate` runs, as the batch-1 reference too.
    let alone = 1.0 / generate_split(&model, ctx, n_new.saturating_sub(1).max(1), LOOKAHEAD, reps)?.wall;
    println!(
        "{:<20} {:<22} {:>10.3} ms {alone:>10.0} tokens/s",
        "llm_batch_generate",
        format!("1 x {n_new} after {ctx}"),
        1e3 / alone
    );
    let mut rows = Vec::new();
    let mut single = None;
    for (b, products, op) in runs {
        let prompts: Vec<Vec<u32>> = (0..b).map(|i| ids(ctx, 100 + i)).collect();
        let opts = [GenerateOptions { max_tokens: n_new, stop_at_eos: false, ..Default::default() }];
        let (mut rates, mut steps) = (Vec::new(), Vec::new());
        // The first round compiles the batch's shapes.
        for rep in 0..reps.div_ceil(2).max(1) + 1 {
            let g = model.generate_batch_from_ids(prompts.clone(), &opts)?.with_products(products);
            let (_, stats) = g.run()?;
            if rep > 0 {
                rates.push(stats.decode_tokens_per_s());
                steps.push(stats.decode.as_secs_f64() / stats.steps.max(1) as f64);
            }
        }
        let (rate, step) = (median(rates), median(steps));
        let ratio = rate / *single.get_or_insert(rate);
        let size = format!("{b} x {n_new} after {ctx}");
        let versus = rate / alone;
        println!(
            "{op:<20} {size:<22} {:>10.3} ms {rate:>10.0} tokens/s  {ratio:>5.2}x batch 1  {versus:>5.2}x generate",
            step * 1e3
        );
        rows.push(json!({
            "op": op, "size": size, "seconds": step, "timer": "wall", "wall_seconds": step,
            "tokens_per_s": rate, "batch": b, "versus_batch1": ratio, "versus_generate": versus,
            "generate_tokens_per_s": alone,
        }));
        if b == 16 && !quick && model.backend() == Backend::Gpu {
            batch_step_profile(&model, &prompts, products)?;
        }
    }
    Ok(rows)
}

/// GPU time per op of one batched decode step (`kiln_core::profile`: each dispatch timed in a
/// pass of its own): two runs profiled, 2 and 2 + `STEPS` new tokens, the difference over
/// `STEPS` (the prefills and the first steps cancel). Where a B = 16 step's milliseconds go.
fn batch_step_profile(model: &CausalLM, prompts: &[Vec<u32>], products: BatchProducts) -> Result<()> {
    const STEPS: usize = 32;
    let run = |n_new: usize| -> Result<kiln_core::profile::Profile> {
        let opts = [GenerateOptions { max_tokens: n_new, stop_at_eos: false, ..Default::default() }];
        let g = model.generate_batch_from_ids(prompts.to_vec(), &opts)?.with_products(products);
        let (result, profile) = kiln_core::profile::profile(|| g.run())?;
        result?;
        Ok(profile)
    };
    let (short, long) = (run(2)?, run(2 + STEPS)?);
    let mut rows: Vec<(String, u64, f64)> = long
        .rows
        .iter()
        .map(|r| {
            let s = short.rows.iter().find(|s| s.op == r.op);
            let calls = r.calls.saturating_sub(s.map_or(0, |s| s.calls));
            (r.op.clone(), calls / STEPS as u64, (r.total_s - s.map_or(0.0, |s| s.total_s)) / STEPS as f64)
        })
        .filter(|r| r.1 > 0)
        .collect();
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    let total: f64 = rows.iter().map(|r| r.2).sum();
    println!(
        "  GPU time per op of one step, B = {} ({products:?}; each dispatch in a pass of its own):",
        prompts.len()
    );
    for (op, calls, s) in &rows {
        println!("    {op:<44} {:>8.3} ms {:>5.1}%  ({calls} calls)", s * 1e3, 100.0 * s / total);
    }
    println!("    {:<44} {:>8.3} ms", "total", total * 1e3);
    Ok(())
}
