//! Issue 28: model files that loaded and answered zeros, NaN or gigabytes. Each builds a tiny
//! synthetic model (tests/fixtures), checks that the good one loads and embeds finite values,
//! then breaks one thing and expects a clear error naming the file and the field.

mod fixtures;

use fixtures::*;
use kiln_models::{CausalLM, ModelError, SentenceEmbedder};

fn load(tag: &str, b: &Bert) -> kiln_models::Result<SentenceEmbedder> {
    let dir = scratch(tag);
    b.write(&dir);
    SentenceEmbedder::load(&dir)
}

#[track_caller]
fn corrupt_in(e: ModelError, file: &str, words: &[&str]) {
    let msg = e.to_string();
    match &e {
        ModelError::Corrupt { path, .. } => assert!(path.ends_with(file), "{msg}: path should be {file}"),
        _ => panic!("expected a Corrupt error naming {file}, got {e:?}"),
    }
    for w in words {
        assert!(msg.contains(w), "{msg:?} should mention {w:?}");
    }
}

#[test]
fn the_synthetic_bert_loads_and_embeds_finite_values() {
    let m = load("good", &Bert::good()).unwrap();
    let e = m.encode(&["hello world", "kiln"]).unwrap();
    assert_eq!((e.rows, e.dim), (2, D));
    assert!(e.data.iter().all(|v| v.is_finite()), "{:?}", e.data);
    assert!(e.data.iter().any(|&v| v != 0.0));
}

#[test]
fn negative_or_zero_layer_norm_eps_is_refused() {
    // Before: eps = -1 embedded every text as NaN, exit code 0.
    for eps in ["-1", "0", "1e-50", "-1e-12"] {
        let b = Bert { layer_norm_eps: eps.into(), ..Bert::good() };
        corrupt_in(load("eps", &b).err().unwrap(), "config.json", &["layer_norm_eps"]);
    }
}

#[test]
fn tokenizer_ids_past_the_vocabulary_are_refused() {
    // Before: ids >= vocab_size read rows of zeros from the embedding op.
    let b = Bert { vocab_size: 4, ..Bert::good() };
    let e = load("vocab", &b).err().unwrap();
    corrupt_in(e, "tokenizer.json", &["id 5", "vocab_size", "config.json"]);
    // Attack: the vocabulary is in range but the post-processor's [CLS] is not (its id is its
    // own field in tokenizer.json): refused when a text is encoded, not embedded as zeros.
    let b = Bert { cls_id: 9, ..Bert::good() };
    let m = load("cls", &b).unwrap();
    corrupt_in(m.encode(&["hello"]).err().unwrap(), "tokenizer.json", &["token id 9", "vocab_size 6"]);
}

#[test]
fn an_empty_vocabulary_is_refused() {
    let b = Bert { vocab: "{}".into(), ..Bert::good() };
    corrupt_in(load("empty", &b).err().unwrap(), "tokenizer.json", &["empty"]);
}

#[test]
fn zero_sizes_in_config_are_refused() {
    let dir = scratch("zero");
    Bert::good().write(&dir);
    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path).unwrap().replace("\"type_vocab_size\": 2", "\"type_vocab_size\": 0");
    std::fs::write(&path, text).unwrap();
    corrupt_in(SentenceEmbedder::load(&dir).err().unwrap(), "config.json", &["type_vocab_size"]);
}

#[test]
fn a_gguf_whose_layers_share_bytes_is_refused() {
    // Issue 28's file: 1000 layers pointing at layer 0's bytes (about 1.7 MiB of table; it
    // loaded to 2 GB of device memory). Refused when the header is parsed, before any upload.
    let dir = scratch("aliased");
    let path = dir.join("aliased.gguf");
    std::fs::write(&path, aliased_gguf(1000)).unwrap();
    let e = CausalLM::load(&path).err().unwrap();
    corrupt_in(e, "aliased.gguf", &["overlap", "blk.0."]);
}

#[test]
fn a_gguf_without_chat_template_or_chatml_tokens_refuses_chat_prompt() {
    // The tiny vocabulary has <|im_end|> but no <|im_start|>: ChatML would be spelled out as
    // plain characters, so chat_prompt must refuse rather than fall back.
    let path = scratch("no-template").join("tiny.gguf");
    std::fs::write(&path, tiny_llama_gguf(1, 95, 64)).unwrap();
    let lm = CausalLM::load(&path).unwrap();
    let e = lm.chat_prompt("hi").expect_err("chat_prompt without a template");
    assert!(matches!(e, ModelError::Unsupported(_)), "{e:?}");
    assert!(e.to_string().contains("chat template"), "{e}");
}
