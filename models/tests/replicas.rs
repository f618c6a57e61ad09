//! Data parallel work over two devices (models/src/replicas.rs): one copy of a model per
//! device, inputs split, results in input order. Two adapters without a GPU: Mesa's llvmpipe
//! through Vulkan (lavapipe, device 0) and through OpenGL (device 1), `KILN_BACKENDS=vulkan,gl`
//! (set before anything reads the environment: every test calls `two()` first).
//!
//! What is exact and what is not: each embedding row is bit for bit the one-device call's on the
//! device that ran its batch (the same batches as one device's); across the two adapters
//! (lavapipe against llvmpipe's GL) rows differ by up to 2.4e-7 and are held to a tolerance, and
//! both to sentence-transformers' reference (tests/reference); generated tokens are compared
//! exactly, against one device's.

mod common;
mod fixtures;

use kiln_core::device::Device;
use kiln_models::{
    BatchProducts, CausalLM, Embeddings, EncodeOptions, GenerateOptions, LoadOptions, ModelError, Precision, Replicas,
    SamplingOptions, SentenceEmbedder,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Once};

/// The tests share device 1, and one of them destroys it: they run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn two() -> (Arc<Device>, Arc<Device>) {
    static ENV: Once = Once::new();
    // SAFETY: the first thing any test does (behind the Once); no other thread reads the
    // environment before it has run.
    ENV.call_once(|| unsafe { std::env::set_var("KILN_BACKENDS", "vulkan,gl") });
    let rt = kiln_core::runtime();
    let n = rt.adapters().len();
    assert!(n >= 2, "needs two adapters (llvmpipe through Vulkan and through GL): found {n}");
    (rt.device_at(0).unwrap(), rt.device_at(1).unwrap())
}

fn minilm_dir() -> PathBuf {
    match std::env::var_os("KILN_MINILM_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../build/models/all-MiniLM-L6-v2"),
    }
}

fn reference_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference")
}

/// The reference sentences but the 256-token one (15 s a pass on lavapipe), and their
/// sentence-transformers embeddings (normalised).
fn sentences_and_reference() -> (Vec<String>, Vec<f32>) {
    let texts: Vec<String> =
        serde_json::from_str(&std::fs::read_to_string(reference_dir().join("sentences.json")).unwrap()).unwrap();
    let bytes = std::fs::read(reference_dir().join("embeddings.npy")).unwrap();
    let all = npyz::NpyFile::new(&bytes[..]).unwrap().into_vec::<f32>().unwrap();
    let dim = all.len() / texts.len();
    let keep: Vec<usize> = (0..texts.len()).filter(|&i| texts[i].len() < 1000).collect();
    (
        keep.iter().map(|&i| texts[i].clone()).collect(),
        keep.iter().flat_map(|&i| all[i * dim..(i + 1) * dim].iter().copied()).collect(),
    )
}

/// A one-device model on `d` (loaded inside `with_device`).
fn one_on(d: &Arc<Device>) -> SentenceEmbedder {
    kiln_core::with_device(d, || SentenceEmbedder::load(minilm_dir())).unwrap()
}

/// Whether `a` and `b` hold the same bits; on a difference, where the first one is.
fn same(a: &[f32], b: &[f32]) -> Result<(), String> {
    if a.len() != b.len() {
        return Err(format!("{} values against {}", a.len(), b.len()));
    }
    match a.iter().zip(b).position(|(x, y)| x.to_bits() != y.to_bits()) {
        None => Ok(()),
        Some(i) => Err(format!("value {i}: {} against {}", a[i], b[i])),
    }
}

/// Each row of `got`: bit for bit `whole0`'s or `whole1`'s (the one-device calls on the two
/// devices); how many rows only one of them gives, per device.
fn rows_from(got: &Embeddings, whole0: &Embeddings, whole1: &Embeddings) -> (usize, usize) {
    let d = got.dim;
    let (mut from0, mut from1) = (0, 0);
    for i in 0..got.rows {
        let r = |e: &Embeddings| e.data[i * d..(i + 1) * d].to_vec();
        let (g, a, b) = (r(got), r(whole0), r(whole1));
        match (same(&g, &a).is_ok(), same(&g, &b).is_ok()) {
            (true, false) => from0 += 1,
            (false, true) => from1 += 1,
            (true, true) => {}
            _ => panic!("row {i} is neither device's one-device row: {:?} / {:?}", same(&g, &a), same(&g, &b)),
        }
    }
    (from0, from1)
}

#[test]
fn minilm_over_two_devices_matches_sentence_transformers_and_each_devices_bits() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (d0, d1) = two();
    let (texts, reference) = sentences_and_reference();
    // Six short sentences (the empty one among them): MiniLM on llvmpipe's GL is slow.
    let rows = [0, 1, 2, 5, 6, 11];
    let refs: Vec<&str> = rows.iter().map(|&i| texts[i].as_str()).collect();
    const DIM: usize = 384;
    let want: Vec<f32> = rows.iter().flat_map(|&i| reference[i * DIM..(i + 1) * DIM].iter().copied()).collect();
    // Batches of 2: 3 batches dealt to the two devices.
    let opts = EncodeOptions { batch_size: 2, normalize: None };
    let dp = SentenceEmbedder::load_replicated(minilm_dir(), &[d0.clone(), d1.clone()], LoadOptions::default())
        .unwrap_or_else(|e| panic!("{e} (run scripts/fetch-minilm.sh)"));
    let got = dp.encode_with(&refs, opts).unwrap();
    assert_eq!((got.rows, got.dim), (refs.len(), DIM));
    for (j, (cos, maxd)) in common::compare(&got.data, &want, DIM).into_iter().enumerate() {
        assert!(cos >= 0.9999 && maxd <= 1e-4, "sentence {}: cosine {cos}, max|diff| {maxd}", rows[j]);
    }
    let whole0 = one_on(&d0).encode_with(&refs, opts).unwrap();
    let whole1 = one_on(&d1).encode_with(&refs, opts).unwrap();
    let (from0, from1) = rows_from(&got, &whole0, &whole1);
    let (cos, maxd) = common::compare(&whole1.data, &whole0.data, DIM)
        .into_iter()
        .fold((1f64, 0f64), |(c, m), (c2, m2)| (c.min(c2), m.max(m2)));
    println!(
        "GL against Vulkan: min cosine {cos:.9}, max|diff| {maxd:.2e}; rows only one device gives: {from0} + {from1}"
    );
    assert!(cos >= 0.999999 && maxd <= 1e-5, "GL against Vulkan: cosine {cos}, max|diff| {maxd}");
}

#[test]
fn shares_and_small_calls_give_the_devices_one_device_bits() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (d0, d1) = two();
    let dir = tiny_bert();
    let words = ["hello", "world", "kiln"];
    let texts: Vec<String> =
        (0..11).map(|i| (0..1 + (i * 5) % 6).map(|j| words[(i + j * 2) % 3]).collect::<Vec<_>>().join(" ")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let n = refs.len();
    let opts = EncodeOptions { batch_size: 2, normalize: Some(false) };
    let mut dp = SentenceEmbedder::load_replicated(&dir, &[d0.clone(), d1.clone()], LoadOptions::default()).unwrap();
    let on = |d| kiln_core::with_device(d, || SentenceEmbedder::load(&dir)).unwrap();
    let (m0, m1) = (&on(&d0), &on(&d1));
    let (whole0, whole1) = (m0.encode_with(&refs, opts).unwrap(), m1.encode_with(&refs, opts).unwrap());
    let got = dp.encode_with(&refs, opts).unwrap();
    assert_eq!((got.rows, got.dim), (n, whole0.dim));
    let (from0, from1) = rows_from(&got, &whole0, &whole1);
    println!("tiny BERT: rows only one device gives: {from0} + {from1}");

    // Shares: nearly all on one device is that device's one-device call, bit for bit.
    for bad in [&[1.0][..], &[1.0, 0.0], &[1.0, f64::NAN], &[1.0, -2.0], &[1.0, f64::INFINITY], &[1.0, 1.0, 1.0]] {
        assert!(matches!(dp.set_shares(bad), Err(ModelError::Kiln(kiln_core::Error::InvalidArgument(_)))), "{bad:?}");
    }
    assert_eq!(dp.shares(), &[0.5, 0.5], "a refused share changes nothing");
    dp.set_shares(&[1.0, 1e-6]).unwrap();
    same(&dp.encode_with(&refs, opts).unwrap().data, &whole0.data).unwrap();
    dp.set_shares(&[1e-6, 1.0]).unwrap();
    same(&dp.encode_with(&refs, opts).unwrap().data, &whole1.data).unwrap();
    dp.set_shares(&[f64::MAX, f64::MAX]).unwrap();
    assert_eq!(dp.shares(), &[0.5, 0.5], "shares past f64's sum");
    same(&dp.encode_with(&refs, opts).unwrap().data, &got.data).unwrap();

    // Fewer batches than devices (one batch of 64): the texts sorted by length, the longer half
    // to device 0 and the shorter to device 1, each its part's one-device bits.
    let wide = EncodeOptions { batch_size: 64, normalize: Some(false) };
    let got = dp.encode_with(&refs, wide).unwrap();
    let d = got.dim;
    let lens: Vec<usize> = m0.tokenize(&refs).unwrap().iter().map(|t| t.0.len()).collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(lens[i]));
    for (m, part) in [(m0, &order[..n.div_ceil(2)]), (m1, &order[n.div_ceil(2)..])] {
        let part_texts: Vec<&str> = part.iter().map(|&i| refs[i]).collect();
        let want = m.encode_with(&part_texts, wide).unwrap();
        for (j, &i) in part.iter().enumerate() {
            same(&got.data[i * d..(i + 1) * d], &want.data[j * d..(j + 1) * d])
                .unwrap_or_else(|e| panic!("row {i}: {e}"));
        }
    }
    let one = dp.encode_with(&refs[..1], wide).unwrap();
    same(&one.data, &m0.encode_with(&refs[..1], wide).unwrap().data).unwrap();
    let none = dp.encode_with(&[], opts).unwrap();
    assert_eq!((none.rows, none.dim, none.data.len()), (0, d, 0));
}

#[test]
fn jobs_are_dealt_by_cost_and_share() {
    use kiln_models::replicas::{assign, split};
    assert_eq!(split(13, &[1.0, 1.0]), vec![0..7, 7..13]);
    assert_eq!(split(13, &[1.0, 3.0]), vec![0..3, 3..13]);
    assert_eq!(split(1, &[1.0, 1.0, 1.0]), vec![0..1, 1..1, 1..1]);
    assert_eq!(split(0, &[1.0, 1.0]), vec![0..0, 0..0]);
    assert_eq!(split(10, &[1.0, 1.0, 1.0]), vec![0..4, 4..7, 7..10]);
    assert_eq!(split(1000, &[1e-300, 1.0]), vec![0..0, 0..1000]);
    assert_eq!(split(5, &[f64::MAX, f64::MAX]), vec![0..3, 3..5], "an infinite sum: equal parts");
    assert!(split(5, &[]).is_empty());
    // Four equal batches over 1, 2, 4 devices: 4, 2 + 2, 1 each.
    assert_eq!(assign(&[5.0; 4], &[1.0]), vec![vec![0, 1, 2, 3]]);
    assert_eq!(assign(&[5.0; 4], &[1.0, 1.0]), vec![vec![0, 2], vec![1, 3]]);
    assert_eq!(assign(&[5.0; 4], &[1.0; 4]), vec![vec![0], vec![1], vec![2], vec![3]]);
    // Longest first (sorted by length): the long one alone, the short ones together.
    assert_eq!(assign(&[9.0, 3.0, 3.0, 3.0], &[1.0, 1.0]), vec![vec![0], vec![1, 2, 3]]);
    // A device with twice the share takes twice the work.
    assert_eq!(assign(&[1.0; 6], &[2.0, 1.0]), vec![vec![0, 1, 3, 4], vec![2, 5]]);
}

/// The fixtures' tiny BERT directory (D = 4, one layer): cheap to load and run on both adapters.
fn tiny_bert() -> PathBuf {
    let dir = fixtures::scratch("replicas-bert");
    fixtures::Bert::good().write(&dir);
    dir
}

#[test]
fn device_lists_are_checked_and_a_failing_device_is_named() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (d0, d1) = two();
    let dir = tiny_bert();
    let load = |devices: &[Arc<Device>], precision| {
        SentenceEmbedder::load_replicated(&dir, devices, LoadOptions { precision })
    };
    let err = |r: Result<Replicas<SentenceEmbedder>, ModelError>| r.err().expect("loaded").to_string();
    assert!(err(load(&[], Precision::F32)).contains("no device"));
    assert!(err(load(&[d0.clone(), d0.clone()], Precision::F32)).contains("twice"));
    assert!(kiln_models::replicas::devices(&[0, 0]).is_err());
    let past = kiln_models::replicas::devices(&[0, 99]).err().unwrap().to_string();
    assert!(past.contains("device 99") && past.contains("adapter"), "{past}");
    assert_eq!(kiln_models::replicas::devices(&[1, 0]).unwrap()[0].info().index, 1);
    // A bad model directory: each device's load fails; one error names the first device and
    // counts the other.
    let e =
        err(SentenceEmbedder::load_replicated("/nonexistent/model", &[d0.clone(), d1.clone()], LoadOptions::default()));
    assert!(e.starts_with("device 0 (") && e.contains("(and 1 other device failed)"), "{e}");
    // f16 where only one adapter has SHADER_F16: that device's Unsupported error, named.
    println!("SHADER_F16: device 0 {}, device 1 {}", d0.has_f16(), d1.has_f16());
    for (k, d) in [&d0, &d1].into_iter().enumerate() {
        if !d.has_f16() {
            let e = load(&[d0.clone(), d1.clone()], Precision::F16).err().expect("f16 loaded without SHADER_F16");
            assert!(matches!(e.root(), ModelError::Unsupported(m) if m.contains("SHADER_F16")), "{e}");
            assert!(e.to_string().starts_with(&format!("device {k} (")), "{e}");
        }
    }

    // A device lost in the middle of the work: the call's error names it, the other device's
    // copy keeps working, and a copy loaded again on the re-created device works.
    let dp = load(&[d0.clone(), d1.clone()], Precision::F32).unwrap();
    let texts = ["hello world", "kiln", "world hello kiln"];
    let before = dp.encode(&texts).unwrap();
    let alone0 = dp.get(0).unwrap().encode(&texts).unwrap();
    d1.destroy();
    let e = dp.encode(&texts).expect_err("ran on a destroyed device");
    assert!(e.to_string().starts_with("device 1 ("), "{e}");
    assert!(matches!(e.root(), ModelError::Kiln(k) if k.code() == kiln_core::ErrorCode::DeviceLost), "{e:?}");
    same(&dp.get(0).unwrap().encode(&texts).unwrap().data, &alone0.data).unwrap();
    let again = kiln_models::replicas::devices(&[0, 1]).unwrap();
    assert!(!Arc::ptr_eq(&again[1], &d1) && !again[1].is_lost());
    let after = load(&again, Precision::F32).unwrap().encode(&texts).unwrap();
    same(&after.data, &before.data).expect("the re-created GL device gives the same bits");
}

fn tiny(tag: &str) -> PathBuf {
    let dir = fixtures::scratch(&format!("replicas-{tag}"));
    let path = dir.join("tiny.gguf");
    std::fs::write(&path, fixtures::tiny_llama_gguf(3, 0, 256)).unwrap();
    path
}

/// `n` prompts of ragged lengths (1 to 9 tokens) over the printable tokens.
fn prompts(n: usize) -> Vec<Vec<u32>> {
    (0..n).map(|i| (0..1 + (i * 5) % 9).map(|j| ((i * 31 + j * 7 + 3) % 94) as u32).collect()).collect()
}

#[test]
fn batched_generation_over_two_devices_gives_each_sequence_its_one_device_tokens() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (d0, d1) = two();
    let path = tiny("gen");
    let dp = CausalLM::load_replicated(&path, &[d0.clone(), d1.clone()]).unwrap();
    let on = |d| kiln_core::with_device(d, || CausalLM::load_on(&path, kiln_models::Backend::Gpu, |_, _| {})).unwrap();
    let one = on(&d0);
    // Loaded on device 1 and run from this thread (whose default is device 0): it runs on its
    // own device, the tokens those of device 0's copy.
    let on1 = on(&d1);
    let sampled = |seed| SamplingOptions { temperature: 0.9, top_k: 20, top_p: 0.95, seed, ..Default::default() };
    let ps = prompts(7);
    let greedy = [GenerateOptions { max_tokens: 8, stop_at_eos: false, ..Default::default() }];
    let mixed: Vec<GenerateOptions> = (0..ps.len())
        .map(|i| GenerateOptions {
            max_tokens: 3 + i,
            stop_at_eos: false,
            sampling: if i % 2 == 1 { sampled(10 + i as u64) } else { SamplingOptions::default() },
            ..Default::default()
        })
        .collect();
    for opts in [&greedy[..], &mixed[..]] {
        let (outs, stats) = dp.generate_batch_from_ids(ps.clone(), opts, BatchProducts::Auto).unwrap();
        let (want, _) = one.generate_batch_from_ids(ps.clone(), opts).unwrap().run().unwrap();
        let (want1, _) = on1.generate_batch_from_ids(ps.clone(), opts).unwrap().run().unwrap();
        assert_eq!(outs.len(), ps.len());
        for (i, (o, w)) in outs.iter().zip(&want).enumerate() {
            assert!(o.error.is_none() && w.error.is_none());
            assert_eq!((&o.tokens, &o.text), (&w.tokens, &w.text), "sequence {i}");
            assert_eq!(&want1[i].tokens, &w.tokens, "sequence {i} on device 1 alone");
            let max = opts[if opts.len() == 1 { 0 } else { i }].max_tokens;
            assert_eq!(o.tokens.len(), max, "sequence {i}");
        }
        assert_eq!(stats.sequences, ps.len());
        assert_eq!(stats.generated_tokens, outs.iter().map(|o| o.tokens.len()).sum::<usize>());
        assert_eq!(stats.prompt_tokens, ps.iter().map(Vec::len).sum::<usize>());
    }
    // From text, one prompt each: the same as the ids.
    let texts = ["Hi", "kiln", "GPU"];
    let (outs, _) = dp.generate_batch(&texts, &greedy).unwrap();
    let (want, _) = one.generate_batch(&texts, &greedy).unwrap().run().unwrap();
    assert_eq!(outs.iter().map(|o| &o.tokens).collect::<Vec<_>>(), want.iter().map(|o| &o.tokens).collect::<Vec<_>>());
    // A sequence's own error stays its own (an empty prompt); a bad option count is the call's.
    let mut with_empty = ps.clone();
    with_empty[5] = Vec::new();
    let (outs, _) = dp.generate_batch_from_ids(with_empty, &greedy, BatchProducts::Auto).unwrap();
    assert!(outs[5].error.as_ref().is_some_and(|e| e.to_string().contains("empty prompt")));
    assert!(outs.iter().enumerate().all(|(i, o)| i == 5 || o.error.is_none()));
    assert!(dp.generate_batch_from_ids(ps.clone(), &mixed[..2], BatchProducts::Auto).is_err());
}
