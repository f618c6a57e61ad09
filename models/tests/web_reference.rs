//! The native side of the browser's model tests (web/test/models.js): runs the same models the
//! page runs, on this machine's GPU device, and writes what they gave to
//! build/web/models-reference/ for the page to compare against, bit for bit:
//!   reference.json   MiniLM f32 embeddings (as u32 bits) of awkward sentences, two option sets;
//!                    the tiny decoder's greedy and seeded-sampled tokens and text
//!   tiny-llama.gguf  fixtures::tiny_llama_gguf, the bytes the page loads
//!   minilm           a link to the MiniLM folder (the page fetches it over HTTP)
//! `make web-models-reference` runs it before the page test, on lavapipe, while the page gets
//! Chromium's SwiftShader in CI: another adapter, the same kernels, whose arithmetic order is
//! fixed (no compiler may reassociate or fuse it: shaders/norm.wgsl, elementwise_special.wgsl),
//! so the page must give the same bits (checked: this test writes the same reference.json,
//! but for its adapter's name, through SwiftShader's Vulkan ICD and through lavapipe's).

mod fixtures;

use kiln_models::{Backend, CausalLM, EncodeOptions, GenerateOptions, SamplingOptions, SentenceEmbedder};
use std::path::{Path, PathBuf};

/// KILN_WEB_REFERENCE_DIR (`make web-models-reference` sets it); without it (a plain `cargo
/// test`, on whatever adapter) a scratch directory, so that the page's reference is only ever
/// written from the adapter the page uses.
fn out_dir() -> PathBuf {
    match std::env::var_os("KILN_WEB_REFERENCE_DIR") {
        Some(d) => PathBuf::from(d),
        None => fixtures::scratch("web-reference"),
    }
}

fn minilm_dir() -> PathBuf {
    match std::env::var_os("KILN_MINILM_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../build/models/all-MiniLM-L6-v2"),
    }
}

/// Empty, accents and an emoji (WordPiece's [UNK]), mixed case (lowercased), one word, and
/// lengths from 2 to ~40 tokens, so that batches are ragged. Short: SwiftShader, the page's
/// adapter in CI, takes ~100 s for one batch padded to 256 tokens.
fn sentences() -> Vec<String> {
    vec![
        "A man is playing a guitar.".into(),
        String::new(),
        "Naïve café — Übergrößen, 東京, 🚀!".into(),
        "GPU".into(),
        "The QUICK brown fox jumps over the lazy dog; the dog does not mind.".into(),
        "Kiln runs the same WGSL kernels natively and in the page, so a sentence embedded here and there should \
         give the same bits when the adapter is the same one."
            .into(),
    ]
}

fn bits(v: &[f32]) -> String {
    let items: Vec<String> = v.iter().map(|x| x.to_bits().to_string()).collect();
    format!("[{}]", items.join(","))
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// (text, tokens) of a whole generation.
fn run(model: &CausalLM, prompt: &str, opts: GenerateOptions) -> (String, Vec<u32>) {
    let mut g = model.generate(prompt, opts).unwrap();
    let text = g.text().unwrap();
    (text, g.tokens().to_vec())
}

#[test]
fn write_the_native_results_the_page_compares_against() {
    let out = out_dir();
    std::fs::create_dir_all(&out).unwrap();

    let link = out.join("minilm");
    let _ = std::fs::remove_file(&link);
    let target = std::fs::canonicalize(minilm_dir()).expect("the MiniLM folder (scripts/fetch-minilm.sh)");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let emb = SentenceEmbedder::load(&target).unwrap();
    let texts = sentences();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let normalized = emb.encode_with(&refs, EncodeOptions { batch_size: 32, normalize: None }).unwrap();
    let pooled = emb.encode_with(&refs, EncodeOptions { batch_size: 2, normalize: Some(false) }).unwrap();
    // The page's path (each batch's readback awaited) is this one's bits natively too.
    let awaited =
        kiln_core_block_on(emb.encode_async(&refs, EncodeOptions { batch_size: 2, normalize: Some(false) }, |_, _| {}));
    assert_eq!(bits(&awaited.unwrap().data), bits(&pooled.data));

    let gguf = fixtures::tiny_llama_gguf(3, 95, 256);
    let gguf_path = out.join("tiny-llama.gguf");
    std::fs::write(&gguf_path, &gguf).unwrap();
    let lm = CausalLM::load_on(&gguf_path, Backend::Gpu, |_, _| {}).unwrap();
    let prompt = "Kiln:hello";
    let greedy = GenerateOptions { max_tokens: 12, stop_at_eos: false, ..Default::default() };
    let (greedy_text, greedy_tokens) = run(&lm, prompt, greedy);
    let sampled_opts = GenerateOptions {
        max_tokens: 12,
        stop_at_eos: false,
        sampling: SamplingOptions { temperature: 0.8, top_k: 20, top_p: 0.9, seed: 7, ..Default::default() },
        ..Default::default()
    };
    let (sampled_text, sampled_tokens) = run(&lm, prompt, sampled_opts);
    assert_eq!(greedy_tokens.len(), 12);

    let list = |v: &[u32]| format!("{v:?}");
    let adapter = kiln_core::device().unwrap().info().clone();
    let json = format!(
        "{{\n\"adapter\": {},\n\"sentences\": [{}],\n\"dimension\": {},\n\"normalized\": {{\"batchSize\": 32, \"bits\": {}}},\n\"pooled\": {{\"batchSize\": 2, \"normalize\": false, \"bits\": {}}},\n\"tiny\": {{\"prompt\": {}, \"promptTokens\": {}, \"greedy\": {{\"maxNewTokens\": 12, \"tokens\": {}, \"text\": {}}}, \"sampled\": {{\"maxNewTokens\": 12, \"temperature\": 0.8, \"topK\": 20, \"topP\": 0.9, \"seed\": 7, \"tokens\": {}, \"text\": {}}}}}\n}}\n",
        json_str(&format!("{} ({}, {})", adapter.name, adapter.backend, adapter.driver)),
        texts.iter().map(|s| json_str(s)).collect::<Vec<_>>().join(", "),
        emb.dim(),
        bits(&normalized.data),
        bits(&pooled.data),
        json_str(prompt),
        list(&lm.tokenizer().encode(prompt).unwrap()),
        list(&greedy_tokens),
        json_str(&greedy_text),
        list(&sampled_tokens),
        json_str(&sampled_text),
    );
    std::fs::write(out.join("reference.json"), json).unwrap();
}

/// Polls a future to completion on this thread (kiln-core's readback future wakes it from its
/// own thread; no runtime needed).
fn kiln_core_block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::sync::{Arc, Condvar, Mutex};
    use std::task::{Context, Poll, Wake, Waker};
    struct Signal(Mutex<bool>, Condvar);
    impl Wake for Signal {
        fn wake(self: Arc<Self>) {
            *self.0.lock().unwrap() = true;
            self.1.notify_one();
        }
    }
    let signal = Arc::new(Signal(Mutex::new(false), Condvar::new()));
    let waker = Waker::from(signal.clone());
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        let mut woken = signal.0.lock().unwrap();
        while !*woken {
            woken = signal.1.wait(woken).unwrap();
        }
        *woken = false;
    }
}
