//! BERT-family sentence-transformers folders (BERT, RoBERTa, XLM-RoBERTa, MPNet) on Kiln against
//! sentence-transformers' own output: small randomly initialised models of each family, saved
//! with save_pretrained as sentence-transformers folders, and what sentence-transformers gives
//! for them under every pooling mode (tests/reference/encoders/, made by
//! make_encoder_reference.py with PyTorch; see there). No download: the folders are in the repo.

use kiln_models::config::PoolingMode;
use kiln_models::{mpnet_relative_bucket, EncodeOptions, ModelError, SentenceEmbedder};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod common;
use common::compare;

const FAMILIES: [&str; 4] = ["bert", "roberta", "xlm-roberta", "mpnet"];

/// Per sentence: cosine at least 0.9999 and max |difference| at most 1e-4, MiniLM's f32
/// tolerance (tests/minilm.rs). Both sides compute in f32 and differ only in summation order
/// (matmul tiling, the fused attention's online softmax, the reductions): a few ulps of values of
/// order 1 after each LayerNorm: 7.5e-6 at worst on lavapipe (printed per row). A real mistake moves
/// the output far more: positions off by one, or MPNet without its relative bias, change these
/// references by more than 1e-2 (make_encoder_reference.py asserts that).
const TOLERANCE: (f64, f64) = (0.9999, 1e-4);

fn reference_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/encoders")
}

fn reference() -> &'static Value {
    static R: OnceLock<Value> = OnceLock::new();
    R.get_or_init(|| {
        serde_json::from_str(&std::fs::read_to_string(reference_dir().join("reference.json")).unwrap()).unwrap()
    })
}

fn sentences() -> Vec<String> {
    serde_json::from_value(reference()["sentences"].clone()).unwrap()
}

/// A copy of `family`'s folder in a fresh temp dir, for tests that change a file.
fn copy_folder(family: &str, tag: &str) -> PathBuf {
    let src = reference_dir().join(family);
    let dir = std::env::temp_dir().join(format!("kiln-encoders-{family}-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for entry in walk(&src) {
        let to = dir.join(entry.strip_prefix(&src).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &to).unwrap();
    }
    dir
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn edit_json(path: &Path, f: impl FnOnce(&mut Value)) {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

/// The folder's 1_Pooling/config.json set to `name` (a reference key such as "max" or
/// "cls+max+mean"; "+normalize" adds a Normalize module to modules.json). Single modes are
/// written in the Hub's pooling_mode_* layout, the concatenation in sentence-transformers 6.x's
/// `pooling_mode` list.
fn folder_with_pooling(family: &str, name: &str) -> PathBuf {
    let dir = copy_folder(family, &name.replace('+', "_"));
    let (modes, normalize) = match name.strip_suffix("+normalize") {
        Some(m) => (m, true),
        None => (name, false),
    };
    let legacy = |key: &str| {
        let mut c = serde_json::json!({
            "word_embedding_dimension": 64,
            "pooling_mode_cls_token": false,
            "pooling_mode_mean_tokens": false,
            "pooling_mode_max_tokens": false,
            "pooling_mode_mean_sqrt_len_tokens": false,
        });
        c[key] = Value::Bool(true);
        c
    };
    let config = match modes {
        "cls" => legacy("pooling_mode_cls_token"),
        "mean" => legacy("pooling_mode_mean_tokens"),
        "max" => legacy("pooling_mode_max_tokens"),
        "mean_sqrt_len_tokens" => legacy("pooling_mode_mean_sqrt_len_tokens"),
        "weightedmean" => legacy("pooling_mode_weightedmean_tokens"),
        "lasttoken" => legacy("pooling_mode_lasttoken"),
        list => {
            serde_json::json!({"embedding_dimension": 64, "pooling_mode": list.split('+').collect::<Vec<_>>(), "include_prompt": true})
        }
    };
    std::fs::write(dir.join("1_Pooling/config.json"), config.to_string()).unwrap();
    if normalize {
        edit_json(&dir.join("modules.json"), |m| {
            m.as_array_mut().unwrap().push(
                serde_json::json!({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}),
            )
        });
    }
    dir
}

/// Every reference embedding of `family` (each pooling mode, normalised or not), encoded in
/// batches of `batch_size` (padded batches; the reference used 4).
fn check_family(family: &str, batch_size: usize) {
    let texts = sentences();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let embeddings = reference()["families"][family]["embeddings"].as_object().unwrap();
    let mut bad = vec![];
    for (name, want) in embeddings {
        let dir = folder_with_pooling(family, name);
        let m = SentenceEmbedder::load(&dir).unwrap_or_else(|e| panic!("{family} {name}: {e}"));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(m.normalizes(), name.ends_with("+normalize"));
        let want: Vec<Vec<f32>> = serde_json::from_value(want.clone()).unwrap();
        assert_eq!(m.dim(), want[0].len(), "{family} {name}");
        let got = m.encode_with(&refs, EncodeOptions { batch_size, normalize: None }).unwrap();
        let want: Vec<f32> = want.concat();
        for (i, (cos, maxd)) in compare(&got.data, &want, got.dim).into_iter().enumerate() {
            println!("{family:12} {name:22} batch {batch_size:2} sentence {i}: cosine {cos:.8} max|diff| {maxd:.2e}");
            if !(cos >= TOLERANCE.0 && maxd <= TOLERANCE.1) {
                bad.push(format!("{name} sentence {i}: cosine {cos}, max|diff| {maxd}"));
            }
        }
    }
    assert!(bad.is_empty(), "{family}: {bad:#?}");
}

#[test]
fn token_ids_equal_sentence_transformers() {
    let texts = sentences();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let max = reference()["max_seq_length"].as_u64().unwrap() as usize;
    for family in FAMILIES {
        let m = SentenceEmbedder::load(reference_dir().join(family)).unwrap();
        assert_eq!(m.max_seq_length(), max);
        let want: Vec<Vec<u32>> = serde_json::from_value(reference()["families"][family]["token_ids"].clone()).unwrap();
        let got = m.tokenize(&refs).unwrap();
        for (i, ((ids, _), w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(ids, w, "{family} sentence {i} {:?}", texts[i]);
        }
        // The set covers truncation at max_seq_length.
        assert!(want.iter().any(|w| w.len() == max), "{family}");
    }
}

#[test]
fn bert_matches_sentence_transformers_in_every_pooling_mode() {
    check_family("bert", 4);
}

#[test]
fn roberta_matches_sentence_transformers_in_every_pooling_mode() {
    // One text per batch: no padding at all, against the reference's padded batches of 4.
    check_family("roberta", 1);
}

#[test]
fn xlm_roberta_matches_sentence_transformers_in_every_pooling_mode() {
    // All texts in one batch, padded to the longest (32).
    check_family("xlm-roberta", 64);
}

#[test]
fn mpnet_matches_sentence_transformers_in_every_pooling_mode() {
    check_family("mpnet", 3);
}

#[test]
fn mpnet_relative_buckets_equal_transformers() {
    let r = &reference()["mpnet_buckets"];
    let from = r["from"].as_i64().unwrap();
    let want: Vec<u32> = serde_json::from_value(r["buckets"].clone()).unwrap();
    for (i, &w) in want.iter().enumerate() {
        let rel = from + i as i64;
        assert_eq!(mpnet_relative_bucket(rel), w, "relative position {rel}");
    }
}

#[test]
fn pooling_and_length_settings_follow_the_folder() {
    let m = SentenceEmbedder::load(reference_dir().join("roberta")).unwrap();
    assert_eq!(m.pooling_modes(), &[PoolingMode::Mean]);
    assert!(!m.normalizes());
    // A legacy config with no mode set means mean, as sentence-transformers reads it.
    let dir = copy_folder("bert", "nomode");
    std::fs::write(dir.join("1_Pooling/config.json"), r#"{"word_embedding_dimension": 64}"#).unwrap();
    assert_eq!(SentenceEmbedder::load(&dir).unwrap().pooling_modes(), &[PoolingMode::Mean]);
    // sentence-transformers 6.x: no max_seq_length in sentence_bert_config.json, the tokenizer's
    // model_max_length instead.
    edit_json(&dir.join("sentence_bert_config.json"), |c| {
        c.as_object_mut().unwrap().remove("max_seq_length");
    });
    edit_json(&dir.join("tokenizer_config.json"), |c| c["model_max_length"] = 20.into());
    assert_eq!(SentenceEmbedder::load(&dir).unwrap().max_seq_length(), 20);
    let _ = std::fs::remove_dir_all(&dir);
    // A max_seq_length past the position table is held to it: RoBERTa's 34 positions start after
    // padding_idx 1, so 32 tokens fit (sentence-transformers would index past the table).
    let dir = copy_folder("roberta", "long");
    edit_json(&dir.join("sentence_bert_config.json"), |c| c["max_seq_length"] = 600.into());
    assert_eq!(SentenceEmbedder::load(&dir).unwrap().max_seq_length(), 32);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_folders_give_named_errors() {
    let load_err = |dir: &Path| -> ModelError {
        let e = SentenceEmbedder::load(dir).err().expect("load should fail");
        let _ = std::fs::remove_dir_all(dir);
        println!("{e}");
        e
    };
    // An architecture kiln does not run.
    let dir = copy_folder("roberta", "deberta");
    edit_json(&dir.join("config.json"), |c| {
        c["model_type"] = "deberta-v2".into();
        c["architectures"] = serde_json::json!(["DebertaV2Model"]);
    });
    let e = load_err(&dir);
    assert!(matches!(&e, ModelError::Unsupported(m) if m.contains("deberta-v2")), "{e}");

    // A missing file, named.
    let dir = copy_folder("xlm-roberta", "notok");
    std::fs::remove_file(dir.join("tokenizer.json")).unwrap();
    let e = load_err(&dir);
    assert!(matches!(&e, ModelError::Io { path, .. } if path.ends_with("tokenizer.json")), "{e}");

    // A pooling mode sentence-transformers does not have.
    let dir = copy_folder("bert", "attnpool");
    std::fs::write(dir.join("1_Pooling/config.json"), r#"{"embedding_dimension": 64, "pooling_mode": "attention"}"#)
        .unwrap();
    let e = load_err(&dir);
    assert!(matches!(&e, ModelError::Unsupported(m) if m.contains("\"attention\"") && m.contains("1_Pooling")), "{e}");

    // A module after pooling that kiln does not run (a Dense projection): refused, not skipped.
    let dir = copy_folder("mpnet", "dense");
    edit_json(&dir.join("modules.json"), |m| {
        m.as_array_mut().unwrap().push(
            serde_json::json!({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}),
        )
    });
    let e = load_err(&dir);
    assert!(matches!(&e, ModelError::Unsupported(m) if m.contains("sentence_transformers.models.Dense")), "{e}");

    // An MPNet checkpoint without its relative attention bias.
    let dir = copy_folder("mpnet", "nobias");
    edit_json(&dir.join("config.json"), |c| c["model_type"] = "bert".into());
    let e = load_err(&dir);
    assert!(matches!(&e, ModelError::MissingWeight(w) if w.contains("token_type_embeddings")), "{e}");
    let dir = copy_folder("bert", "asmpnet");
    edit_json(&dir.join("config.json"), |c| c["model_type"] = "mpnet".into());
    let e = load_err(&dir);
    assert!(matches!(&e, ModelError::MissingWeight(w) if w.contains("relative_attention_bias")), "{e}");

    // A position table too small for RoBERTa's offset.
    let dir = copy_folder("roberta", "nopos");
    edit_json(&dir.join("config.json"), |c| c["max_position_embeddings"] = 2.into());
    let e = load_err(&dir);
    assert!(matches!(&e, ModelError::Corrupt { path, .. } if path.ends_with("config.json")), "{e}");
}
