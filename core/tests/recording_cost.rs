//! Host cost of recording a decode token's dispatches (issue 29: ≤ 0.3 ms a SmolLM2 token on the
//! H100, 212 dispatches). A SmolLM2-shaped decoder (30 layers, the same op sequence as
//! kiln-models' `CausalLM::hidden`) at tiny sizes, so the GPU's share is small and the host's
//! recording (Kiln's op code, the dispatch path, wgpu-core) is what a profiler sees. Ignored by
//! default (a measurement, no assertion on time):
//!
//! `cargo test --release -p kiln-core --test recording_cost -- --ignored --nocapture`
//!
//! `KILN_RECORDING_TOKENS` sets how many tokens (default 50).

use kiln_core::ops::{self, QuantFormat, QuantFusion};
use kiln_core::Tensor;
use std::time::Instant;

const LAYERS: usize = 30;
const D: usize = 64;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HD: usize = D / HEADS;
const FFN: usize = 128;
const VOCAB: usize = 256;
const CONTEXT: usize = 4096;

struct Layer {
    attn_norm: Tensor,
    qkv: Tensor,
    o: Tensor,
    ffn_norm: Tensor,
    gate_up: Tensor,
    down: Tensor,
    k: Tensor,
    v: Tensor,
}

fn weight(rows: usize, cols: usize) -> Tensor {
    let f = QuantFormat::Q4_1;
    let bytes = vec![0u8; f.matrix_bytes(rows, cols).unwrap()];
    ops::quant_from_bytes(&kiln_core::device().unwrap(), &bytes, f, rows, cols).unwrap()
}

/// One decode token at position `pos`, recorded as `CausalLM::hidden` + the head records it.
fn token(embed: &Tensor, out_norm: &Tensor, layers: &[Layer], id: u32, pos: usize) -> Tensor {
    let ids = Tensor::from_slice(&[id], &[1]).unwrap();
    token_from(embed, out_norm, layers, &ids, pos)
}

/// [`token`] for ids already on the GPU (what a plan captures).
fn token_from(embed: &Tensor, out_norm: &Tensor, layers: &[Layer], ids: &Tensor, pos: usize) -> Tensor {
    let f = QuantFormat::Q4_1;
    let dims = |d: &[usize]| d.iter().map(|&x| x as isize).collect::<Vec<_>>();
    let mut h = ops::quant_embedding(embed, f, D, ids).unwrap();
    let norm = |w| QuantFusion { rms_norm: Some((w, 1e-5)), ..Default::default() };
    for l in layers {
        let qkv = ops::quant_matmul_fused(&h, &l.qkv, f, (HEADS + 2 * KV_HEADS) * HD, norm(&l.attn_norm)).unwrap();
        let q = ops::rope_qkv_to_cache(&qkv, &l.k, &l.v, HEADS, pos, 10000.0).unwrap();
        let qg = q.reshape(&dims(&[KV_HEADS, HEADS / KV_HEADS, 1, HD])).unwrap();
        let kg = l.k.reshape(&dims(&[KV_HEADS, 1, CONTEXT, HD])).unwrap();
        let vg = l.v.reshape(&dims(&[KV_HEADS, 1, CONTEXT, HD])).unwrap();
        let a = ops::attention_prefix(&qg, &kg, &vg, pos + 1, false, None).unwrap().reshape(&dims(&[1, D])).unwrap();
        h = ops::quant_matmul_fused(&a, &l.o, f, D, QuantFusion { residual: Some(&h), ..Default::default() }).unwrap();
        let g =
            ops::quant_matmul_fused(&h, &l.gate_up, f, FFN, QuantFusion { swiglu: true, ..norm(&l.ffn_norm) }).unwrap();
        h = ops::quant_matmul_fused(&g, &l.down, f, D, QuantFusion { residual: Some(&h), ..Default::default() })
            .unwrap();
    }
    ops::quant_matmul_fused(&h, embed, f, VOCAB, norm(out_norm)).unwrap()
}

/// CPU time of the calling thread: what recording costs the host, whatever else the machine runs
/// (the wall clock of a thread that shares 2 cores with a loaded machine mostly measures waits).
fn thread_cpu() -> std::time::Duration {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    unsafe extern "C" {
        fn clock_gettime(clock: i32, t: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut t = Timespec { sec: 0, nsec: 0 };
    // SAFETY: clock_gettime writes one timespec (two longs on 64-bit Linux) into `t`.
    unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut t) };
    std::time::Duration::new(t.sec as u64, t.nsec as u32)
}

fn model() -> (Tensor, Tensor, Vec<Layer>) {
    let ones = || Tensor::from_slice(&[1.0f32; D], &[D]).unwrap();
    let cache = || ops::zeros(&[KV_HEADS, CONTEXT, HD], kiln_core::DType::F32).unwrap();
    let layers: Vec<Layer> = (0..LAYERS)
        .map(|_| Layer {
            attn_norm: ones(),
            qkv: weight((HEADS + 2 * KV_HEADS) * HD, D),
            o: weight(D, D),
            ffn_norm: ones(),
            gate_up: weight(2 * FFN, D),
            down: weight(D, FFN),
            k: cache(),
            v: cache(),
        })
        .collect();
    (weight(VOCAB, D), ones(), layers)
}

/// The same tokens through a recorded plan (`kiln_core::plan`): the ids uploaded, then the
/// plan replayed (captured at the first token and where the split-KV geometry changes), thread
/// CPU per token from the upload to the last dispatch recorded, median over the tokens after
/// the first two, with the ops path's in the same binary alternating in `KILN_RECORDING_ROUNDS`
/// rounds (default 3).
#[test]
#[ignore]
fn planned_decode_token_recording_cost() {
    use kiln_core::plan::Plan;
    let tokens: usize = std::env::var("KILN_RECORDING_TOKENS").ok().and_then(|s| s.parse().ok()).unwrap_or(50);
    let rounds: usize = std::env::var("KILN_RECORDING_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    let (embed, out_norm, layers) = model();
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for round in 0..rounds {
        for planned in [false, true] {
            let mut plan: Option<(Plan, usize)> = None;
            let (mut cpu_us, mut captures) = (Vec::new(), 0);
            for pos in 0..tokens.min(CONTEXT) {
                kiln_core::device().unwrap().synchronize().unwrap();
                let cpu0 = thread_cpu();
                let ids = Tensor::from_slice(&[(pos % VOCAB) as u32], &[1]).unwrap();
                let logits = if !planned {
                    token_from(&embed, &out_norm, &layers, &ids, pos)
                } else {
                    match plan.as_ref().and_then(|(p, at)| p.replay(&ids, pos - at).unwrap()) {
                        Some(l) => l,
                        None => {
                            let (l, p) = Plan::capture(&ids, |ids| {
                                Ok::<_, kiln_core::Error>(token_from(&embed, &out_norm, &layers, ids, pos))
                            })
                            .unwrap();
                            plan = Some((p.expect("plannable"), pos));
                            captures += 1;
                            l
                        }
                    }
                };
                let cpu = (thread_cpu() - cpu0).as_secs_f64();
                assert_eq!(logits.to_vec::<f32>().unwrap().len(), VOCAB);
                if pos > 1 {
                    cpu_us.push(cpu * 1e6);
                }
            }
            let m = median(&mut cpu_us);
            println!(
                "round {round}, plan {}: {m:.1} µs/token thread CPU, {captures} captures (median of {})",
                if planned { "on " } else { "off" },
                cpu_us.len()
            );
        }
    }
}

#[test]
#[ignore]
fn decode_token_recording_cost() {
    let dev = kiln_core::device().unwrap();
    let tokens: usize = std::env::var("KILN_RECORDING_TOKENS").ok().and_then(|s| s.parse().ok()).unwrap_or(50);
    let (embed, out_norm, layers) = model();
    let (mut per_token, mut per_dispatch, mut dispatches) = (Vec::new(), Vec::new(), 0);
    let mut cpu_per_dispatch = Vec::new();
    let mut binds = dev.bind_group_stats();
    for pos in 0..tokens.min(CONTEXT) {
        dev.synchronize().unwrap();
        let before = dev.dispatches_recorded();
        let cpu0 = thread_cpu();
        let start = Instant::now();
        let logits = token(&embed, &out_norm, &layers, (pos % VOCAB) as u32, pos);
        let recorded = start.elapsed().as_secs_f64();
        let cpu = (thread_cpu() - cpu0).as_secs_f64();
        dispatches = dev.dispatches_recorded() - before;
        assert_eq!(logits.to_vec::<f32>().unwrap().len(), VOCAB);
        if pos == 1 {
            binds = dev.bind_group_stats();
        }
        if pos > 1 {
            // The first tokens meet new shapes (pipelines compiled, pool classes filled).
            per_token.push(recorded * 1e6);
            per_dispatch.push(recorded * 1e6 / dispatches as f64);
            cpu_per_dispatch.push(cpu * 1e6 / dispatches as f64);
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "decode-shaped token recording: {:.1} µs/token, {:.2} µs/dispatch wall, {:.2} µs/dispatch thread CPU, {dispatches} dispatches/token (median of {})",
        median(per_token.clone()),
        median(per_dispatch),
        median(cpu_per_dispatch),
        per_token.len()
    );
    let now = dev.bind_group_stats();
    let (hits, misses) = (now.hits - binds.hits, now.misses - binds.misses);
    println!(
        "bind groups after the first two tokens: {hits} hits, {misses} misses ({:.1}% hits), {} cached",
        100.0 * hits as f64 / (hits + misses).max(1) as f64,
        now.entries
    );
}
