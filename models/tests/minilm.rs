//! all-MiniLM-L6-v2 on Kiln against sentence-transformers' own output (tests/reference/, made
//! by make_reference.py with PyTorch; see there). Needs the model directory:
//! scripts/fetch-minilm.sh puts it in build/models/all-MiniLM-L6-v2 (`make models-test` runs
//! it first); KILN_MINILM_DIR overrides the place. A missing model fails the test.

use kiln_models::{EncodeOptions, LoadOptions, ModelError, Precision, SentenceEmbedder};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod common;
use common::compare;

/// The sentence truncated at 256 tokens in sentences.json.
const LONG: usize = 3;

fn reference_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference")
}

fn model_dir() -> PathBuf {
    match std::env::var_os("KILN_MINILM_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../build/models/all-MiniLM-L6-v2"),
    }
}

fn model() -> &'static SentenceEmbedder {
    static M: OnceLock<SentenceEmbedder> = OnceLock::new();
    M.get_or_init(|| {
        let dir = model_dir();
        SentenceEmbedder::load(&dir)
            .unwrap_or_else(|e| panic!("loading {}: {e} (run scripts/fetch-minilm.sh)", dir.display()))
    })
}

/// The same model in f16, or None where the adapter has no SHADER_F16 (lavapipe has it).
fn model_f16() -> Option<&'static SentenceEmbedder> {
    static M: OnceLock<Option<SentenceEmbedder>> = OnceLock::new();
    M.get_or_init(|| {
        if !kiln_core::device().unwrap().has_f16() {
            return None;
        }
        let opts = LoadOptions { precision: Precision::F16 };
        Some(SentenceEmbedder::load_with(model_dir(), opts, |_, _| {}).unwrap())
    })
    .as_ref()
}

fn sentences() -> Vec<String> {
    serde_json::from_str(&std::fs::read_to_string(reference_dir().join("sentences.json")).unwrap()).unwrap()
}

fn npy(name: &str) -> (Vec<f32>, Vec<u64>) {
    let bytes = std::fs::read(reference_dir().join(name)).unwrap();
    let f = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = f.shape().to_vec();
    (f.into_vec::<f32>().unwrap(), shape)
}

/// Cosine at least `min_cos` and max |difference| at most `max_diff`, per sentence.
const F32_TOLERANCE: (f64, f64) = (0.9999, 1e-4);
/// What the f16 path is held to against the f32 reference (about 3x its measured worst).
const F16_TOLERANCE: (f64, f64) = (0.99999, 1e-3);

/// Encodes the reference sentences whose index is in `rows` with `batch_size` and compares
/// each embedding with row i of the reference file.
fn check_against(reference: &str, normalize: bool, batch_size: usize, rows: &[usize]) {
    check_model_against(model(), F32_TOLERANCE, reference, normalize, batch_size, rows)
}

fn check_model_against(
    m: &SentenceEmbedder,
    (min_cos, max_diff): (f64, f64),
    reference: &str,
    normalize: bool,
    batch_size: usize,
    rows: &[usize],
) {
    let texts = sentences();
    let refs: Vec<&str> = rows.iter().map(|&i| texts[i].as_str()).collect();
    let got = m.encode_with(&refs, EncodeOptions { batch_size, normalize: Some(normalize) }).unwrap();
    let (all, shape) = npy(reference);
    assert_eq!(shape, vec![texts.len() as u64, m.dim() as u64]);
    assert_eq!((got.rows, got.dim), (rows.len(), m.dim()));
    let want: Vec<f32> = rows.iter().flat_map(|&i| all[i * m.dim()..(i + 1) * m.dim()].iter().copied()).collect();
    let mut bad = vec![];
    for (j, (cos, maxd)) in compare(&got.data, &want, got.dim).into_iter().enumerate() {
        let i = rows[j];
        println!(
            "{reference} {:?} batch {batch_size} sentence {i:2}: cosine {cos:.8} max|diff| {maxd:.2e}  {:?}",
            m.precision(),
            truncate(&texts[i])
        );
        if !(cos >= min_cos && maxd <= max_diff) {
            bad.push(i);
        }
    }
    assert!(bad.is_empty(), "sentences {bad:?} outside cosine >= {min_cos}, max|diff| <= {max_diff}");
}

fn truncate(s: &str) -> String {
    s.chars().take(40).collect()
}

#[test]
fn token_ids_equal_sentence_transformers() {
    let texts = sentences();
    let refs: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
    let reference: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reference_dir().join("token_ids.json")).unwrap()).unwrap();
    let want: Vec<Vec<u32>> = serde_json::from_value(reference["ids"].clone()).unwrap();
    let got = model().tokenize(&refs).unwrap();
    assert_eq!(got.len(), want.len());
    for (i, ((ids, types), w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(ids, w, "sentence {i} {:?}", texts[i]);
        assert!(types.iter().all(|&t| t == 0));
    }
    // The set covers truncation and the empty string.
    assert_eq!(want[LONG].len(), model().max_seq_length());
    assert_eq!(want[LONG].last(), Some(&102));
    assert!(want.iter().any(|w| w == &[101, 102]));
}

#[test]
fn normalized_embeddings_match_sentence_transformers() {
    // Every sentence, in pairs sorted by length: padded batches with real masks (the 256-token
    // sentence pads the 41-token one next to it to 256). Pairs, not more: lavapipe takes about
    // 15 s per 256-token sentence on two cores.
    let all: Vec<usize> = (0..sentences().len()).collect();
    check_against("embeddings.npy", true, 2, &all);
}

#[test]
fn pooled_embeddings_match_sentence_transformers_without_normalize() {
    // All but the 256-token sentence in one batch: everything padded to the longest (41).
    let rows: Vec<usize> = (0..sentences().len()).filter(|&i| i != LONG).collect();
    check_against("pooled.npy", false, 64, &rows);
}

#[test]
fn f16_embeddings_stay_close_to_sentence_transformers_f32() {
    // f16 weights and activations against the f32 reference: what f16 reaches, not a bit-match.
    // Measured on lavapipe over every short sentence: cosine >= 0.999998, max|diff| <= 3.5e-4.
    // Five of them (empty, accents, emoji, CJK, numbers): f16 is slow on lavapipe.
    let Some(m) = model_f16() else {
        println!("adapter without SHADER_F16: f16 path not run");
        return;
    };
    check_model_against(m, F16_TOLERANCE, "embeddings.npy", true, 64, &[2, 4, 5, 6, 9]);
}

#[test]
fn model_defaults_follow_modules_json() {
    let m = model();
    assert!(m.normalizes());
    assert_eq!((m.dim(), m.max_seq_length()), (384, 256));
    let e = m.encode(&["Hello world", ""]).unwrap();
    for i in 0..2 {
        let n: f32 = e.row(i).iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((n - 1.0).abs() < 1e-5, "{n}");
    }
    assert_eq!(m.encode(&[]).unwrap(), kiln_models::Embeddings { data: vec![], rows: 0, dim: 384 });
}

/// A copy of the model directory (symlinks to the big files) with one file replaced.
fn altered_model(tag: &str, file: &str, contents: Option<&str>) -> PathBuf {
    let src = model_dir();
    let dir = std::env::temp_dir().join(format!("kiln-minilm-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
    for f in [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "sentence_bert_config.json",
        "modules.json",
        "1_Pooling/config.json",
    ] {
        if f == file {
            if let Some(c) = contents {
                std::fs::write(dir.join(f), c).unwrap();
            }
        } else {
            std::os::unix::fs::symlink(src.join(f).canonicalize().unwrap(), dir.join(f)).unwrap();
        }
    }
    dir
}

fn config_with(from: &str, to: &str) -> String {
    let c = std::fs::read_to_string(model_dir().join("config.json")).unwrap();
    assert!(c.contains(from), "{from}");
    c.replace(from, to)
}

#[test]
fn clear_errors_for_bad_model_directories() {
    let err = |dir: PathBuf| -> ModelError {
        let e = SentenceEmbedder::load(&dir).err().expect("load should fail");
        let _ = std::fs::remove_dir_all(&dir);
        e
    };
    let e = err(PathBuf::from("/nonexistent/kiln-model"));
    assert!(matches!(e, ModelError::Io { .. }), "{e}");

    let e = err(altered_model("nosafetensors", "model.safetensors", None));
    assert!(matches!(&e, ModelError::Io { path, .. } if path.ends_with("model.safetensors")), "{e}");

    let e = err(altered_model("badjson", "config.json", Some("{\"hidden_size\": ")));
    assert!(matches!(&e, ModelError::Corrupt { path, .. } if path.ends_with("config.json")), "{e}");

    let e = err(altered_model("corrupt", "model.safetensors", Some("this is not a safetensors file")));
    assert!(matches!(&e, ModelError::Corrupt { path, .. } if path.ends_with("model.safetensors")), "{e}");

    let e = err(altered_model("badtok", "tokenizer.json", Some("{}")));
    assert!(matches!(&e, ModelError::Corrupt { path, .. } if path.ends_with("tokenizer.json")), "{e}");

    let e = err(altered_model(
        "gpt2",
        "config.json",
        Some(&config_with("\"model_type\": \"bert\"", "\"model_type\": \"gpt2\"")),
    ));
    assert!(matches!(&e, ModelError::Unsupported(m) if m.contains("gpt2")), "{e}");

    let e = err(altered_model(
        "shape",
        "config.json",
        Some(&config_with("\"intermediate_size\": 1536", "\"intermediate_size\": 1000")),
    ));
    assert!(
        matches!(&e, ModelError::WeightShape { name, expected, found } if name == "encoder.layer.0.intermediate.dense.weight" && expected.contains("1000") && found.contains("1536")),
        "{e}"
    );
    println!("{e}");
}
