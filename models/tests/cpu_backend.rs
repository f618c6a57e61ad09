//! The host CPU backend against the GPU backend (kiln-core's quant ops, themselves tested
//! against f64 references) on tiny Llama GGUFs written here: every weight format the loader
//! takes (Q4_0, Q4_1, Q8_0), a tied and an untied output head, grouped-query attention with
//! head size 16, a feed-forward width that is not a power of two. SmolLM2 (models/tests/
//! smollm2.rs) covers Q4_1 layers with a tied Q8_0 head against llama.cpp; this covers the rest.

mod fixtures;

use fixtures::{scratch, Gguf};
use kiln_core::ops::QuantFormat;
use kiln_core::reference::quant::quantize;
use kiln_models::{Backend, CausalLM};

const HIDDEN: usize = 64;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const FFN: usize = 96;
const VOCAB: usize = 48;
const LAYERS: usize = 2;

/// Deterministic values in [-scale, scale).
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15).wrapping_add(7);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// (name, ggml dims [cols, rows], format (None: f32), values)
type Tensor = (String, Vec<usize>, Option<QuantFormat>, Vec<f32>);

fn ggml_type(f: Option<QuantFormat>) -> u32 {
    match f {
        None => 0,
        Some(QuantFormat::Q4_0) => 2,
        Some(QuantFormat::Q4_1) => 3,
        Some(QuantFormat::Q8_0) => 8,
        Some(f) => panic!("{f}: the K / Q5 formats' model test is kquant_model.rs"),
    }
}

/// A tiny Llama GGUF: layer matrices in `layers`, the embedding table in `embed`, and an
/// untied output head in `output` (None: tied to the embedding, as SmolLM2).
fn tiny_llama(layers: QuantFormat, embed: QuantFormat, output: Option<QuantFormat>) -> Vec<u8> {
    let kv = KV_HEADS * HIDDEN / HEADS;
    let mut tensors: Vec<Tensor> = Vec::new();
    let mut seed = 1;
    let mut matrix = |name: String, cols: usize, rows: usize, f: QuantFormat, scale: f32| {
        seed += 1;
        (name, vec![cols, rows], Some(f), values(rows * cols, seed, scale))
    };
    tensors.push(matrix("token_embd.weight".into(), HIDDEN, VOCAB, embed, 1.0));
    if let Some(f) = output {
        tensors.push(matrix("output.weight".into(), HIDDEN, VOCAB, f, 0.5));
    }
    for i in 0..LAYERS {
        let n = |s: &str| format!("blk.{i}.{s}.weight");
        tensors.push(matrix(n("attn_q"), HIDDEN, HIDDEN, layers, 0.4));
        tensors.push(matrix(n("attn_k"), HIDDEN, kv, layers, 0.4));
        tensors.push(matrix(n("attn_v"), HIDDEN, kv, layers, 0.4));
        tensors.push(matrix(n("attn_output"), HIDDEN, HIDDEN, layers, 0.2));
        tensors.push(matrix(n("ffn_gate"), HIDDEN, FFN, layers, 0.3));
        tensors.push(matrix(n("ffn_up"), HIDDEN, FFN, layers, 0.3));
        tensors.push(matrix(n("ffn_down"), FFN, HIDDEN, layers, 0.2));
        for norm in ["attn_norm", "ffn_norm"] {
            let v: Vec<f32> = values(HIDDEN, 100 + i as u64, 0.3).iter().map(|x| 1.0 + x).collect();
            tensors.push((n(norm), vec![HIDDEN], None, v));
        }
    }
    let v: Vec<f32> = values(HIDDEN, 99, 0.2).iter().map(|x| 1.0 + x).collect();
    tensors.push(("output_norm.weight".into(), vec![HIDDEN], None, v));

    let u32s: [(&str, u32); 7] = [
        ("llama.block_count", LAYERS as u32),
        ("llama.context_length", 32),
        ("llama.embedding_length", HIDDEN as u32),
        ("llama.feed_forward_length", FFN as u32),
        ("llama.attention.head_count", HEADS as u32),
        ("llama.attention.head_count_kv", KV_HEADS as u32),
        ("llama.vocab_size", VOCAB as u32),
    ];
    let mut g = Gguf::default();
    g.header(tensors.len() as u64, u32s.len() as u64 + 6);
    g.str("general.architecture").u32(8).str("llama");
    for (k, v) in u32s {
        g.str(k).u32(4).u32(v);
    }
    g.str("llama.rope.freq_base").u32(6).buf.extend_from_slice(&10000f32.to_le_bytes());
    g.str("llama.attention.layer_norm_rms_epsilon").u32(6).buf.extend_from_slice(&1e-5f32.to_le_bytes());
    g.str("tokenizer.ggml.model").u32(8).str("gpt2");
    g.str("tokenizer.ggml.tokens").u32(9).u32(8).u64(VOCAB as u64);
    for t in 0..VOCAB {
        g.str(&format!("t{t}"));
    }
    g.str("tokenizer.ggml.merges").u32(9).u32(8).u64(0);
    // Data: each tensor at the next multiple of 32.
    let mut data = Vec::new();
    let mut infos = Vec::new();
    for (name, dims, f, v) in &tensors {
        while data.len() % 32 != 0 {
            data.push(0);
        }
        infos.push((name.clone(), dims.clone(), ggml_type(*f), data.len() as u64));
        match f {
            Some(f) => data.extend(quantize(v, *f)),
            None => data.extend(v.iter().flat_map(|x| x.to_le_bytes())),
        }
    }
    for (name, dims, ty, offset) in infos {
        g.str(&name).u32(dims.len() as u32);
        for d in dims {
            g.u64(d as u64);
        }
        g.u32(ty).u64(offset);
    }
    g.pad_to(32);
    g.buf.extend(data);
    g.buf
}

fn max_rel_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs() / (1.0 + y.abs())).fold(0.0, f32::max)
}

#[test]
fn the_host_path_equals_the_gpu_path_in_every_weight_format() {
    let dir = scratch("cpu-backend");
    let cases = [
        ("q4_0, tied", QuantFormat::Q4_0, QuantFormat::Q4_0, None),
        ("q8_0, untied q8_0 head", QuantFormat::Q8_0, QuantFormat::Q8_0, Some(QuantFormat::Q8_0)),
        ("q4_1, q8_0 embedding, untied q4_0 head", QuantFormat::Q4_1, QuantFormat::Q8_0, Some(QuantFormat::Q4_0)),
    ];
    let ids = [3u32, 17, 0, 47, 9, 9, 30];
    for (name, layers, embed, output) in cases {
        let path = dir.join(format!("{}.gguf", name.replace([',', ' '], "_")));
        std::fs::write(&path, tiny_llama(layers, embed, output)).unwrap();
        let gpu = CausalLM::load_on(&path, Backend::Gpu, |_, _| {}).unwrap();
        let cpu = CausalLM::load_on(&path, Backend::Cpu, |_, _| {}).unwrap();
        assert_eq!((gpu.backend(), cpu.backend()), (Backend::Gpu, Backend::Cpu));
        // One pass over every position (causal attention, prefill kernels on the GPU).
        let (lg, lc) = (gpu.logits_all(&ids).unwrap(), cpu.logits_all(&ids).unwrap());
        assert_eq!(lc.len(), ids.len() * VOCAB);
        let spread = lc.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        assert!(spread > 0.5 && lc.iter().all(|x| x.is_finite()), "{name}: logits {spread}");
        let d = max_rel_diff(&lc, &lg);
        eprintln!("{name}: one pass, max |cpu - gpu| / (1 + |gpu|) = {d:.2e} (logits up to {spread:.1})");
        assert!(d < 1e-4, "{name}: one pass differs by {d}");
        // Token by token through each backend's KV cache (the decode kernels on the GPU): the
        // logits, and greedy (`forward_greedy`, on a second cache each) on both.
        let (mut cg, mut cc) = (gpu.new_cache().unwrap(), cpu.new_cache().unwrap());
        let (mut gg, mut gc) = (gpu.new_cache().unwrap(), cpu.new_cache().unwrap());
        gpu.forward(&ids[..3], &mut cg).unwrap();
        cpu.forward(&ids[..3], &mut cc).unwrap();
        let mut tg = gpu.forward_greedy(&ids[..3], &mut gg).unwrap();
        let mut tc = cpu.forward_greedy(&ids[..3], &mut gc).unwrap();
        for (i, &t) in ids[3..].iter().enumerate() {
            assert_eq!(tg, tc, "{name}: greedy token after {} tokens", 3 + i);
            let (a, b) = (gpu.forward(&[t], &mut cg).unwrap(), cpu.forward(&[t], &mut cc).unwrap());
            let d = max_rel_diff(&b, &a);
            assert!(d < 1e-4, "{name}: decode step {i} differs by {d}");
            let row = &lc[(3 + i) * VOCAB..(4 + i) * VOCAB];
            assert!(max_rel_diff(&b, row) < 1e-5, "{name}: the host cache against its one pass at step {i}");
            tg = gpu.forward_greedy(&[t], &mut gg).unwrap();
            tc = cpu.forward_greedy(&[t], &mut gc).unwrap();
            assert_eq!(tc as usize, kiln_models::sampling::argmax(&b), "{name}: greedy is the argmax");
        }
        assert_eq!(cc.len(), ids.len());
    }
}

/// A prompt of many tokens (the prefill products past the matrix-vector kernels: on cooperative
/// matrices where the GPU has them, x and W rounded to f16 there) against the host path, in
/// every weight format. Tolerance: 1e-4 as above on the tiled kernel; on cooperative matrices
/// 3e-2 of (1 + |logit|) (measured 1.16e-2 for Q4_0 on the H200: f16's 2^-11 per operand,
/// relative to sum |x w| rather than |y|, which random weights make ~sqrt(K) times larger,
/// through two layers; the kernel's element-wise bound is core/tests/quant_coop.rs's, and a
/// wrong row, column or epilogue here would be off by O(1)), and greedy equality only there.
#[test]
fn a_long_prompt_on_the_gpu_equals_the_host_path() {
    let dir = scratch("cpu-backend-long");
    let ids: Vec<u32> = (0..30u32).map(|i| (i * 7 + 3) % VOCAB as u32).collect();
    for (name, f) in [("q4_0", QuantFormat::Q4_0), ("q4_1", QuantFormat::Q4_1), ("q8_0", QuantFormat::Q8_0)] {
        let coop = kiln_core::ops::quant_product_uses_coop(&kiln_core::device().unwrap(), f, ids.len(), FFN);
        let path = dir.join(format!("{name}.gguf"));
        std::fs::write(&path, tiny_llama(f, QuantFormat::Q8_0, Some(f))).unwrap();
        let gpu = CausalLM::load_on(&path, Backend::Gpu, |_, _| {}).unwrap();
        let cpu = CausalLM::load_on(&path, Backend::Cpu, |_, _| {}).unwrap();
        let (lg, lc) = (gpu.logits_all(&ids).unwrap(), cpu.logits_all(&ids).unwrap());
        let d = max_rel_diff(&lc, &lg);
        eprintln!("{name}: 30 tokens, max |cpu - gpu| / (1 + |gpu|) = {d:.2e} (cooperative matrices: {coop})");
        assert!(d < if coop { 3e-2 } else { 1e-4 }, "{name}: a 30-token pass differs by {d}");
        if coop {
            continue;
        }
        let (tg, tc) = (
            gpu.forward_greedy(&ids, &mut gpu.new_cache().unwrap()).unwrap(),
            cpu.forward_greedy(&ids, &mut cpu.new_cache().unwrap()).unwrap(),
        );
        assert_eq!(tg, tc, "{name}: greedy after 30 tokens");
    }
}
