//! Picking the next token from the logits, on the host: greedy, or seeded sampling with
//! temperature, top-k, top-p and a repetition penalty. Everything after the logits is
//! [`kiln_core::ops::sample_token_host`]'s fixed integer-weight definition with a PRNG of our
//! own, so a seed gives the same choice on every device for the same logits, and the GPU
//! sampler ([`crate::sample_picker`]) the same choice as this one.

use kiln_core::ops::{self, SampleParams};

/// How the next token is chosen. `temperature <= 0` is greedy (the other knobs but the
/// repetition penalty are then unused).
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingOptions {
    pub temperature: f32,
    /// Keep the k most likely tokens (0: all).
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches p (1.0: all).
    pub top_p: f32,
    /// llama.cpp's: a seen token's positive logit is divided by it, a negative one multiplied
    /// (1.0: off).
    pub repetition_penalty: f32,
    /// How many of the last tokens (prompt included) the penalty looks at.
    pub repeat_last_n: usize,
    pub seed: u64,
}

impl Default for SamplingOptions {
    fn default() -> Self {
        SamplingOptions { temperature: 0.0, top_k: 0, top_p: 1.0, repetition_penalty: 1.0, repeat_last_n: 64, seed: 0 }
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and fully defined by its seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Index of the largest logit; the lowest index among equals; NaN never wins (all NaN: 0).
pub fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    let mut best_v = f32::NEG_INFINITY;
    let mut found = false;
    for (i, &v) in logits.iter().enumerate() {
        if !v.is_nan() && (!found || v > best_v) {
            best = i;
            best_v = v;
            found = true;
        }
    }
    best
}

#[derive(Debug, Clone)]
pub struct Sampler {
    opts: SamplingOptions,
    rng: Rng,
}

impl Sampler {
    pub fn new(opts: SamplingOptions) -> Sampler {
        let rng = Rng::new(opts.seed);
        Sampler { opts, rng }
    }

    pub fn options(&self) -> &SamplingOptions {
        &self.opts
    }

    /// Greedy with no repetition penalty: the next token is the logits' argmax, which the model
    /// can compute on the GPU.
    pub fn is_plain_greedy(&self) -> bool {
        let o = &self.opts;
        let penalty = o.repetition_penalty != 1.0 && o.repetition_penalty > 0.0;
        (o.temperature.is_nan() || o.temperature <= 0.0) && !penalty
    }

    /// The next token for `logits`, `history` being the tokens so far (prompt and generated):
    /// [`kiln_core::ops::sample_token_host`] over the last `repeat_last_n` of them, the
    /// definition that the GPU's [`kiln_core::ops::sample_token`] follows bit for bit. Draws
    /// exactly one number from the seed's stream per call, whatever the logits, so a GPU
    /// sampler can draw them ahead.
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> u32 {
        let start = history.len().saturating_sub(self.opts.repeat_last_n);
        let p = self.next_params();
        ops::sample_token_host(logits, &history[start..], &p)
    }

    /// The options with the next draw of the seed's stream: one call per token.
    pub fn next_params(&mut self) -> SampleParams {
        let o = &self.opts;
        SampleParams {
            temperature: o.temperature,
            top_k: o.top_k,
            top_p: o.top_p,
            repetition_penalty: o.repetition_penalty,
            random: (self.rng.next_u64() >> 32) as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_known_values() {
        // First outputs of SplitMix64 seeded with 0 (the reference C implementation's).
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        let mut r = Rng::new(7);
        for _ in 0..1000 {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
        }
    }

    #[test]
    fn argmax_ties_and_nan() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(argmax(&[f32::NAN, -1.0, f32::NAN]), 1);
        assert_eq!(argmax(&[f32::NEG_INFINITY, f32::NEG_INFINITY]), 0);
        assert_eq!(argmax(&[]), 0);
    }

    #[test]
    fn greedy_and_penalty() {
        let mut s = Sampler::new(SamplingOptions::default());
        assert_eq!(s.sample(&[0.1, 2.0, 1.9], &[]), 1);
        let mut s = Sampler::new(SamplingOptions { repetition_penalty: 1.1, ..Default::default() });
        // 2.0 / 1.1 < 1.9: the seen token loses.
        assert_eq!(s.sample(&[0.1, 2.0, 1.9], &[1]), 2);
        // A negative logit is pushed further down (-1.1 < -1.05).
        assert_eq!(s.sample(&[-1.0, -1.05], &[0]), 1);
        // Only the last repeat_last_n tokens count.
        let mut s = Sampler::new(SamplingOptions { repetition_penalty: 1.1, repeat_last_n: 1, ..Default::default() });
        assert_eq!(s.sample(&[0.1, 2.0, 1.9], &[1, 0]), 1);
    }

    #[test]
    fn one_draw_per_token_whatever_the_logits() {
        // The GPU sampler draws each token's number before its logits exist.
        let opts = SamplingOptions { temperature: 0.9, seed: 5, ..Default::default() };
        let (mut a, mut b) = (Sampler::new(opts.clone()), Sampler::new(opts));
        a.sample(&[f32::NAN, f32::NAN], &[]);
        b.sample(&[0.0, 1.0, 2.0], &[]);
        let l = [0.5, 0.2, 0.1, 0.9, 0.3];
        let (x, y): (Vec<u32>, Vec<u32>) = (0..50).map(|_| (a.sample(&l, &[]), b.sample(&l, &[]))).unzip();
        assert_eq!(x, y);
        assert!(x.iter().any(|&t| t != x[0]));
    }

    #[test]
    fn same_seed_same_choices_and_frequencies_follow_softmax() {
        let logits = [1.0f32, 2.0, 0.0, -1.0];
        let opts = SamplingOptions { temperature: 1.0, seed: 42, ..Default::default() };
        let run = |opts: &SamplingOptions| {
            let mut s = Sampler::new(opts.clone());
            (0..4000).map(|_| s.sample(&logits, &[])).collect::<Vec<u32>>()
        };
        let a = run(&opts);
        assert_eq!(a, run(&opts));
        assert_ne!(a, run(&SamplingOptions { seed: 43, ..opts.clone() }));
        let z: f64 = logits.iter().map(|&l| (l as f64).exp()).sum();
        for (i, &l) in logits.iter().enumerate() {
            let freq = a.iter().filter(|&&t| t as usize == i).count() as f64 / a.len() as f64;
            let p = (l as f64).exp() / z;
            assert!((freq - p).abs() < 0.03, "token {i}: {freq} vs {p}");
        }
        // top-k 2 and top-p keep only the likeliest.
        let k2 = run(&SamplingOptions { top_k: 2, ..opts.clone() });
        assert!(k2.iter().all(|&t| t == 0 || t == 1));
        let p = run(&SamplingOptions { top_p: 0.5, ..opts.clone() });
        assert!(p.iter().all(|&t| t == 1));
    }
}
