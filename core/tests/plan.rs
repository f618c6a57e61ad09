//! Recorded plans (kiln_core::plan): a decode token of a small Llama-shaped decoder (the ops
//! kiln-models' `CausalLM::hidden` runs at decode: the QKV matvec with RoPE and the cache write,
//! one-pass split-KV attention over the cache's prefix, the residual and SwiGLU matvecs, the
//! head) captured at one position; at every later position, the blocks and workgroups its
//! replay would record are held to a fresh capture made there through the ops layer (the
//! position rules of `follow` against the ops' own parameter code), and where the plan says it
//! does not hold, the fresh capture must indeed differ beyond the position (a geometry change).
//! Replays' outputs are held to the ops path's to the bit. Refusals: an upload in the pass, a
//! session.

use kiln_core::ops::{self, AttentionPath, QuantFormat, QuantFusion, ScoreOptions};
use kiln_core::plan::Plan;
use kiln_core::{Result, Tensor};

const LAYERS: usize = 2;
// (8 + 2·4) heads of 32 = 512 QKV rows of K = 256: the wide matrix-vector kernel's shape, so its
// RoPE epilogue's position rule is held to a fresh capture too (the others stay strided).
const D: usize = 256;
const HEADS: usize = 8;
const KV_HEADS: usize = 4;
const HD: usize = D / HEADS;
const FFN: usize = 128;
const VOCAB: usize = 96;
const CONTEXT: usize = 320;

struct Model {
    embed: Tensor,
    out_norm: Tensor,
    layers: Vec<[Tensor; 6]>,
}

fn weight(rows: usize, cols: usize, seed: u32) -> Tensor {
    let f = QuantFormat::Q8_0;
    let n = f.matrix_bytes(rows, cols).unwrap();
    // Q8_0 blocks: an f16 scale (0.01) and 32 int8s from a small LCG.
    let mut x = seed.wrapping_mul(2654435761).wrapping_add(1);
    let bytes: Vec<u8> = (0..n)
        .map(|i| match i % 34 {
            0 => 0x1e, // 0.00999 as f16: 0x211e
            1 => 0x21,
            _ => {
                x = x.wrapping_mul(1664525).wrapping_add(1013904223);
                (x >> 24) as u8
            }
        })
        .collect();
    ops::quant_from_bytes(&kiln_core::device().unwrap(), &bytes, f, rows, cols).unwrap()
}

fn model() -> Model {
    let ones = |n: usize| Tensor::from_slice(&vec![1.0f32; n], &[n]).unwrap();
    Model {
        embed: weight(VOCAB, D, 1),
        out_norm: ones(D),
        layers: (0..LAYERS)
            .map(|i| {
                let s = 10 * i as u32;
                [
                    ones(D),
                    weight((HEADS + 2 * KV_HEADS) * HD, D, s + 2),
                    weight(D, D, s + 3),
                    ones(D),
                    weight(2 * FFN, D, s + 4),
                    weight(D, FFN, s + 5),
                ]
            })
            .collect(),
    }
}

/// One decode token at `pos` (ids [1] on the GPU), as `CausalLM::hidden_from` + its head record it.
fn token(m: &Model, caches: &[(Tensor, Tensor)], ids: &Tensor, pos: usize) -> Result<Tensor> {
    token_scored(m, caches, ids, pos, ScoreOptions::default())
}

/// [`token`] with Gemma 2/3's attention score options.
fn token_scored(
    m: &Model,
    caches: &[(Tensor, Tensor)],
    ids: &Tensor,
    pos: usize,
    opts: ScoreOptions,
) -> Result<Tensor> {
    let f = QuantFormat::Q8_0;
    let dims = |d: &[usize]| d.iter().map(|&x| x as isize).collect::<Vec<_>>();
    let mut h = ops::quant_embedding(&m.embed, f, D, ids)?;
    let norm = |w| QuantFusion { rms_norm: Some((w, 1e-5)), ..Default::default() };
    for (l, (k, v)) in m.layers.iter().zip(caches) {
        let q = ops::quant_qkv_rope_to_cache(&h, &l[1], f, Some((&l[0], 1e-5)), k, v, HEADS, pos, 10000.0)?;
        let qg = q.reshape(&dims(&[KV_HEADS, HEADS / KV_HEADS, 1, HD]))?;
        let kg = k.reshape(&dims(&[KV_HEADS, 1, CONTEXT, HD]))?;
        let vg = v.reshape(&dims(&[KV_HEADS, 1, CONTEXT, HD]))?;
        let a = ops::attention_scored(&qg, &kg, &vg, None, Some(pos + 1), false, None, opts, AttentionPath::Auto)?
            .reshape(&dims(&[1, D]))?;
        h = ops::quant_matmul_fused(&a, &l[2], f, D, QuantFusion { residual: Some(&h), ..Default::default() })?;
        let g = ops::quant_matmul_fused(&h, &l[4], f, FFN, QuantFusion { swiglu: true, ..norm(&l[3]) })?;
        h = ops::quant_matmul_fused(&g, &l[5], f, D, QuantFusion { residual: Some(&h), ..Default::default() })?;
    }
    ops::quant_matmul_fused(&h, &m.embed, f, VOCAB, norm(&m.out_norm))
}

fn caches() -> Vec<(Tensor, Tensor)> {
    let z = || ops::full(&[KV_HEADS, CONTEXT, HD], kiln_core::DType::F32, 0.0).unwrap();
    (0..LAYERS).map(|_| (z(), z())).collect()
}

fn id(t: u32) -> Tensor {
    Tensor::from_slice(&[t as i32], &[1]).unwrap()
}

fn argmax(logits: &[f32]) -> u32 {
    (0..logits.len()).fold(0, |b, i| if logits[i] > logits[b] { i } else { b }) as u32
}

#[test]
fn a_plans_position_rules_match_the_ops_at_every_position() {
    let m = model();
    let cs = caches();
    let mut plan: Option<(Plan, usize)> = None;
    let mut t = 1u32;
    let mut recaptures = Vec::new();
    for pos in 0..CONTEXT {
        let (logits, fresh) = Plan::capture(&id(t), |ids| token(&m, &cs, ids, pos)).unwrap();
        let fresh = fresh.expect("a decode token is plannable");
        assert_eq!(fresh.dispatches(), 1 + 5 * LAYERS + 1);
        assert_eq!(fresh.following(), 2 * LAYERS, "RoPE row and keys attended, per layer");
        let now = fresh.blocks_at(0).unwrap();
        match &plan {
            Some((p, at)) => {
                assert!(p.same_kernels(&fresh), "position {pos}");
                match p.blocks_at(pos - at) {
                    Some(b) => assert!(b == now, "position {pos}: the plan's blocks differ from the ops'"),
                    None => {
                        // Only where the ops' geometry really changed.
                        let old = p.blocks_at(0).unwrap();
                        let shape_changed = old.iter().zip(&now).any(|(a, b)| a.1 != b.1 || a.0.len() != b.0.len());
                        assert!(shape_changed, "position {pos}: the plan gave up with nothing changed");
                        recaptures.push(pos);
                        plan = Some((fresh, pos));
                    }
                }
            }
            None => plan = Some((fresh, pos)),
        }
        t = argmax(&logits.to_vec::<f32>().unwrap());
    }
    // The splits (64 keys each) change at 65, 129, ... keys: positions 64, 128, ...
    assert_eq!(recaptures, vec![64, 128, 192, 256]);
}

#[test]
fn replays_give_the_ops_paths_bits() {
    replays_match(ScoreOptions::default(), 150, 150 - 3);
}

/// Gemma 2/3's soft-cap and sliding window (9 keys) replayed: the window's start moves with the
/// position (it is relative to the row's last key), so replays past it still give the ops'
/// bits; across the split geometry change at 65 keys.
#[test]
fn replays_with_a_soft_cap_and_a_window_give_the_ops_paths_bits() {
    replays_match(ScoreOptions { softcap: Some(0.5), window: Some(9) }, 70, 70 - 2);
}

/// Tokens 0..`positions` through a plan (captured where none holds) and through the ops,
/// bit for bit; `want_replays` of them replayed.
fn replays_match(opts: ScoreOptions, positions: usize, want_replays: usize) {
    let m = model();
    let (planned, plain) = (caches(), caches());
    let (mut t_plan, mut t_ops) = (1u32, 1u32);
    let mut plan: Option<(Plan, usize)> = None;
    let mut replays = 0;
    for pos in 0..positions {
        let want = token_scored(&m, &plain, &id(t_ops), pos, opts).unwrap().to_vec::<f32>().unwrap();
        let replayed = match &plan {
            Some((p, at)) => p.replay(&id(t_plan), pos - at).unwrap(),
            None => None,
        };
        let got = match replayed {
            Some(l) => {
                replays += 1;
                l
            }
            None => {
                let (l, p) = Plan::capture(&id(t_plan), |ids| token_scored(&m, &planned, ids, pos, opts)).unwrap();
                plan = Some((p.unwrap(), pos));
                l
            }
        };
        let got = got.to_vec::<f32>().unwrap();
        assert!(got.iter().map(|x| x.to_bits()).eq(want.iter().map(|x| x.to_bits())), "position {pos}: logits differ");
        (t_plan, t_ops) = (argmax(&got), argmax(&want));
    }
    assert_eq!(replays, want_replays, "captured at 0, 64 and 128");
}

#[test]
fn a_pass_that_uploads_or_runs_in_a_session_is_not_planned() {
    let m = model();
    let cs = caches();
    // An upload inside the pass: a replay would not repeat it.
    let (_, p) = Plan::capture(&id(1), |_| token(&m, &cs, &id(2), 0)).unwrap();
    assert!(p.unwrap_err().contains("upload"));
    // Under a session: its charges and limits run per dispatch.
    let s = kiln_core::Session::new(Default::default());
    let r = s.run(|| Plan::capture(&id(1), |ids| token(&m, &cs, ids, 1)).map(|(_, p)| p.map(|_| ())));
    assert!(r.unwrap().unwrap_err().contains("session"));
}

#[test]
fn a_replay_past_the_cache_or_on_another_input_is_refused() {
    let m = model();
    let cs = caches();
    // Captured at position 256: 257 keys, the last split geometry the cache's 320 rows have.
    let (_, p) = Plan::capture(&id(1), |ids| token(&m, &cs, ids, 256)).unwrap();
    let p = p.unwrap();
    // Position 320 would write a row past the cache (and attend to more keys than it holds).
    assert!(p.blocks_at(CONTEXT - 256).is_none());
    assert!(p.replay(&id(1), CONTEXT - 256).unwrap().is_none());
    assert!(p.replay(&id(1), usize::MAX).unwrap().is_none());
    // Ids of another dtype or count: the embedding's kernel or shape would differ.
    assert!(p.replay(&Tensor::from_slice(&[1u32], &[1]).unwrap(), 1).unwrap().is_none());
    assert!(p.replay(&Tensor::from_slice(&[1i32, 2], &[2]).unwrap(), 1).unwrap().is_none());
    // The last position the cache holds still replays, to the ops path's bits.
    let got = p.replay(&id(5), CONTEXT - 257).unwrap().expect("position 319 replays").to_vec::<f32>().unwrap();
    let cs2 = caches();
    // The same row 256 in the reference cache, through the ops.
    token(&m, &cs2, &id(1), 256).unwrap();
    let want = token(&m, &cs2, &id(5), CONTEXT - 1).unwrap().to_vec::<f32>().unwrap();
    assert!(got.iter().map(|x| x.to_bits()).eq(want.iter().map(|x| x.to_bits())));
}
