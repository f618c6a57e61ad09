//! `ops::sample_token` (one workgroup picks the next token on the GPU) against its definition
//! and CPU reference `ops::sample_token_host`: the same token, bit for bit, for every option on
//! awkward distributions (ties, NaN, ±inf, subnormals, huge logits, all-NaN, vocabularies of 1,
//! 255, 257 and 49,152), and the reference itself against hand-worked answers.

mod common;
use common::Rng;
use kiln_core::ops::{self, sample_token_host as host, SampleParams};
use kiln_core::Tensor;

fn params(temperature: f32, top_k: usize, top_p: f32, repetition_penalty: f32, random: u32) -> SampleParams {
    SampleParams { temperature, top_k, top_p, repetition_penalty, random }
}

fn gpu(logits: &[f32], recent: &[u32], p: &SampleParams) -> u32 {
    let l = Tensor::from_slice(logits, &[1, logits.len()]).unwrap();
    let r = Tensor::from_slice(recent, &[recent.len()]).unwrap();
    let t = ops::sample_token(&l, &r, p, None).unwrap();
    assert_eq!(t.shape(), &[1]);
    t.to_vec::<i32>().unwrap()[0] as u32
}

/// Logits of one of several shapes of trouble.
fn logits(rng: &mut Rng, v: usize, kind: usize) -> Vec<f32> {
    (0..v)
        .map(|i| {
            let x = rng.uniform(-6.0, 6.0) as f32;
            match kind {
                // Smooth.
                0 => x,
                // Coarse: many exact ties.
                1 => (x * 2.0).round() / 2.0,
                // NaN, ±inf, ±0, subnormals sprinkled in.
                2 => match rng.int(0, 12) {
                    0 => f32::NAN,
                    1 => f32::INFINITY,
                    2 => f32::NEG_INFINITY,
                    3 => -0.0,
                    4 => f32::from_bits(5),
                    5 => -f32::from_bits(0x007f_0000),
                    _ => x,
                },
                // Huge magnitudes (differences overflow f32), and a flat plateau.
                3 => match i % 4 {
                    0 => 3.0e38,
                    1 => -3.0e38,
                    2 => 1.0e30 * x,
                    _ => 7.0,
                },
                // Peaked: one token far above the rest.
                _ => {
                    if i == v / 3 {
                        40.0
                    } else {
                        x
                    }
                }
            }
        })
        .collect()
}

fn check(logits: &[f32], recent: &[u32], p: &SampleParams) {
    let want = host(logits, recent, p);
    assert!((want as usize) < logits.len().max(1));
    let got = gpu(logits, recent, p);
    assert_eq!(got, want, "vocab {}, {p:?}, recent {:?}", logits.len(), &recent[..recent.len().min(8)]);
}

#[test]
fn the_gpu_picks_the_references_token_for_every_option_on_awkward_distributions() {
    let mut rng = Rng::new(29);
    let temps = [0.0, -1.0, f32::NAN, 1e-30, 0.05, 0.7, 1.0, 5.0, 1e30, f32::INFINITY];
    let randoms = [0u32, 1, 0x8000_0000, u32::MAX];
    for v in [1usize, 2, 255, 257] {
        for kind in 0..5 {
            let l = logits(&mut rng, v, kind);
            let recent: Vec<u32> = (0..6).map(|_| rng.int(0, v as i64 + 3) as u32).chain([0, 0, u32::MAX]).collect();
            for (n, &t) in temps.iter().enumerate() {
                for (top_k, top_p) in [(0, 1.0), (1, 1.0), (2, 0.9), (40, 0.5), (v, 1e-6), (v + 5, 0.0), (0, f32::NAN)]
                {
                    for pen in [1.0, 1.3, 0.7] {
                        let r = randoms[(n + top_k + kind) % 4] ^ rng.next_u64() as u32 & 0xff;
                        check(&l, &recent, &params(t, top_k, top_p, pen, r));
                    }
                }
            }
        }
    }
}

#[test]
fn a_49152_vocabulary_matches_too() {
    let mut rng = Rng::new(7);
    for kind in 0..5 {
        let l = logits(&mut rng, 49152, kind);
        let recent: Vec<u32> = (0..64).map(|_| rng.int(0, 49152) as u32).collect();
        for (t, top_k, top_p, pen) in
            [(0.0, 0, 1.0, 1.1), (0.8, 0, 1.0, 1.0), (0.8, 40, 0.95, 1.1), (1.3, 0, 0.9, 1.0), (0.1, 49152, 1.0, 0.9)]
        {
            for _ in 0..2 {
                check(&l, &recent, &params(t, top_k, top_p, pen, rng.next_u64() as u32));
            }
        }
    }
}

#[test]
fn the_reference_follows_its_rules() {
    let p = |t, k, top_p, r| params(t, k, top_p, 1.0, r);
    // Greedy: the lowest index among equals; NaN never wins; all NaN: 0; -inf counts.
    assert_eq!(host(&[1.0, 3.0, 3.0, 2.0], &[], &p(0.0, 0, 1.0, 0)), 1);
    assert_eq!(host(&[f32::NAN, -1.0, f32::NAN], &[], &p(0.0, 0, 1.0, 0)), 1);
    assert_eq!(host(&[f32::NAN, f32::NAN], &[], &p(0.7, 0, 1.0, 0)), 0);
    assert_eq!(host(&[f32::NAN, f32::NEG_INFINITY], &[], &p(0.7, 0, 1.0, 0)), 1);
    // Sampling draws among finite logits only (+inf and NaN never drawn while one is finite).
    for r in [0, 1 << 31, u32::MAX] {
        assert_eq!(host(&[f32::INFINITY, 0.5, f32::NAN], &[], &p(1.0, 0, 1.0, r)), 1);
    }
    // Ties: equal weights, the draw's low end takes the lower index, its high end the other.
    assert_eq!(host(&[1.0, 3.0, 3.0, 2.0], &[], &p(1.0, 2, 1.0, 0)), 1);
    assert_eq!(host(&[1.0, 3.0, 3.0, 2.0], &[], &p(1.0, 2, 1.0, u32::MAX)), 2);
    // top-k 1 and a tiny top-p are greedy over the finite logits; top-k >= vocabulary is off.
    for r in [0, 12345, u32::MAX] {
        assert_eq!(host(&[0.0, 2.0, 2.0, 1.9], &[], &p(1.0, 1, 1.0, r)), 1);
        assert_eq!(host(&[0.0, 2.0, 2.0, 1.9], &[], &p(1.0, 0, 1e-6, r)), 1);
        let l = [0.3, -1.0, 2.0, 0.0];
        assert_eq!(host(&l, &[], &p(1.0, 4, 1.0, r)), host(&l, &[], &p(1.0, 0, 1.0, r)));
        assert_eq!(host(&l, &[], &p(1.0, 99, 1.0, r)), host(&l, &[], &p(1.0, 0, 1.0, r)));
    }
    // A vocabulary of one.
    assert_eq!(host(&[-5.0], &[0], &params(0.9, 3, 0.2, 1.5, 77)), 0);
    // Penalty: a seen positive logit divided, a negative one multiplied (once per token).
    assert_eq!(host(&[0.1, 2.0, 1.9], &[1, 1, 1], &params(0.0, 0, 1.0, 1.1, 0)), 2);
    assert_eq!(host(&[-1.0, -1.05], &[0], &params(0.0, 0, 1.0, 1.1, 0)), 1);
    assert_eq!(host(&[-1.0, -1.05], &[0, 9], &params(0.0, 0, 1.0, 1.04, 0)), 0);
    // A tiny temperature keeps only the top; a huge one is uniform over the kept set.
    for r in [0, 1 << 31, u32::MAX] {
        assert_eq!(host(&[0.0, 1.0, 0.999], &[], &p(1e-30, 0, 1.0, r)), 1);
    }
    let uniform: Vec<u32> = (0..4u32).map(|q| host(&[0.0, 1.0, -3.0, 2.0], &[], &p(1e30, 0, 1.0, q << 30))).collect();
    assert_eq!(uniform, [3, 1, 0, 2], "in order, a quarter each");
}

#[test]
fn the_draw_follows_the_softmax() {
    // Weights are exp((z - max) / T) to ~1e-5: frequencies over an even grid of draws.
    let l = [1.0f32, 2.0, 0.0, -1.0, 0.5];
    let t = 0.8;
    let n = 1 << 14;
    let mut count = [0usize; 5];
    for q in 0..n {
        count[host(&l, &[], &params(t, 0, 1.0, 1.0, (q << 18) as u32)) as usize] += 1;
    }
    let z: f64 = l.iter().map(|&x| (x as f64 / t as f64).exp()).sum();
    for (i, &x) in l.iter().enumerate() {
        let want = (x as f64 / t as f64).exp() / z;
        let got = count[i] as f64 / n as f64;
        assert!((got - want).abs() < 2.0 / n as f64 + 1e-4, "token {i}: {got} vs {want}");
    }
}

#[test]
fn the_picked_token_is_written_into_the_ring() {
    let l = Tensor::from_slice(&[0.0f32, 5.0, 1.0], &[1, 3]).unwrap();
    let ring = Tensor::from_slice(&[u32::MAX; 4], &[4]).unwrap();
    let p = params(0.0, 0, 1.0, 2.0, 0);
    let picks: Vec<i32> =
        (0..3).map(|s| ops::sample_token(&l, &ring, &p, Some(s)).unwrap().to_vec::<i32>().unwrap()[0]).collect();
    // 5 is seen after the first pick: 2.5 still wins; the penalty applies once however often
    // a token repeats.
    assert_eq!(picks, [1, 1, 1]);
    assert_eq!(ring.to_vec::<u32>().unwrap(), [1, 1, 1, u32::MAX]);
    assert!(ops::sample_token(&l, &ring, &p, Some(4)).is_err());
    let empty = Tensor::from_slice::<f32>(&[], &[0]).unwrap();
    assert!(ops::sample_token(&empty, &ring, &p, None).is_err());
}

/// The ring's bound: at `SAMPLE_MAX_RECENT` ids (duplicates, empty slots and ids past the
/// vocabulary mixed in) the kernel still matches the reference; one id more is refused with
/// INVALID_ARGUMENT naming the limit, before anything runs.
#[test]
fn the_recent_ring_is_bounded() {
    let mut rng = Rng::new(29);
    let v = 300;
    let l = logits(&mut rng, v, 0);
    let ring: Vec<u32> = (0..ops::SAMPLE_MAX_RECENT)
        .map(|i| match i % 11 {
            0 => u32::MAX,
            1 => v as u32 + i as u32,
            _ => (i * 7 % 37) as u32,
        })
        .collect();
    for p in [params(0.0, 0, 1.0, 1.3, 0), params(0.8, 40, 0.9, 0.7, 0x9e37_79b9)] {
        check(&l, &ring, &p);
    }
    let mut over = ring.clone();
    over.push(3);
    let (lt, rt) = (Tensor::from_slice(&l, &[v]).unwrap(), Tensor::from_slice(&over, &[over.len()]).unwrap());
    let e = ops::sample_token(&lt, &rt, &params(0.0, 0, 1.0, 1.3, 0), None).unwrap_err();
    assert_eq!(e.code(), kiln_core::ErrorCode::InvalidArgument);
    assert!(e.to_string().contains(&ops::SAMPLE_MAX_RECENT.to_string()), "{e}");
}
