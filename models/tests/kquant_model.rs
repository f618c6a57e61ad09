//! Llama GGUFs in the K formats, loaded as they are: a Q4_K_M-like mix (Q4_K matrices, Q6_K
//! attn_v and ffn_down in one layer, so Q, K and V differ in format there; a Q6_K output head),
//! a Q5 mix (Q5_K, a Q5_1 gate beside a Q5_K up, Q5_0 attn_v, a tied Q6_K embedding) and a Q3
//! mix (Q3_K, Q5_K attn_v, Q4_K ffn_down, Q2_K gate and up).
//! Weights are quantized here by kiln-core's quantizer (byte-equal to ggml's: core/tests/
//! quant_k.rs). Both backends' logits are held to a float64 forward pass written here from
//! llama.cpp's semantics over the dequantized weights (ggml's dequantize_row_* values): the file's
//! Q/K rows with RoPE on adjacent pairs (llama.cpp's "normal" mode; Kiln un-permutes the rows
//! and rotates halves), grouped-query attention, RMSNorm, SwiGLU; and greedy decoding picks the
//! float64 argmax wherever its margin is clear.

mod fixtures;

use fixtures::{scratch, Gguf};
use kiln_core::ops::QuantFormat;
use kiln_core::reference::quant::{dequantize, quantize};
use kiln_models::{Backend, CausalLM};

const HIDDEN: usize = 256;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HEAD_DIM: usize = HIDDEN / HEADS;
const FFN: usize = 512;
const VOCAB: usize = 40;
const LAYERS: usize = 2;
const EPS: f64 = 1e-5;
const BASE: f64 = 10000.0;

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

fn ggml_type(f: Option<QuantFormat>) -> u32 {
    match f {
        None => 0,
        Some(QuantFormat::Q4_0) => 2,
        Some(QuantFormat::Q4_1) => 3,
        Some(QuantFormat::Q5_0) => 6,
        Some(QuantFormat::Q5_1) => 7,
        Some(QuantFormat::Q8_0) => 8,
        Some(QuantFormat::Q2_K) => 10,
        Some(QuantFormat::Q3_K) => 11,
        Some(QuantFormat::Q4_K) => 12,
        Some(QuantFormat::Q5_K) => 13,
        Some(QuantFormat::Q6_K) => 14,
    }
}

/// (name, ggml dims [cols, rows], format (None: f32), the file's bytes)
type TensorData = (String, Vec<usize>, Option<QuantFormat>, Vec<u8>);

/// Which format a matrix gets (None: leave it out).
type Formats<'a> = &'a dyn Fn(&str) -> Option<QuantFormat>;

/// A model's tensors.
struct Model {
    tensors: Vec<TensorData>,
}

impl Model {
    /// Weights with `format(name)` for each matrix (`output.weight` absent when it gives None).
    fn new(format: impl Fn(&str) -> Option<QuantFormat>) -> Model {
        let kv = KV_HEADS * HEAD_DIM;
        let mut tensors = Vec::new();
        let mut seed = 1;
        let mut matrix = |name: String, cols: usize, rows: usize, scale: f32| {
            seed += 1;
            if let Some(f) = format(&name) {
                tensors.push((name, vec![cols, rows], Some(f), quantize(&values(rows * cols, seed, scale), f)));
            }
        };
        matrix("token_embd.weight".into(), HIDDEN, VOCAB, 1.0);
        matrix("output.weight".into(), HIDDEN, VOCAB, 0.3);
        for i in 0..LAYERS {
            let n = |s: &str| format!("blk.{i}.{s}.weight");
            matrix(n("attn_q"), HIDDEN, HIDDEN, 0.2);
            matrix(n("attn_k"), HIDDEN, kv, 0.2);
            matrix(n("attn_v"), HIDDEN, kv, 0.2);
            matrix(n("attn_output"), HIDDEN, HIDDEN, 0.1);
            matrix(n("ffn_gate"), HIDDEN, FFN, 0.15);
            matrix(n("ffn_up"), HIDDEN, FFN, 0.15);
            matrix(n("ffn_down"), FFN, HIDDEN, 0.1);
        }
        let f32s = |v: Vec<f32>| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        for i in 0..LAYERS {
            for (j, norm) in ["attn_norm", "ffn_norm"].iter().enumerate() {
                let v = values(HIDDEN, 100 + 2 * i as u64 + j as u64, 0.3).iter().map(|x| 1.0 + x).collect();
                tensors.push((format!("blk.{i}.{norm}.weight"), vec![HIDDEN], None, f32s(v)));
            }
        }
        let v = values(HIDDEN, 99, 0.2).iter().map(|x| 1.0 + x).collect();
        tensors.push(("output_norm.weight".into(), vec![HIDDEN], None, f32s(v)));
        Model { tensors }
    }

    fn gguf(&self) -> Vec<u8> {
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
        g.header(self.tensors.len() as u64, u32s.len() as u64 + 6);
        g.str("general.architecture").u32(8).str("llama");
        for (k, v) in u32s {
            g.str(k).u32(4).u32(v);
        }
        g.str("llama.rope.freq_base").u32(6).buf.extend_from_slice(&(BASE as f32).to_le_bytes());
        g.str("llama.attention.layer_norm_rms_epsilon").u32(6).buf.extend_from_slice(&(EPS as f32).to_le_bytes());
        g.str("tokenizer.ggml.model").u32(8).str("gpt2");
        g.str("tokenizer.ggml.tokens").u32(9).u32(8).u64(VOCAB as u64);
        for t in 0..VOCAB {
            g.str(&format!("t{t}"));
        }
        g.str("tokenizer.ggml.merges").u32(9).u32(8).u64(0);
        let mut data = Vec::new();
        let mut infos = Vec::new();
        for (name, dims, f, bytes) in &self.tensors {
            while data.len() % 32 != 0 {
                data.push(0);
            }
            infos.push((name.clone(), dims.clone(), ggml_type(*f), data.len() as u64));
            data.extend_from_slice(bytes);
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

    /// The f64 values of tensor `name` ([rows, cols] row-major; a vector for f32 ones).
    fn weight(&self, name: &str) -> Vec<f64> {
        let (_, dims, f, bytes) = self.tensors.iter().find(|t| t.0 == name).unwrap_or_else(|| panic!("{name}"));
        match f {
            Some(f) => dequantize(bytes, *f, dims[1], dims[0]),
            None => bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64).collect(),
        }
    }

    /// float64 logits [ids.len(), VOCAB] of one causal pass over `ids`.
    fn reference(&self, ids: &[u32]) -> Vec<f64> {
        let l = ids.len();
        let matvec = |w: &[f64], x: &[f64]| -> Vec<f64> {
            w.chunks_exact(x.len()).map(|r| r.iter().zip(x).map(|(a, b)| a * b).sum()).collect()
        };
        let norm = |x: &[f64], g: &[f64]| -> Vec<f64> {
            let inv = 1.0 / (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64 + EPS).sqrt();
            x.iter().zip(g).map(|(v, g)| v * inv * g).collect()
        };
        // llama.cpp's normal RoPE: pairs (2j, 2j + 1) of each head rotated by pos * base^(-2j/D).
        let rope = |x: &mut [f64], pos: usize| {
            for head in x.chunks_exact_mut(HEAD_DIM) {
                for j in 0..HEAD_DIM / 2 {
                    let a = pos as f64 * BASE.powf(-2.0 * j as f64 / HEAD_DIM as f64);
                    let (x0, x1) = (head[2 * j], head[2 * j + 1]);
                    head[2 * j] = x0 * a.cos() - x1 * a.sin();
                    head[2 * j + 1] = x0 * a.sin() + x1 * a.cos();
                }
            }
        };
        let embed = self.weight("token_embd.weight");
        let mut h: Vec<Vec<f64>> =
            ids.iter().map(|&t| embed[t as usize * HIDDEN..(t as usize + 1) * HIDDEN].to_vec()).collect();
        for i in 0..LAYERS {
            let w = |s: &str| self.weight(&format!("blk.{i}.{s}.weight"));
            let (wq, wk, wv, wo) = (w("attn_q"), w("attn_k"), w("attn_v"), w("attn_output"));
            let (wg, wu, wd) = (w("ffn_gate"), w("ffn_up"), w("ffn_down"));
            let (an, fnorm) = (w("attn_norm"), w("ffn_norm"));
            let mut q = Vec::new();
            let mut k = Vec::new();
            let mut v = Vec::new();
            for (pos, x) in h.iter().enumerate() {
                let xn = norm(x, &an);
                let (mut qp, mut kp) = (matvec(&wq, &xn), matvec(&wk, &xn));
                rope(&mut qp, pos);
                rope(&mut kp, pos);
                q.push(qp);
                k.push(kp);
                v.push(matvec(&wv, &xn));
            }
            for t in 0..l {
                let mut att = vec![0.0; HIDDEN];
                for hh in 0..HEADS {
                    let g = hh / (HEADS / KV_HEADS);
                    let qh = &q[t][hh * HEAD_DIM..(hh + 1) * HEAD_DIM];
                    let s: Vec<f64> = (0..=t)
                        .map(|u| {
                            let kh = &k[u][g * HEAD_DIM..(g + 1) * HEAD_DIM];
                            qh.iter().zip(kh).map(|(a, b)| a * b).sum::<f64>() / (HEAD_DIM as f64).sqrt()
                        })
                        .collect();
                    let mx = s.iter().cloned().fold(f64::MIN, f64::max);
                    let e: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
                    let z: f64 = e.iter().sum();
                    for (u, eu) in e.iter().enumerate() {
                        for d in 0..HEAD_DIM {
                            att[hh * HEAD_DIM + d] += eu / z * v[u][g * HEAD_DIM + d];
                        }
                    }
                }
                let o = matvec(&wo, &att);
                h[t].iter_mut().zip(&o).for_each(|(a, b)| *a += b);
                let xn = norm(&h[t], &fnorm);
                let (gate, up) = (matvec(&wg, &xn), matvec(&wu, &xn));
                let act: Vec<f64> = gate.iter().zip(&up).map(|(g, u)| g / (1.0 + (-g).exp()) * u).collect();
                let d = matvec(&wd, &act);
                h[t].iter_mut().zip(&d).for_each(|(a, b)| *a += b);
            }
        }
        let head =
            if self.tensors.iter().any(|t| t.0 == "output.weight") { self.weight("output.weight") } else { embed };
        let on = self.weight("output_norm.weight");
        h.iter().flat_map(|x| matvec(&head, &norm(x, &on))).collect()
    }
}

/// max |got - want| / (1 + |want|).
fn max_rel(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    got.iter().zip(want).map(|(&g, &w)| (g as f64 - w).abs() / (1.0 + w.abs())).fold(0.0, f64::max)
}

fn argmax(v: &[f64]) -> (usize, f64) {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[b].total_cmp(&v[a]));
    (idx[0], v[idx[0]] - v[idx[1]])
}

#[test]
fn k_quant_mixes_match_a_float64_forward_on_both_backends() {
    let dir = scratch("kquant-model");
    let q4_k_m = |name: &str| {
        Some(match name {
            "blk.0.attn_v.weight" | "blk.0.ffn_down.weight" | "output.weight" => QuantFormat::Q6_K,
            _ => QuantFormat::Q4_K,
        })
    };
    let q5_mix = |name: &str| match name {
        "output.weight" => None,
        "token_embd.weight" => Some(QuantFormat::Q6_K),
        n if n.ends_with("ffn_gate.weight") => Some(QuantFormat::Q5_1),
        n if n.ends_with("attn_v.weight") => Some(QuantFormat::Q5_0),
        _ => Some(QuantFormat::Q5_K),
    };
    // Q3_K_M-like: Q3_K with a Q5_K attn_v and a Q4_K ffn_down, plus Q2_K gate/up (Q2_K's mix).
    let q3_mix = |name: &str| {
        Some(match name {
            "output.weight" => QuantFormat::Q6_K,
            n if n.ends_with("attn_v.weight") => QuantFormat::Q5_K,
            n if n.ends_with("ffn_down.weight") => QuantFormat::Q4_K,
            n if n.ends_with("ffn_gate.weight") || n.ends_with("ffn_up.weight") => QuantFormat::Q2_K,
            _ => QuantFormat::Q3_K,
        })
    };
    let cases: [(&str, Formats); 3] = [("q4_k_m", &q4_k_m), ("q5_mix", &q5_mix), ("q3_mix", &q3_mix)];
    let ids = [3u32, 17, 0, 39, 9, 9, 30];
    for (name, format) in cases {
        let model = Model::new(format);
        let path = dir.join(format!("{name}.gguf"));
        std::fs::write(&path, model.gguf()).unwrap();
        let want = model.reference(&ids);
        let spread = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        assert!(spread > 0.3, "{name}: reference logits up to {spread} (too flat to compare)");
        for backend in [Backend::Gpu, Backend::Cpu] {
            let lm = CausalLM::load_on(&path, backend, |_, _| {}).unwrap();
            let what = format!("{name} on {backend:?}");
            // One pass over every position (prefill kernels; the tiled product on the GPU).
            let got = lm.logits_all(&ids).unwrap();
            let d = max_rel(&got, &want);
            eprintln!("{what}: one pass, max |kiln - f64| / (1 + |f64|) = {d:.2e} (logits up to {spread:.2})");
            assert!(d < 1e-4, "{what}: one pass differs from float64 by {d}");
            // Token by token through the KV cache (the decode kernels), then greedy steps.
            let mut cache = lm.new_cache().unwrap();
            lm.forward(&ids[..3], &mut cache).unwrap();
            for (i, &t) in ids[3..].iter().enumerate() {
                let row = lm.forward(&[t], &mut cache).unwrap();
                let p = 4 + i;
                let d = max_rel(&row, &want[(p - 1) * VOCAB..p * VOCAB]);
                assert!(d < 1e-4, "{what}: decode step {i} differs from float64 by {d}");
            }
            let mut seq = ids.to_vec();
            let mut cache = lm.new_cache().unwrap();
            let mut tok = lm.forward_greedy(&seq, &mut cache).unwrap();
            for step in 0..6 {
                let r = model.reference(&seq);
                let (best, margin) = argmax(&r[(seq.len() - 1) * VOCAB..]);
                if margin < 1e-3 {
                    eprintln!("{what}: greedy step {step}: float64 margin {margin:.1e}, stopping");
                    break;
                }
                assert_eq!(tok as usize, best, "{what}: greedy step {step} (float64 margin {margin:.2e})");
                seq.push(tok);
                tok = lm.forward_greedy(&[tok], &mut cache).unwrap();
            }
        }
    }
}

/// Dispatches of one greedy decode token: 5 a layer where Q, K and V share a format (the fused
/// QKV + RoPE + cache kernel); a layer whose attn_v is in another format (Q4_K_M's Q6_K) pays
/// for its two products (the norm folded into each), their concatenation and the separate
/// RoPE/cache write: 2 more (3 with a separate norm, measured before folding it in).
#[test]
fn dispatches_per_decode_token_with_a_mixed_qkv_layer() {
    let count = |formats: Formats| {
        let model = Model::new(formats);
        let path = scratch("kquant-dispatches").join("model.gguf");
        std::fs::write(&path, model.gguf()).unwrap();
        let lm = CausalLM::load_on(&path, Backend::Gpu, |_, _| {}).unwrap();
        let mut cache = lm.new_cache().unwrap();
        let t = lm.forward_greedy(&[1, 2, 3], &mut cache).unwrap();
        let session = kiln_core::Session::new(Default::default());
        session.run(|| lm.forward_greedy(&[t], &mut cache).unwrap());
        let n = session.stats().dispatches;
        session.close();
        n
    };
    let pure = count(&|_| Some(QuantFormat::Q4_K));
    let mixed = count(&|n| Some(if n == "blk.0.attn_v.weight" { QuantFormat::Q6_K } else { QuantFormat::Q4_K }));
    eprintln!("dispatches per decode token: {pure} all Q4_K, {mixed} with one mixed QKV layer ({LAYERS} layers)");
    assert!(pure <= 5 * LAYERS as u64 + 4, "{pure} dispatches for {LAYERS} layers");
    assert!(mixed <= pure + 2, "a mixed QKV layer costs {} dispatches more", mixed - pure);
}
