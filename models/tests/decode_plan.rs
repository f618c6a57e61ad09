//! The recorded decode plan (kiln_core::plan, `DecodePlan` in models/src/llama.rs) against the
//! ops layer it replays: the same logits to the bit and the same tokens, greedy and sampled,
//! serial and pipelined, over enough tokens to cross split-KV geometry changes (the tiny model's
//! attention changes its number of splits every 64 keys: at 65 and 129), and plans dropped
//! where they no longer hold (the cache grown, another model). On fixtures::tiny_llama_gguf.

mod fixtures;

use kiln_models::{CausalLM, GenerateOptions};

fn tiny(tag: &str, seed: u64, context: u32) -> CausalLM {
    let dir = fixtures::scratch(&format!("decode-plan-{tag}"));
    let path = dir.join("tiny.gguf");
    std::fs::write(&path, fixtures::tiny_llama_gguf(seed, 0, context)).unwrap();
    CausalLM::load_on(&path, kiln_models::Backend::Gpu, |_, _| {}).unwrap()
}

const PROMPT: [u32; 5] = [3, 40, 17, 80, 5];
/// Decode steps: past 129 keys, so two geometry changes of the split-KV attention.
const STEPS: usize = 140;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Greedy steps through `forward` from PROMPT, the plan on or off: each step's logits, and the
/// plans captured and replayed.
fn stepped(model: &CausalLM, planned: bool, capacity: usize) -> (Vec<Vec<u32>>, (usize, usize)) {
    let mut cache = model.cache_with_capacity(capacity).unwrap();
    cache.set_decode_plan(planned);
    let mut logits = model.forward(&PROMPT, &mut cache).unwrap();
    let mut out = Vec::new();
    for _ in 0..STEPS {
        let t = kiln_models::sampling::argmax(&logits) as u32;
        logits = model.forward(&[t], &mut cache).unwrap();
        out.push(bits(&logits));
    }
    assert_eq!(cache.decode_plan_dispatches().is_some(), planned);
    (out, cache.decode_plan_counts())
}

#[test]
fn replayed_logits_equal_the_ops_paths_to_the_bit() {
    let model = tiny("logits", 3, 256);
    let (want, none) = stepped(&model, false, 256);
    assert_eq!(none, (0, 0));
    let (got, (captured, replayed)) = stepped(&model, true, 256);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(g == w, "step {i} (position {}): logits differ", PROMPT.len() + i);
    }
    // Captured at the first decode token and where the splits change (65 and 129 keys),
    // replayed in between.
    assert_eq!((captured, replayed), (3, STEPS - 3));
    // A varied stream (else equal logits say little).
    let mut distinct: Vec<u32> = got.iter().map(|l| l.iter().max().copied().unwrap()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() > 3);
}

#[test]
fn a_growing_cache_drops_its_plan_and_keeps_the_bits() {
    // Capacity 8 grows at 8, 16, 32, 64 and 128 positions: new K and V each time.
    let model = tiny("grow", 3, 256);
    let (want, _) = stepped(&model, false, 8);
    let (got, (captured, replayed)) = stepped(&model, true, 8);
    assert!(got == want, "logits differ");
    // Captured at the first decode token and again at each growth (at 8, 16, 32, 64 and 128
    // positions; the splits change at 64 and 128 too).
    assert_eq!((captured, replayed), (6, STEPS - 6));
}

fn generate(model: &CausalLM, opts: &GenerateOptions, lookahead: usize, planned: bool) -> Vec<u32> {
    let mut g =
        model.generate_from_ids(PROMPT.to_vec(), opts.clone()).with_lookahead(lookahead).with_decode_plan(planned);
    for p in g.by_ref() {
        p.unwrap();
    }
    g.tokens().to_vec()
}

#[test]
fn planned_generation_streams_the_same_tokens() {
    let model = tiny("generate", 3, 256);
    let greedy = GenerateOptions { max_tokens: STEPS, stop_at_eos: false, ..Default::default() };
    let mut sampled = greedy.clone();
    sampled.sampling.temperature = 0.8;
    sampled.sampling.top_k = 20;
    sampled.sampling.seed = 7;
    for (name, opts) in [("greedy", &greedy), ("sampled", &sampled)] {
        let want = generate(&model, opts, 0, false);
        assert_eq!(want.len(), STEPS);
        for lookahead in [0, 8] {
            assert_eq!(generate(&model, opts, lookahead, true), want, "{name}, lookahead {lookahead}");
        }
    }
}

#[test]
fn a_cache_taken_to_another_model_does_not_replay_the_first_ones_plan() {
    // Two caches filled by model A (one planned, one not), then decoded by model B after A is
    // dropped: B's logits, equal in both, never A's plan replayed.
    let (mut planned, mut plain) = {
        let a = tiny("model-a", 3, 256);
        let mut planned = a.cache_with_capacity(64).unwrap();
        let mut plain = a.cache_with_capacity(64).unwrap();
        plain.set_decode_plan(false);
        for c in [&mut planned, &mut plain] {
            a.forward(&PROMPT, c).unwrap();
            for t in [7, 9, 11] {
                a.forward(&[t], c).unwrap();
            }
        }
        assert!(planned.decode_plan_dispatches().is_some());
        (planned, plain)
    };
    let b = tiny("model-b", 5, 256);
    for t in [13, 21, 34, 55] {
        let got = b.forward(&[t], &mut planned).unwrap();
        let want = b.forward(&[t], &mut plain).unwrap();
        assert!(bits(&got) == bits(&want), "token {t}");
    }
}
