//! Picking the next token from the logits, on the host: greedy, or seeded sampling with
//! temperature, top-k, top-p and a repetition penalty. Everything after the logits is computed
//! here in a fixed order with a PRNG of our own, so a seed gives the same choice on every device
//! for the same logits.

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

    /// The next token for `logits` (changed in place by the penalty), `history` being the
    /// tokens so far (prompt and generated).
    pub fn sample(&mut self, logits: &mut [f32], history: &[u32]) -> u32 {
        let o = &self.opts;
        if o.repetition_penalty != 1.0 && o.repetition_penalty > 0.0 {
            let start = history.len().saturating_sub(o.repeat_last_n);
            let mut seen: Vec<u32> = history[start..].to_vec();
            seen.sort_unstable();
            seen.dedup();
            for t in seen {
                if let Some(l) = logits.get_mut(t as usize) {
                    *l = if *l > 0.0 { *l / o.repetition_penalty } else { *l * o.repetition_penalty };
                }
            }
        }
        if o.temperature.is_nan() || o.temperature <= 0.0 {
            return argmax(logits) as u32;
        }
        // Candidates by logit, highest first (ties by index, so the order is total).
        let mut idx: Vec<usize> = (0..logits.len()).filter(|&i| logits[i].is_finite()).collect();
        if idx.is_empty() {
            return argmax(logits) as u32;
        }
        idx.sort_unstable_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
        if o.top_k > 0 {
            idx.truncate(o.top_k);
        }
        let max = logits[idx[0]] as f64;
        let t = o.temperature as f64;
        let mut probs: Vec<f64> = idx.iter().map(|&i| ((logits[i] as f64 - max) / t).exp()).collect();
        let total: f64 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= total);
        if o.top_p < 1.0 {
            let mut acc = 0.0;
            let mut keep = probs.len();
            for (j, p) in probs.iter().enumerate() {
                acc += p;
                if acc >= o.top_p as f64 {
                    keep = j + 1;
                    break;
                }
            }
            probs.truncate(keep);
            idx.truncate(keep);
            let total: f64 = probs.iter().sum();
            probs.iter_mut().for_each(|p| *p /= total);
        }
        let r = self.rng.next_f64();
        let mut acc = 0.0;
        for (j, p) in probs.iter().enumerate() {
            acc += p;
            if r < acc {
                return idx[j] as u32;
            }
        }
        idx[probs.len() - 1] as u32
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
        assert_eq!(s.sample(&mut [0.1, 2.0, 1.9], &[]), 1);
        let mut s = Sampler::new(SamplingOptions { repetition_penalty: 1.1, ..Default::default() });
        // 2.0 / 1.1 < 1.9: the seen token loses.
        assert_eq!(s.sample(&mut [0.1, 2.0, 1.9], &[1]), 2);
        // A negative logit is pushed further down.
        let mut l = [-1.0, -1.05];
        assert_eq!(s.sample(&mut l, &[0]), 1);
        assert_eq!(l[0], -1.1);
    }

    #[test]
    fn same_seed_same_choices_and_frequencies_follow_softmax() {
        let logits = [1.0f32, 2.0, 0.0, -1.0];
        let opts = SamplingOptions { temperature: 1.0, seed: 42, ..Default::default() };
        let run = |opts: &SamplingOptions| {
            let mut s = Sampler::new(opts.clone());
            (0..4000).map(|_| s.sample(&mut logits.clone(), &[])).collect::<Vec<u32>>()
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
