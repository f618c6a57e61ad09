//! The GPU-resident greedy loop (models/src/decode_loop.rs) against the serial loop it replaced
//! (`with_lookahead(0)`: record a token, read its id, record the next), kept as the reference:
//! the same tokens, the same streamed pieces, the same stops and errors, on a tiny random Llama
//! GGUF (fixtures::tiny_llama_gguf: cheap on lavapipe). SmolLM2 is compared in smollm2.rs.

mod fixtures;

use kiln_models::{CausalLM, GenerateOptions};

/// Seed 3's weights give varied streams with no control token in the first 16 of either prompt
/// (seed 1's give `<|im_end|>` as the 8th token after PROMPTS[1]).
fn tiny_seeded(tag: &str, seed: u64, eos: u32, context: u32) -> CausalLM {
    let dir = fixtures::scratch(&format!("decode-loop-{tag}"));
    let path = dir.join("tiny.gguf");
    std::fs::write(&path, fixtures::tiny_llama_gguf(seed, eos, context)).unwrap();
    CausalLM::load_on(&path, kiln_models::Backend::Gpu, |_, _| {}).unwrap()
}

fn tiny(tag: &str, eos: u32, context: u32) -> CausalLM {
    tiny_seeded(tag, 3, eos, context)
}

/// What a generation streamed: its pieces, its tokens, and the error it ended with.
#[derive(Debug, PartialEq)]
struct Run {
    pieces: Vec<String>,
    tokens: Vec<u32>,
    error: Option<String>,
}

fn run(model: &CausalLM, prompt: &[u32], opts: &GenerateOptions, lookahead: usize) -> Run {
    let mut g = model.generate_from_ids(prompt.to_vec(), opts.clone()).with_lookahead(lookahead);
    let mut pieces = Vec::new();
    let mut error = None;
    for p in g.by_ref() {
        match p {
            Ok(p) => pieces.push(p),
            Err(e) => error = Some(e.to_string()),
        }
    }
    let s = g.stats();
    assert_eq!(s.generated_tokens, g.tokens().len());
    assert!(s.decode_recording + s.decode_submitting <= s.decode + s.prefill, "{s:?}");
    assert!(s.decode_waiting <= s.decode, "{s:?}");
    Run { pieces, tokens: g.tokens().to_vec(), error }
}

const PROMPTS: [&[u32]; 2] = [&[3, 40, 17, 80, 5], &[60]];

#[test]
fn the_pipelined_stream_equals_the_serial_one() {
    // EOS and control tokens do not stop this run (eos 0 and stop_at_eos off), so every length
    // runs in full: lengths around and between read windows.
    let model = tiny("equal", 0, 256);
    for prompt in PROMPTS {
        for max_tokens in [0, 1, 2, 5, 13] {
            let opts = GenerateOptions { max_tokens, stop_at_eos: false, ..Default::default() };
            let want = run(&model, prompt, &opts, 0);
            assert_eq!(want.tokens.len(), max_tokens);
            assert_eq!(want.error, None);
            for lookahead in [1, 3, 8] {
                let got = run(&model, prompt, &opts, lookahead);
                assert_eq!(got, want, "prompt {prompt:?}, {max_tokens} tokens, lookahead {lookahead}");
            }
        }
    }
    // The random weights give a varied stream (else the comparisons above say little).
    let opts = GenerateOptions { max_tokens: 13, stop_at_eos: false, ..Default::default() };
    let r = run(&model, PROMPTS[0], &opts, 8);
    let mut distinct = r.tokens.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() >= 3, "{:?}", r.tokens);
}

/// The first position k >= 3 whose token did not appear before it.
fn first_new_token_after(tokens: &[u32], k: usize) -> (usize, u32) {
    (k..tokens.len()).find(|&i| !tokens[..i].contains(&tokens[i])).map(|i| (i, tokens[i])).expect("a new token")
}

#[test]
fn eos_inside_a_window_stops_both_loops_at_the_same_token() {
    let free = run(
        &tiny("eos-free", 0, 256),
        PROMPTS[0],
        &GenerateOptions { max_tokens: 16, stop_at_eos: false, ..Default::default() },
        0,
    );
    let (k, eos) = first_new_token_after(&free.tokens, 5);
    // The same weights with that token as EOS: generation ends on it, mid-window.
    let model = tiny("eos", eos, 256);
    let opts = GenerateOptions { max_tokens: 16, ..Default::default() };
    let want = run(&model, PROMPTS[0], &opts, 0);
    assert_eq!(want.tokens, free.tokens[..=k], "eos {eos} at {k}");
    for lookahead in [2, 8] {
        assert_eq!(run(&model, PROMPTS[0], &opts, lookahead), want, "lookahead {lookahead}");
    }
}

#[test]
fn a_control_token_inside_a_window_stops_both_loops_at_the_same_token() {
    let model = tiny_seeded("control", 1, 0, 256);
    let opts = GenerateOptions { max_tokens: 16, ..Default::default() };
    let want = run(&model, PROMPTS[1], &opts, 0);
    assert_eq!(want.tokens.len(), 8, "{:?}", want.tokens);
    assert_eq!(want.tokens[7], 95, "<|im_end|>");
    for lookahead in [3, 8] {
        assert_eq!(run(&model, PROMPTS[1], &opts, lookahead), want, "lookahead {lookahead}");
    }
}

#[test]
fn a_stop_string_inside_a_window_stops_both_loops_alike() {
    let model = tiny("stop", 0, 256);
    let free =
        run(&model, PROMPTS[1], &GenerateOptions { max_tokens: 16, stop_at_eos: false, ..Default::default() }, 0);
    // Every token is one character: a stop made of tokens 6 and 7 ends the text before them.
    let text: String = free.pieces.concat();
    let stop: String = text.chars().skip(6).take(2).collect();
    let at = text.find(&stop).unwrap();
    let opts = GenerateOptions { max_tokens: 16, stop_at_eos: false, stop: vec![stop.clone()], ..Default::default() };
    let want = run(&model, PROMPTS[1], &opts, 0);
    assert_eq!(want.pieces.concat(), text[..at], "stop {stop:?} in {text:?}");
    assert!(want.tokens.len() < 16);
    for lookahead in [1, 8] {
        assert_eq!(run(&model, PROMPTS[1], &opts, lookahead), want, "lookahead {lookahead}");
    }
}

#[test]
fn running_out_of_context_mid_window_gives_the_same_tokens_then_the_same_error() {
    // 5 prompt tokens in a context of 11: the prompt's token and 6 decoded ones, then the 7th
    // decode step would need position 12.
    let model = tiny("context", 0, 11);
    let opts = GenerateOptions { max_tokens: 20, stop_at_eos: false, ..Default::default() };
    let want = run(&model, PROMPTS[0], &opts, 0);
    assert_eq!(want.tokens.len(), 7);
    let e = want.error.clone().expect("a context error");
    assert!(e.contains("exceed the model's context of 11"), "{e}");
    for lookahead in [1, 4, 8] {
        assert_eq!(run(&model, PROMPTS[0], &opts, lookahead), want, "lookahead {lookahead}");
    }
}

#[test]
fn sampling_streams_the_same_in_both_loops() {
    // Sampling is picked on the GPU in the pipelined loop (gpu_sampling.rs tests more options).
    let model = tiny("sample", 0, 256);
    let mut opts = GenerateOptions { max_tokens: 9, stop_at_eos: false, ..Default::default() };
    opts.sampling.temperature = 0.8;
    opts.sampling.seed = 3;
    let want = run(&model, PROMPTS[0], &opts, 0);
    assert_eq!(run(&model, PROMPTS[0], &opts, 8), want);
}
