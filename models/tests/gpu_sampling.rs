//! Sampled generation in the GPU-resident loop (models/src/sample_picker.rs: ops::sample_token
//! picks each token on the GPU) against the serial loop (`with_lookahead(0)`), where the host
//! sampler picks from logits read back: the same token stream for a seed, for every option
//! (temperature, top-k, top-p, repetition penalty over the last `repeat_last_n` tokens, prompt
//! included), on the tiny random Llama GGUF.

mod fixtures;

use kiln_models::{CausalLM, GenerateOptions, SamplingOptions};

fn tiny(tag: &str) -> CausalLM {
    let dir = fixtures::scratch(&format!("gpu-sampling-{tag}"));
    let path = dir.join("tiny.gguf");
    std::fs::write(&path, fixtures::tiny_llama_gguf(3, 0, 256)).unwrap();
    CausalLM::load_on(&path, kiln_models::Backend::Gpu, |_, _| {}).unwrap()
}

fn tokens(model: &CausalLM, prompt: &[u32], opts: &GenerateOptions, lookahead: usize) -> Vec<u32> {
    let mut g = model.generate_from_ids(prompt.to_vec(), opts.clone()).with_lookahead(lookahead);
    for p in g.by_ref() {
        p.unwrap();
    }
    g.tokens().to_vec()
}

#[test]
fn the_pipelined_sampled_stream_equals_the_serial_host_sampled_one() {
    let model = tiny("equal");
    let prompt: &[u32] = &[3, 40, 17, 80, 5, 40, 40];
    let s = |temperature, top_k, top_p, repetition_penalty, repeat_last_n, seed| SamplingOptions {
        temperature,
        top_k,
        top_p,
        repetition_penalty,
        repeat_last_n,
        seed,
    };
    let cases = [
        s(0.8, 0, 1.0, 1.0, 64, 3),
        s(1.0, 0, 1.0, 1.0, 64, 4),
        s(1.5, 40, 0.95, 1.0, 64, 5),
        s(0.7, 5, 1.0, 1.3, 64, 6),
        s(1.2, 0, 0.6, 1.1, 3, 7),
        s(2.0, 0, 1.0, 0.8, 64, 8),
        // Greedy with a penalty: the sampler's greedy rule, on the GPU.
        s(0.0, 0, 1.0, 1.5, 8, 9),
        s(1e-3, 0, 1.0, 1.0, 0, 10),
        // A penalty window past anything a sequence can hold (an attack on the GPU ring's
        // size: a ring of usize::MAX slots was a capacity-overflow panic): every token counts,
        // as on the host.
        s(0.9, 0, 1.0, 1.2, usize::MAX, 11),
        s(0.9, 0, 1.0, 1.2, 1 << 40, 11),
    ];
    let mut distinct_streams = Vec::new();
    for sampling in cases {
        let opts =
            GenerateOptions { max_tokens: 14, stop_at_eos: false, sampling: sampling.clone(), ..Default::default() };
        let want = tokens(&model, prompt, &opts, 0);
        assert_eq!(want.len(), 14);
        for lookahead in [1, 8] {
            assert_eq!(tokens(&model, prompt, &opts, lookahead), want, "{sampling:?}, lookahead {lookahead}");
        }
        distinct_streams.push(want);
    }
    // The options matter (else the comparisons above say little): most streams differ.
    distinct_streams.sort();
    distinct_streams.dedup();
    assert!(distinct_streams.len() >= 6, "{distinct_streams:?}");
}
