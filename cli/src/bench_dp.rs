//! `kiln bench --filter dp`: data parallel work over several GPUs (issue 35), in one run: copies
//! between devices next to host upload and readback (GB/s), MiniLM encode throughput and
//! SmolLM2-shaped batched generation on 1, 2, 4 (and 8) devices, each with its ratio to one
//! device of the same run.
//!
//! Throughput is weak scaling, as the issue's targets ask: each device gets a full batch (256
//! sentences of 128 tokens; 16 sequences of 128 new tokens after 128), so n devices do n times
//! one device's work, and the figure is the whole call's wall clock (tokenizing, the devices'
//! threads, readbacks and joining included). The one-batch row splits one batch of 256 over the
//! devices instead (the latency of a single request).
//!
//! Needs no model files on the GPU machine: without `--minilm DIR` holding model.safetensors, a
//! MiniLM-shaped model (all-MiniLM-L6-v2's config: 6 layers, hidden 384, 12 heads, FFN 1536,
//! vocabulary 30,522; random weights) is written to a temp folder, with DIR's tokenizer.json
//! when it has one (the real one: the host's tokenizing is part of the figure) and otherwise a
//! word-level tokenizer of the bench's words (cheaper than BERT's); the GPU's speed depends on
//! the shapes, not the values. The generation
//! rows need a GGUF (`--smollm2 FILE`: bench/anchors/make_gguf.py writes SmolLM2-135M's shape
//! with random weights); without one they are skipped.

use crate::bench::{median, wall_median};
use anyhow::{ensure, Context, Result};
use kiln_core::device::Device;
use kiln_core::Tensor;
use kiln_models::{replicas, CausalLM, Embeddings, EncodeOptions, GenerateOptions, LoadOptions, SentenceEmbedder};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

pub struct DpArgs<'a> {
    pub minilm: &'a Path,
    pub smollm2: &'a Path,
    pub quick: bool,
    pub reps: usize,
    /// Adapter indices (`kiln devices`); None: every GPU ([`replicas::all_devices`]).
    pub devices: Option<Vec<usize>>,
}

pub fn run(a: &DpArgs) -> Result<Vec<Value>> {
    let all = match &a.devices {
        Some(ix) => replicas::devices(ix)?,
        None => replicas::all_devices()?,
    };
    println!("dp: {} device(s):", all.len());
    for d in &all {
        let i = d.info();
        println!("  {}: {} ({}, {} {})", i.index, i.name, i.backend, i.driver, i.driver_info);
    }
    let mut counts: Vec<usize> = [1, 2, 4, 8].into_iter().filter(|&n| n <= all.len()).collect();
    if counts.last() != Some(&all.len()) {
        counts.push(all.len());
    }
    let mut rows = copies(&all, a.quick, a.reps)?;
    rows.extend(embed(a, &all, &counts)?);
    if a.smollm2.exists() {
        rows.extend(generate(a, &all, &counts)?);
    } else {
        println!("dp_generate: skipped, no GGUF at {} (bench/anchors/make_gguf.py smol)", a.smollm2.display());
    }
    Ok(rows)
}

fn gbps(bytes: usize, s: f64) -> f64 {
    bytes as f64 / s / 1e9
}

/// Upload to device 0, readback from it, and a copy device 0 -> device 1 (`Tensor::to_device`:
/// wgpu devices share no memory, so the copy goes through the host), each the median of `reps`.
fn copies(all: &[Arc<Device>], quick: bool, reps: usize) -> Result<Vec<Value>> {
    let n = if quick { 1 << 20 } else { 64 << 20 };
    let bytes = n * 4;
    let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let d0 = &all[0];
    let mut rows = Vec::new();
    let mut row = |op: &str, s: f64| {
        println!(
            "{op:<20} {:<22} {:>10.3} ms {:>8.2} GB/s",
            format!("{} MiB f32", bytes >> 20),
            s * 1e3,
            gbps(bytes, s)
        );
        rows.push(json!({"op": op, "size": format!("{} MiB", bytes >> 20), "seconds": s, "gbps": gbps(bytes, s)}));
    };
    let (mut up, mut down) = (Vec::new(), Vec::new());
    // One warm-up round: the pool's first buffers of this size.
    for rep in 0..reps.max(1) + 1 {
        let t = Instant::now();
        let g = Tensor::from_slice_on(d0, &host, &[n])?;
        d0.synchronize()?;
        up.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let back = g.to_vec::<f32>()?;
        down.push(t.elapsed().as_secs_f64());
        ensure!(back[n - 1] == (n - 1) as f32, "readback mismatch");
        if rep == 0 {
            up.clear();
            down.clear();
        }
    }
    row("dp_upload", median(up));
    row("dp_readback", median(down));
    if all.len() >= 2 {
        let src = Tensor::from_slice_on(d0, &host, &[n])?;
        let d1 = &all[1];
        let mut xs = Vec::new();
        for _ in 0..reps.max(1) + 1 {
            d0.synchronize()?;
            let t = Instant::now();
            let moved = src.to_device(d1)?;
            d1.synchronize()?;
            xs.push(t.elapsed().as_secs_f64());
            ensure!(Arc::ptr_eq(moved.device(), d1), "copied onto the wrong device");
        }
        xs.remove(0); // the warm-up round
        let check = src.to_device(d1)?.to_vec::<f32>()?;
        ensure!(check == host, "device-to-device copy changed the data");
        row("dp_copy_0to1", median(xs));
    }
    Ok(rows)
}

/// all-MiniLM-L6-v2's folder with random weights of its shapes (see the module's doc).
fn minilm_shaped(dir: &Path) -> Result<()> {
    const V: usize = 30522;
    const D: usize = 384;
    const F: usize = 1536;
    const P: usize = 512;
    std::fs::create_dir_all(dir.join("1_Pooling"))?;
    let w = |name: &str, text: String| std::fs::write(dir.join(name), text).with_context(|| name.to_string());
    w(
        "config.json",
        format!(
            r#"{{"architectures": ["BertModel"], "model_type": "bert", "vocab_size": {V}, "hidden_size": {D},
            "num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": {F}, "hidden_act": "gelu",
            "max_position_embeddings": {P}, "type_vocab_size": 2, "layer_norm_eps": 1e-12}}"#
        ),
    )?;
    w("sentence_bert_config.json", r#"{"max_seq_length": 256, "do_lower_case": false}"#.into())?;
    w("1_Pooling/config.json", format!(r#"{{"word_embedding_dimension": {D}, "pooling_mode_mean_tokens": true}}"#))?;
    w(
        "modules.json",
        r#"[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]"#
            .into(),
    )?;
    // The bench's words, each one token (ids from 2000, as in BERT's vocabulary).
    let mut vocab: Vec<String> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
        .iter()
        .zip([0, 100, 101, 102])
        .map(|(t, i)| format!("{t:?}: {i}"))
        .collect();
    vocab.extend(crate::bench_embed::WORDS.iter().enumerate().map(|(i, t)| format!("{t:?}: {}", 2000 + i)));
    w(
        "tokenizer.json",
        format!(
            r#"{{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
            "pre_tokenizer": {{"type": "Whitespace"}},
            "post_processor": {{"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}},
            "decoder": null, "model": {{"type": "WordLevel", "vocab": {{{}}}, "unk_token": "[UNK]"}}}}"#,
            vocab.join(", ")
        ),
    )?;
    let mut t: Vec<(String, Vec<usize>, Option<f32>)> = vec![
        ("embeddings.word_embeddings.weight".into(), vec![V, D], None),
        ("embeddings.position_embeddings.weight".into(), vec![P, D], None),
        ("embeddings.token_type_embeddings.weight".into(), vec![2, D], None),
        ("embeddings.LayerNorm.weight".into(), vec![D], Some(1.0)),
        ("embeddings.LayerNorm.bias".into(), vec![D], Some(0.0)),
    ];
    for l in 0..6 {
        let l = format!("encoder.layer.{l}");
        for p in ["query", "key", "value"] {
            t.push((format!("{l}.attention.self.{p}.weight"), vec![D, D], None));
            t.push((format!("{l}.attention.self.{p}.bias"), vec![D], None));
        }
        t.push((format!("{l}.attention.output.dense.weight"), vec![D, D], None));
        t.push((format!("{l}.attention.output.dense.bias"), vec![D], None));
        t.push((format!("{l}.attention.output.LayerNorm.weight"), vec![D], Some(1.0)));
        t.push((format!("{l}.attention.output.LayerNorm.bias"), vec![D], Some(0.0)));
        t.push((format!("{l}.intermediate.dense.weight"), vec![F, D], None));
        t.push((format!("{l}.intermediate.dense.bias"), vec![F], None));
        t.push((format!("{l}.output.dense.weight"), vec![D, F], None));
        t.push((format!("{l}.output.dense.bias"), vec![D], None));
        t.push((format!("{l}.output.LayerNorm.weight"), vec![D], Some(1.0)));
        t.push((format!("{l}.output.LayerNorm.bias"), vec![D], Some(0.0)));
    }
    // safetensors: a little-endian u64 header length, the JSON header, the data.
    let (mut header, mut data, mut state) = (Vec::new(), Vec::<u8>::new(), 0x2545_f491_4f6c_dd1du64);
    for (name, shape, constant) in &t {
        let start = data.len();
        for _ in 0..shape.iter().product::<usize>() {
            let v = constant.unwrap_or_else(|| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1
            });
            data.extend_from_slice(&v.to_le_bytes());
        }
        header.push(format!(
            r#""{name}": {{"dtype": "F32", "shape": {shape:?}, "data_offsets": [{start}, {}]}}"#,
            data.len()
        ));
    }
    let mut h = format!("{{{}}}", header.join(", ")).into_bytes();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend(h);
    out.extend(data);
    std::fs::write(dir.join("model.safetensors"), out)?;
    Ok(())
}

/// Whether two results hold the same bits, and their largest difference.
fn versus(a: &[f32], b: &[f32]) -> (bool, f32) {
    let same = a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
    (same, a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max))
}

fn embed(a: &DpArgs, all: &[Arc<Device>], counts: &[usize]) -> Result<Vec<Value>> {
    let made: PathBuf;
    let dir = if a.minilm.join("model.safetensors").exists() {
        a.minilm
    } else {
        made = std::env::temp_dir().join(format!("kiln-dp-minilm-{}", std::process::id()));
        minilm_shaped(&made)?;
        // all-MiniLM-L6-v2's own tokenizer.json where `--minilm DIR` has one (466 KB to carry):
        // its BERT normaliser and WordPiece cost the host more than the word-level stand-in.
        let real = a.minilm.join("tokenizer.json");
        let tok = if real.exists() {
            std::fs::copy(&real, made.join("tokenizer.json"))?;
            format!("the tokenizer of {}", real.display())
        } else {
            "a word-level tokenizer".to_string()
        };
        println!("dp_embed: a MiniLM-shaped model with random weights and {tok} in {}", made.display());
        &made
    };
    let (per, seq) = if a.quick { (4, 16) } else { (256, 128) };
    let max = *counts.last().unwrap_or(&1);
    let texts: Vec<String> = (0..per * max).map(|i| crate::bench_embed::sentence(i, seq)).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let opts = EncodeOptions { batch_size: per, normalize: None };
    let mut rows = Vec::new();
    let mut one: Option<(f64, f64, Embeddings)> = None;
    for &n in counts {
        let t = Instant::now();
        let model = SentenceEmbedder::load_replicated(dir, &all[..n], LoadOptions::default())?;
        let load = t.elapsed().as_secs_f64();
        let lens = model.first().tokenize(&refs[..1])?;
        ensure!(lens[0].0.len() == seq, "bench sentences are not {seq} tokens");
        let work = &refs[..per * n];
        let s = wall_median(1, a.reps.max(3), || {
            model.encode_with(work, opts)?;
            Ok(())
        })?;
        let split = wall_median(1, a.reps.max(3), || {
            model.encode_with(&refs[..per], opts)?;
            Ok(())
        })?;
        let tok = wall_median(0, a.reps.max(3), || {
            model.first().tokenize(work)?;
            Ok(())
        })?;
        // Bits against one device: n batches of the one-device call on all texts (same-length
        // texts keep their order, so the batches are the same).
        let got = model.encode_with(work, opts)?;
        drop(model);
        let rate = (per * n) as f64 / s;
        if one.is_none() {
            let all_one =
                SentenceEmbedder::load_replicated(dir, &all[..1], LoadOptions::default())?.encode_with(&refs, opts)?;
            one = Some((rate, split, all_one));
        }
        let (rate1, split1, base) = one.as_ref().unwrap();
        let (same, maxd) = versus(&got.data, &base.data[..got.data.len()]);
        let size = format!("{n} x {per}x{seq} tokens");
        println!(
            "{:<20} {size:<22} {:>10.3} ms {rate:>8.0} sentences/s {:>5.2}x 1 device; one batch of {per} split: {:.3} ms ({:.2}x); \
             tokenize {:.1} ms; load {load:.1} s; bits = 1 device: {} (max|diff| {maxd:.1e})",
            format!("dp_embed{n}"),
            s * 1e3,
            rate / rate1,
            split * 1e3,
            split1 / split,
            tok * 1e3,
            if same { "yes" } else { "no" },
        );
        rows.push(json!({
            "op": format!("dp_embed{n}"), "size": size, "devices": n, "seconds": s, "timer": "wall",
            "sentences_per_s": rate, "versus_1_device": rate / rate1, "split_batch_seconds": split,
            "tokenize_seconds": tok, "load_seconds": load, "bits_equal_1_device": same, "max_abs_diff": maxd,
        }));
    }
    Ok(rows)
}

fn generate(a: &DpArgs, all: &[Arc<Device>], counts: &[usize]) -> Result<Vec<Value>> {
    let (per, ctx, n_new) = if a.quick { (2, 4, 3) } else { (16, 128, 128) };
    let max = *counts.last().unwrap_or(&1);
    let prompts: Vec<Vec<u32>> = (0..per * max).map(|i| crate::bench_llm::ids(ctx, 100 + i)).collect();
    let opts = [GenerateOptions { max_tokens: n_new, stop_at_eos: false, ..Default::default() }];
    println!(
        "dp_generate: {}, {per} sequences a device, {ctx}-token prompts, {n_new} new tokens each",
        a.smollm2.display()
    );
    let mut rows = Vec::new();
    let mut one: Option<(f64, Vec<Vec<u32>>)> = None;
    for &n in counts {
        let t = Instant::now();
        let model = CausalLM::load_replicated(a.smollm2, &all[..n])?;
        let load = t.elapsed().as_secs_f64();
        let work = prompts[..per * n].to_vec();
        let (mut walls, mut tokens, mut decode) = (Vec::new(), 0, Vec::new());
        let mut outs = Vec::new();
        // The first round compiles the batch's shapes.
        for rep in 0..a.reps.div_ceil(2).max(1) + 1 {
            let t = Instant::now();
            let (o, stats) = model.generate_batch_from_ids(work.clone(), &opts, Default::default())?;
            let wall = t.elapsed().as_secs_f64();
            if let Some(e) = o.iter().find_map(|o| o.error.as_ref()) {
                anyhow::bail!("dp_generate: a sequence failed: {e}");
            }
            if rep > 0 {
                walls.push(wall);
                tokens = stats.generated_tokens;
                decode.push(stats.decode_tokens as f64 / stats.decode.as_secs_f64().max(1e-9));
            }
            outs = o;
        }
        drop(model);
        let (s, decode) = (median(walls), median(decode));
        let rate = tokens as f64 / s;
        let got: Vec<Vec<u32>> = outs.into_iter().map(|o| o.tokens).collect();
        let (rate1, base) = one.get_or_insert_with(|| (rate, got.clone()));
        let same = got[..base.len().min(got.len())] == base[..base.len().min(got.len())];
        let size = format!("{n} x {per} x {n_new} after {ctx}");
        println!(
            "{:<20} {size:<22} {:>10.3} ms {rate:>8.0} tokens/s {:>5.2}x 1 device (decode {:.0} tokens/s); load {load:.1} s; \
             tokens = 1 device: {}",
            format!("dp_generate{n}"),
            s * 1e3,
            rate / *rate1,
            decode,
            if same { "yes" } else { "NO" },
        );
        rows.push(json!({
            "op": format!("dp_generate{n}"), "size": size, "devices": n, "seconds": s, "timer": "wall",
            "tokens_per_s": rate, "versus_1_device": rate / *rate1, "decode_tokens_per_s": decode,
            "load_seconds": load, "tokens_equal_1_device": same,
        }));
    }
    Ok(rows)
}
