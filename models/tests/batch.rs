//! Batched generation (models/src/batch.rs) against each sequence generated alone: the same
//! tokens, the same text, the same stops and errors, for ragged prompts and per-sequence
//! max_tokens, EOS, stop strings and seeds, at B = 1, 3 and 16; the logits within rounding of
//! the single-sequence decode path's. On the tiny random Llama GGUF (fixtures::tiny_llama_gguf:
//! cheap on lavapipe), through `Backend::Gpu` (the batched kernels) and `Backend::Cpu` (which
//! loops the sequences).

mod fixtures;

use kiln_models::{Backend, BatchOutput, BatchProducts, CausalLM, GenerateOptions, SamplingOptions};

fn tiny(tag: &str, eos: u32, context: u32, backend: Backend) -> CausalLM {
    let dir = fixtures::scratch(&format!("batch-{tag}"));
    let path = dir.join("tiny.gguf");
    std::fs::write(&path, fixtures::tiny_llama_gguf(3, eos, context)).unwrap();
    CausalLM::load_on(&path, backend, |_, _| {}).unwrap()
}

/// What a sequence produced alone (the serial reference loop, lookahead 0: host sampling).
#[derive(Debug, PartialEq)]
struct Alone {
    text: String,
    tokens: Vec<u32>,
    error: Option<String>,
}

fn alone(model: &CausalLM, prompt: &[u32], opts: &GenerateOptions) -> Alone {
    let mut g = model.generate_from_ids(prompt.to_vec(), opts.clone()).with_lookahead(0);
    let (mut text, mut error) = (String::new(), None);
    for p in g.by_ref() {
        match p {
            Ok(p) => text += &p,
            Err(e) => error = Some(e.to_string()),
        }
    }
    Alone { text, tokens: g.tokens().to_vec(), error }
}

fn as_alone(o: &BatchOutput) -> Alone {
    Alone { text: o.text.clone(), tokens: o.tokens.clone(), error: o.error.as_ref().map(|e| e.to_string()) }
}

/// `n` prompts of ragged lengths (1 to 9 tokens) over the printable tokens.
fn prompts(n: usize) -> Vec<Vec<u32>> {
    (0..n).map(|i| (0..1 + (i * 5) % 9).map(|j| ((i * 31 + j * 7 + 3) % 94) as u32).collect()).collect()
}

/// The single-sequence decode path's logits for each token of `tokens` after `prompt`
/// (`forward` over a cache: the prompt's pass, then one token a step).
fn alone_logits(model: &CausalLM, prompt: &[u32], tokens: &[u32]) -> Vec<Vec<f32>> {
    if tokens.is_empty() {
        return Vec::new();
    }
    let mut cache = model.cache_with_capacity(prompt.len() + tokens.len()).unwrap();
    let mut out = vec![model.forward(prompt, &mut cache).unwrap()];
    for &t in &tokens[..tokens.len().saturating_sub(1)] {
        out.push(model.forward(&[t], &mut cache).unwrap());
    }
    out
}

/// Largest |a - b| / (1 + |b|) over two runs of logits.
fn logit_error(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    assert_eq!(a.len(), b.len());
    let mut worst = 0f32;
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.len(), y.len());
        for (&p, &q) in x.iter().zip(y) {
            assert!(p.is_finite() && q.is_finite(), "{p} {q}");
            worst = worst.max((p - q).abs() / (1.0 + q.abs()));
        }
    }
    worst
}

/// The tolerance on a batched logit against the single-sequence one, relative to 1 + |logit|:
/// the same products summed in other orders (the tiled kernel, attention split over the
/// batch's longest row), f32 accumulation over K = 32..64 here.
const LOGIT_TOL: f32 = 1e-4;

fn check_batch(model: &CausalLM, prompts: &[Vec<u32>], opts: &[GenerateOptions], with_logits: bool) {
    check_batch_on(model, prompts, opts, with_logits, BatchProducts::Matvec)
}

fn check_batch_on(
    model: &CausalLM,
    prompts: &[Vec<u32>],
    opts: &[GenerateOptions],
    with_logits: bool,
    products: BatchProducts,
) {
    // Without logits a greedy batch keeps its picks on the GPU and records steps ahead; with
    // them (and with sampling rows) it reads each step back first: both checked.
    let batch = |keep: bool| {
        let g = model.generate_batch_from_ids(prompts.to_vec(), opts).unwrap().with_products(products);
        (if keep { g.keep_logits() } else { g }).run().unwrap()
    };
    let (outs, stats) = batch(false);
    assert_eq!(outs.len(), prompts.len());
    for (i, (p, o)) in prompts.iter().zip(&outs).enumerate() {
        let opt = &opts[if opts.len() == 1 { 0 } else { i }];
        let want = alone(model, p, opt);
        assert_eq!(as_alone(o), want, "sequence {i} of {}: prompt {p:?}, {opt:?}", prompts.len());
    }
    assert_eq!(stats.generated_tokens, outs.iter().map(|o| o.tokens.len()).sum::<usize>());
    // Every token after a sequence's first comes from a decode step.
    assert_eq!(stats.decode_tokens, outs.iter().map(|o| o.tokens.len().saturating_sub(1)).sum::<usize>());
    assert!(stats.steps <= stats.decode_tokens && (stats.steps > 0) == (stats.decode_tokens > 0), "{stats:?}");
    if with_logits {
        let (read, _) = batch(true);
        for (i, ((p, o), r)) in prompts.iter().zip(&outs).zip(&read).enumerate() {
            assert_eq!(as_alone(r), as_alone(o), "sequence {i}: read back each step");
            assert_eq!(r.logits.len(), r.tokens.len());
            let err = logit_error(&r.logits, &alone_logits(model, p, &r.tokens));
            assert!(err <= LOGIT_TOL, "sequence {i}: logits off by {err}");
        }
    }
}

#[test]
fn each_sequence_of_a_greedy_batch_gets_its_tokens_alone() {
    for backend in [Backend::Gpu, Backend::Cpu] {
        let model = tiny(&format!("greedy-{backend:?}"), 0, 256, backend);
        for b in [1, 3, 16] {
            let ps = prompts(b);
            // Ragged max_tokens: 0 (nothing), 1 (prefill only), up to 13.
            let opts: Vec<GenerateOptions> = (0..b)
                .map(|i| GenerateOptions {
                    max_tokens: [7, 0, 13, 1, 5][i % 5],
                    stop_at_eos: false,
                    ..Default::default()
                })
                .collect();
            check_batch(&model, &ps, &opts, backend == Backend::Gpu);
            if b > 8 && backend == Backend::Gpu {
                check_batch_on(&model, &ps, &opts, true, BatchProducts::Tiled);
            }
        }
        // One options for all.
        check_batch(&model, &prompts(4), &[GenerateOptions { max_tokens: 6, ..Default::default() }], false);
    }
}

#[test]
fn stops_errors_and_sampling_are_per_sequence() {
    let model = tiny("stops", 0, 256, Backend::Gpu);
    let ps = prompts(6);
    // Sequence 0's free text gives a stop string for sequence 1 (same prompt): its 5th and 6th
    // characters.
    let free = alone(&model, &ps[0], &GenerateOptions { max_tokens: 12, stop_at_eos: false, ..Default::default() });
    let stop: String = free.text.chars().skip(4).take(2).collect();
    let mut batch_prompts = ps.clone();
    batch_prompts[1] = ps[0].clone();
    batch_prompts[3] = Vec::new();
    let sampled = |seed| SamplingOptions { temperature: 0.9, top_k: 20, top_p: 0.95, seed, ..Default::default() };
    let opts = vec![
        GenerateOptions { max_tokens: 12, stop_at_eos: false, ..Default::default() },
        GenerateOptions { max_tokens: 12, stop_at_eos: false, stop: vec![stop], ..Default::default() },
        GenerateOptions { max_tokens: 9, sampling: sampled(7), ..Default::default() },
        // An empty prompt: its error, the others unaffected.
        GenerateOptions { max_tokens: 4, ..Default::default() },
        GenerateOptions { max_tokens: 9, sampling: sampled(8), ..Default::default() },
        GenerateOptions {
            max_tokens: 9,
            sampling: SamplingOptions { repetition_penalty: 1.3, ..sampled(7) },
            ..Default::default()
        },
    ];
    check_batch(&model, &batch_prompts, &opts, false);
    let (outs, _) = model.generate_batch_from_ids(batch_prompts.clone(), &opts).unwrap().run().unwrap();
    assert!(outs[1].tokens.len() < outs[0].tokens.len(), "the stop string ended sequence 1 early");
    assert!(outs[3].error.as_ref().is_some_and(|e| e.to_string().contains("empty prompt")));
    assert_ne!(outs[2].tokens, outs[4].tokens, "different seeds, different streams");

    // EOS: the 6th token of sequence 0's free stream made EOS ends it there.
    let eos = free.tokens[5];
    let model = tiny("eos", eos, 256, Backend::Gpu);
    check_batch(&model, &ps, &[GenerateOptions { max_tokens: 12, ..Default::default() }], false);

    // The context: 11 positions; rows run out at different steps, with the single path's error.
    let model = tiny("context", 0, 11, Backend::Gpu);
    let opts = [GenerateOptions { max_tokens: 20, stop_at_eos: false, ..Default::default() }];
    check_batch(&model, &prompts(5), &opts, false);
    let (outs, _) = model.generate_batch_from_ids(prompts(5), &opts).unwrap().run().unwrap();
    assert!(outs.iter().all(|o| o.error.as_ref().is_some_and(|e| e.to_string().contains("context of 11"))));

    // Options that match no prompt count.
    assert!(model.generate_batch_from_ids(prompts(3), &[opts[0].clone(), opts[0].clone()]).is_err());
}

/// The batch's attention reads every sequence's cache up to the longest row, masking the rest
/// with -inf; rows never written must not be NaN left over in a recycled buffer (NaN + -inf is
/// NaN): NaN-filled buffers of the caches' size are freed to the pool first.
#[test]
fn nan_left_in_recycled_buffers_does_not_reach_a_batch() {
    let model = tiny("nan-pool", 0, 256, Backend::Gpu);
    let ps = prompts(5);
    let opts = [GenerateOptions { max_tokens: 6, stop_at_eos: false, ..Default::default() }];
    // Capacity 9 + 6 = 15 rows of the tiny model's one KV head of 16.
    let dev = kiln_core::device().unwrap();
    let junk: Vec<_> = (0..64)
        .map(|_| kiln_core::ops::full_on(&dev, &[1, 15, 16], kiln_core::DType::F32, f64::NAN).unwrap())
        .collect();
    dev.synchronize().unwrap();
    drop(junk);
    check_batch(&model, &ps, &opts, false);
}
