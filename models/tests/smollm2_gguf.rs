//! The Rust GGUF reader against the gguf Python package's view of SmolLM2's file
//! (tests/reference/smollm2/gguf.json, made by dump_gguf.py). Needs the model file:
//! scripts/fetch-smollm2.sh puts it in build/models/smollm2 (`make models-test` runs it first);
//! KILN_SMOLLM2_GGUF overrides the path. A missing model fails the test.

use kiln_models::gguf::{GgufFile, Value};
use kiln_models::gguf_tokenizer::GgufTokenizer;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};

fn model_path() -> PathBuf {
    match std::env::var_os("KILN_SMOLLM2_GGUF") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../build/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
    }
}

fn open() -> GgufFile {
    let p = model_path();
    GgufFile::open(&p).unwrap_or_else(|e| panic!("{}: {e} (run scripts/fetch-smollm2.sh)", p.display()))
}

fn reference() -> Json {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/smollm2/gguf.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn header_and_tensor_table_match_the_gguf_package() {
    let f = open();
    let r = reference();
    let h = f.header();
    assert_eq!(u64::from(h.version), r["version"].as_u64().unwrap());
    assert_eq!(h.tensors.len() as u64, r["tensor_count"].as_u64().unwrap());
    assert_eq!(h.metadata.len() as u64, r["kv_count"].as_u64().unwrap());
    assert_eq!(h.alignment, r["alignment"].as_u64().unwrap());
    assert_eq!(h.data_offset, r["data_offset"].as_u64().unwrap());
    let mut keys: Vec<&str> = h.metadata.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort();
    let want: Vec<&str> = r["keys"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
    assert_eq!(keys, want);
    let tensors = r["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), h.tensors.len());
    for (t, w) in h.tensors.iter().zip(tensors) {
        assert_eq!(t.name, w["name"].as_str().unwrap());
        assert_eq!(t.ty.name(), w["type"].as_str().unwrap(), "{}", t.name);
        let dims: Vec<u64> = w["dims"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).collect();
        assert_eq!(t.dims, dims, "{}", t.name);
        assert_eq!(t.offset, w["offset"].as_u64().unwrap(), "{}", t.name);
        assert_eq!(t.n_bytes, w["n_bytes"].as_u64().unwrap(), "{}", t.name);
        assert_eq!(f.data(t).len() as u64, t.n_bytes);
    }
    // The description of the file, from the table.
    let count = |ty: &str| h.tensors.iter().filter(|t| t.ty.name() == ty).count();
    assert_eq!((count("Q8_0"), count("Q4_1"), count("F32")), (1, 210, 61));
}

#[test]
fn metadata_matches_the_gguf_package() {
    let f = open();
    let r = reference();
    for (key, want) in r["metadata"].as_object().unwrap() {
        let got = f.get(key).unwrap_or_else(|| panic!("{key} missing"));
        match (got, want) {
            (Value::String(s), Json::String(w)) => assert_eq!(s, w, "{key}"),
            (Value::Bool(b), Json::Bool(w)) => assert_eq!(b, w, "{key}"),
            // f32 values widen exactly to the double the package printed.
            (v, Json::Number(n)) => assert_eq!(v.as_f64().unwrap(), n.as_f64().unwrap(), "{key}"),
            (v, w) => panic!("{key}: {v:?} against {w:?}"),
        }
    }
    let tok = &r["tokenizer"];
    let tokens = f.strings("tokenizer.ggml.tokens").unwrap();
    let merges = f.strings("tokenizer.ggml.merges").unwrap();
    assert_eq!(tokens.len() as u64, tok["n_tokens"].as_u64().unwrap());
    assert_eq!(merges.len() as u64, tok["n_merges"].as_u64().unwrap());
    let strs = |j: &Json| -> Vec<String> { j.as_array().unwrap().iter().map(|s| s.as_str().unwrap().into()).collect() };
    assert_eq!(tokens[..40], strs(&tok["first_tokens"])[..]);
    assert_eq!(tokens[tokens.len() - 10..], strs(&tok["last_tokens"])[..]);
    assert_eq!(merges[..20], strs(&tok["first_merges"])[..]);
    assert_eq!(merges[merges.len() - 5..], strs(&tok["last_merges"])[..]);

    let t = GgufTokenizer::from_gguf(&f).unwrap();
    assert_eq!(t.vocab_size(), tokens.len());
    assert_eq!(t.bos, Some(1));
    assert_eq!(t.eos, Some(2));
    assert!(!t.add_bos);
    for id in tok["non_normal"].as_object().unwrap().keys() {
        assert!(t.is_control(id.parse().unwrap()), "token {id}");
    }
    assert!(t.chat_template().unwrap().is_from_file(), "SmolLM2's GGUF has a chat template");
}
