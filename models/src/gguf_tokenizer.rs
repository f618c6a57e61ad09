//! The tokenizer stored in a GGUF file (`tokenizer.ggml.*`), rebuilt as a Hugging Face
//! `tokenizers::Tokenizer` that splits text the way llama.cpp does, plus the byte-level decoding
//! for streaming and the chat template ([`crate::chat_template`]).
//!
//! Two of llama.cpp's vocabulary types: "gpt2" (byte-level BPE: Llama 3, Qwen2, SmolLM2), with
//! the pre-tokenizers whose regexes are reproduced here from llama.cpp's llama-vocab.cpp
//! (`LLAMA_VOCAB_PRE_TYPE_*`, chosen by `tokenizer.ggml.pre`: [`PreSplit`]), and "llama"
//! (SentencePiece: Llama 2, Mistral 7B, Phi-3, Gemma), tokenized as llama.cpp does it
//! ([`crate::sentencepiece`]).

use crate::chat_template::ChatTemplate;
use crate::error::{ModelError, Result};
use crate::gguf::{Array, GgufFile, Value};
use crate::sentencepiece::{self, Spm};
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

/// llama.cpp's token types (tokenizer.ggml.token_type).
const TOKEN_TYPE_CONTROL: i32 = 3;
const TOKEN_TYPE_USER_DEFINED: i32 = 4;

/// GPT-2's byte-to-character map (bytes_to_unicode): printable bytes map to themselves, the
/// others to U+0100 onwards, so that every byte sequence is a string of visible characters.
fn byte_to_char() -> [char; 256] {
    let mut map = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..=255u8 {
        let printable = (b'!'..=b'~').contains(&b) || (0xa1..=0xac).contains(&b) || (0xae..=0xff).contains(&b);
        map[b as usize] = if printable {
            char::from(b)
        } else {
            n += 1;
            char::from_u32(255 + n).expect("U+0100.. are chars")
        };
    }
    map
}

/// llama.cpp's regexes for Llama 3's pre-tokenizer (LLAMA_VOCAB_PRE_TYPE_LLAMA3: its
/// tokenizer.json's, the case-insensitive group spelled out) and Qwen2's (one digit at a time).
const LLAMA3_SPLIT: &str = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_SPLIT: &str = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/// How a `tokenizer.ggml.pre` splits text before BPE, as llama.cpp's llama-vocab.cpp does for
/// it: regexes applied in turn (each match its own piece, the text between kept), then GPT-2's
/// byte-level map.
struct PreSplit {
    regexes: &'static [&'static str],
    /// GPT-2's own split after `regexes` (ByteLevel's regex).
    gpt2_regex: bool,
    /// A piece that is a whole token is that token, merges or not (llama.cpp's ignore_merges,
    /// Hugging Face's `ignore_merges`: Llama 3).
    ignore_merges: bool,
    /// BOS first when the file does not say (tokenizer.ggml.add_bos_token wins).
    add_bos: bool,
}

impl PreSplit {
    fn of(pre: &str) -> Result<PreSplit> {
        let plain = |regexes, gpt2_regex| PreSplit { regexes, gpt2_regex, ignore_merges: false, add_bos: false };
        Ok(match pre {
            // llama.cpp: STARCODER, REFACT, COMMAND_R, SMOLLM, CODESHELL, EXAONE, MINERVA share
            // these: each digit alone, then GPT-2's split.
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva-7b" => {
                plain(&["\\p{N}"], true)
            }
            // GPT-2's split alone (ByteLevel's own regex).
            "gpt-2" | "phi-2" | "mpt" | "olmo" => plain(&[], true),
            // LLAMA3 (llama-bpe is what the converter writes for Llama 3.x).
            "llama-bpe" | "llama3" | "llama-v3" | "falcon3" => {
                PreSplit { regexes: &[LLAMA3_SPLIT], gpt2_regex: false, ignore_merges: true, add_bos: true }
            }
            "qwen2" | "deepseek-r1-qwen" | "stablelm2" => plain(&[QWEN2_SPLIT], false),
            // No or an unknown-to-the-converter pre-tokenizer: llama.cpp's default chain.
            "default" => plain(
                &[
                    "[\\p{P}\\$\\+<=>\\^~\\|]+",
                    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
                    "\\p{N}+",
                    "[0-9][0-9][0-9]",
                ],
                false,
            ),
            other => {
                return Err(ModelError::Unsupported(format!(
                    "tokenizer pre-tokenizer {other:?} (tokenizer.ggml.pre; supported: llama-bpe, qwen2, smollm, \
                     gpt-2, default and their aliases in llama.cpp)"
                )))
            }
        })
    }
}

/// What splits text into ids: a Hugging Face BPE tokenizer ("gpt2") or llama.cpp's
/// SentencePiece merge ("llama").
enum Splitter {
    Bpe(Box<Tokenizer>),
    Spm(Box<Spm>),
}

pub struct GgufTokenizer {
    tokenizer: Splitter,
    /// Each token's bytes (byte-level decoded); control tokens decode to nothing, as
    /// llama.cpp's token_to_piece without `special`.
    pieces: Vec<Vec<u8>>,
    /// Control tokens' text (for display when asked).
    control: Vec<bool>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub add_bos: bool,
    /// tokenizer.ggml.add_eos_token (the chat template's trailing EOS is cut when set).
    pub add_eos: bool,
    chat_template: Option<String>,
}

/// tokenizer.ggml.token_type, or every token normal where the file has none.
fn token_types(f: &GgufFile, n: usize) -> Result<Vec<i32>> {
    match f.get("tokenizer.ggml.token_type") {
        Some(Value::Array(Array::I32(t))) if t.len() == n => Ok(t.clone()),
        Some(_) => Err(ModelError::Corrupt {
            path: f.path().to_path_buf(),
            message: "tokenizer.ggml.token_type: not an INT32 array as long as the vocabulary".into(),
        }),
        None => Ok(vec![1; n]),
    }
}

/// A special token id from `key`, `default` where the file has none (llama.cpp's defaults for
/// the vocabulary type), None where that is past the vocabulary.
fn special_id(f: &GgufFile, key: &str, default: Option<u32>, n: usize) -> Result<Option<u32>> {
    match f.get(key) {
        None => Ok(default.filter(|&i| (i as usize) < n)),
        Some(v) => match v.as_u64() {
            Some(i) if (i as usize) < n => Ok(Some(i as u32)),
            _ => Err(ModelError::Corrupt {
                path: f.path().to_path_buf(),
                message: format!("{key}: {v:?} is not a token id"),
            }),
        },
    }
}

impl GgufTokenizer {
    pub fn from_gguf(f: &GgufFile) -> Result<GgufTokenizer> {
        let bad = |m: String| ModelError::Corrupt { path: f.path().to_path_buf(), message: m };
        let model = f.str("tokenizer.ggml.model")?;
        match model {
            "gpt2" => {}
            "llama" => return Self::sentencepiece(f),
            _ => {
                return Err(ModelError::Unsupported(format!(
                    "tokenizer model {model:?} (supported: \"gpt2\" byte-level BPE, \"llama\" SentencePiece)"
                )))
            }
        }
        let pre = f.get("tokenizer.ggml.pre").and_then(Value::as_str).unwrap_or("default");
        let split = PreSplit::of(pre)?;
        let tokens = f.strings("tokenizer.ggml.tokens")?;
        let merges = f.strings("tokenizer.ggml.merges")?;
        let types = token_types(f, tokens.len())?;
        if tokens.is_empty() || tokens.len() > u32::MAX as usize {
            return Err(bad(format!("vocabulary of {} tokens", tokens.len())));
        }
        let vocab: tokenizers::models::bpe::Vocab =
            tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        if vocab.len() != tokens.len() {
            return Err(bad("tokenizer.ggml.tokens has duplicates".into()));
        }
        let mut pairs = Vec::with_capacity(merges.len());
        for m in merges {
            let (a, b) = m.split_once(' ').ok_or_else(|| bad(format!("merge {m:?} is not two tokens")))?;
            pairs.push((a.to_string(), b.to_string()));
        }
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, pairs)
            .ignore_merges(split.ignore_merges)
            .build()
            .map_err(|e| bad(format!("BPE vocabulary: {e}")))?;
        let mut tokenizer = Tokenizer::new(bpe);
        let mut pre_tokenizers: Vec<PreTokenizerWrapper> = Vec::new();
        for re in split.regexes {
            let split = Split::new(SplitPattern::Regex(re.to_string()), SplitDelimiterBehavior::Isolated, false)
                .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
            pre_tokenizers.push(split.into());
        }
        pre_tokenizers.push(ByteLevel::new(false, false, split.gpt2_regex).into());
        tokenizer.with_pre_tokenizer(Some(Sequence::new(pre_tokenizers)));
        let specials: Vec<AddedToken> = tokens
            .iter()
            .zip(&types)
            .filter(|(_, &t)| t == TOKEN_TYPE_CONTROL || t == TOKEN_TYPE_USER_DEFINED)
            .map(|(s, _)| AddedToken::from(s.clone(), true))
            .collect();
        tokenizer.add_special_tokens(specials).map_err(|e| ModelError::Tokenizer(e.to_string()))?;

        let mut unchar = std::collections::HashMap::new();
        for (b, c) in byte_to_char().iter().enumerate() {
            unchar.insert(*c, b as u8);
        }
        let mut pieces = Vec::with_capacity(tokens.len());
        for (t, &ty) in tokens.iter().zip(&types) {
            pieces.push(match ty {
                TOKEN_TYPE_CONTROL => Vec::new(),
                // llama.cpp: user-defined tokens are their text as is.
                TOKEN_TYPE_USER_DEFINED => t.as_bytes().to_vec(),
                // A character outside the byte map cannot come from byte-level BPE; kept as its
                // UTF-8 rather than failing the whole vocabulary.
                _ => t
                    .chars()
                    .flat_map(|c| match unchar.get(&c) {
                        Some(&b) => vec![b],
                        None => c.to_string().into_bytes(),
                    })
                    .collect(),
            });
        }
        let id = |key: &str| special_id(f, key, None, tokens.len());
        Ok(GgufTokenizer {
            tokenizer: Splitter::Bpe(Box::new(tokenizer)),
            pieces,
            control: types.iter().map(|&t| t == TOKEN_TYPE_CONTROL).collect(),
            bos: id("tokenizer.ggml.bos_token_id")?,
            eos: id("tokenizer.ggml.eos_token_id")?,
            add_bos: f.get("tokenizer.ggml.add_bos_token").and_then(Value::as_bool).unwrap_or(split.add_bos),
            add_eos: f.get("tokenizer.ggml.add_eos_token").and_then(Value::as_bool).unwrap_or(false),
            chat_template: f.get("tokenizer.chat_template").and_then(Value::as_str).map(str::to_string),
        })
    }

    /// A "llama" (SentencePiece) vocabulary: llama.cpp's defaults for it (BOS 1, EOS 2, BOS
    /// added, a space in front) where the file does not say.
    fn sentencepiece(f: &GgufFile) -> Result<GgufTokenizer> {
        let bad = |m: String| ModelError::Corrupt { path: f.path().to_path_buf(), message: m };
        let tokens = f.strings("tokenizer.ggml.tokens")?;
        if tokens.is_empty() || tokens.len() > u32::MAX as usize {
            return Err(bad(format!("vocabulary of {} tokens", tokens.len())));
        }
        let types = token_types(f, tokens.len())?;
        // llama.cpp: at least one score per token, f32 or i32; none: all 0.
        let scores: Vec<f32> = match f.get("tokenizer.ggml.scores") {
            None => vec![0.0; tokens.len()],
            Some(Value::Array(Array::F32(s))) if s.len() >= tokens.len() => s[..tokens.len()].to_vec(),
            Some(Value::Array(Array::I32(s))) if s.len() >= tokens.len() => {
                s[..tokens.len()].iter().map(|&v| v as f32).collect()
            }
            Some(_) => return Err(bad("tokenizer.ggml.scores: not an F32 array as long as the vocabulary".into())),
        };
        let flag = |key: &str, default: bool| f.get(key).and_then(Value::as_bool).unwrap_or(default);
        let name = f.get("general.name").and_then(Value::as_str).unwrap_or("").to_lowercase();
        let spm = Spm::new(
            tokens,
            scores,
            &types,
            flag("tokenizer.ggml.add_space_prefix", true),
            name.contains("phi-3") || name.contains("phi3"),
        )?;
        let mut pieces = Vec::with_capacity(tokens.len());
        for (t, &ty) in tokens.iter().zip(&types) {
            pieces.push(sentencepiece::piece(t, ty).ok_or_else(|| bad(format!("byte token {t:?} is not <0xNN>")))?);
        }
        let n = tokens.len();
        Ok(GgufTokenizer {
            tokenizer: Splitter::Spm(Box::new(spm)),
            pieces,
            control: types.iter().map(|&t| t == TOKEN_TYPE_CONTROL).collect(),
            bos: special_id(f, "tokenizer.ggml.bos_token_id", Some(1), n)?,
            eos: special_id(f, "tokenizer.ggml.eos_token_id", Some(2), n)?,
            add_bos: flag("tokenizer.ggml.add_bos_token", true),
            add_eos: flag("tokenizer.ggml.add_eos_token", false),
            chat_template: f.get("tokenizer.chat_template").and_then(Value::as_str).map(str::to_string),
        })
    }

    pub fn vocab_size(&self) -> usize {
        self.pieces.len()
    }

    /// Token ids of `text`, special tokens written in the text (`<|im_start|>`) matched as
    /// themselves, BOS first if the vocabulary asks for it (llama.cpp's tokenize with
    /// parse_special).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let mut ids = Vec::with_capacity(text.len() / 3 + 2);
        if self.add_bos {
            ids.extend(self.bos);
        }
        match &self.tokenizer {
            Splitter::Bpe(t) => {
                let enc = t.encode(text, false).map_err(|e| ModelError::Tokenizer(e.to_string()))?;
                ids.extend_from_slice(enc.get_ids());
            }
            Splitter::Spm(s) => {
                ids.extend(s.encode(text)?);
                // llama.cpp's SentencePiece path appends EOS when the vocabulary says so.
                if self.add_eos {
                    ids.extend(self.eos);
                }
            }
        }
        Ok(ids)
    }

    fn token_id(&self, text: &str) -> Option<u32> {
        match &self.tokenizer {
            Splitter::Bpe(t) => t.token_to_id(text),
            Splitter::Spm(s) => s.token_id(text),
        }
    }

    /// The bytes token `id` stands for (nothing for control tokens and ids out of range).
    pub fn piece(&self, id: u32) -> &[u8] {
        self.pieces.get(id as usize).map_or(&[], |p| p.as_slice())
    }

    pub fn is_control(&self, id: u32) -> bool {
        self.control.get(id as usize).copied().unwrap_or(false)
    }

    /// The text of `ids` (invalid UTF-8 replaced by U+FFFD). A SentencePiece vocabulary that
    /// puts a space in front of the text loses it again: one leading space of the text, control
    /// tokens such as BOS (which have no text) skipped first, as Hugging Face's decode does;
    /// `encode`'s inverse for text without special tokens. (llama.cpp's detokenize strips it
    /// only where no BOS comes first.)
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes: Vec<u8> = ids.iter().flat_map(|&i| self.piece(i).iter().copied()).collect();
        if let Splitter::Spm(s) = &self.tokenizer {
            if s.add_space_prefix && bytes.first() == Some(&b' ') {
                bytes.remove(0);
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The GGUF's chat template, with its BOS and EOS text. A file without one gets ChatML
    /// (llama.cpp's default) only where its vocabulary has ChatML's `<|im_start|>` and
    /// `<|im_end|>` tokens: a model without them would get them spelled out as plain text, so
    /// there it is refused, as transformers refuses a tokenizer without a template.
    pub fn chat_template(&self) -> Result<ChatTemplate> {
        if self.chat_template.is_none() && ["<|im_start|>", "<|im_end|>"].iter().any(|t| self.token_id(t).is_none()) {
            return Err(ModelError::Unsupported(
                "the model has no chat template (tokenizer.chat_template) and no ChatML tokens to fall back on".into(),
            ));
        }
        let text = |id: Option<u32>| id.map(|i| self.token_text(i)).unwrap_or_default();
        Ok(ChatTemplate::new(
            self.chat_template.as_deref(),
            &text(self.bos),
            &text(self.eos),
            self.add_bos && self.bos.is_some(),
            self.add_eos && self.eos.is_some(),
        ))
    }

    /// Token `id`'s text as the vocabulary spells it for a template (control tokens included).
    pub fn token_text(&self, id: u32) -> String {
        let text = match &self.tokenizer {
            Splitter::Bpe(t) => t.id_to_token(id),
            Splitter::Spm(s) => s.token(id).map(str::to_string),
        };
        text.filter(|_| self.is_control(id)).unwrap_or_else(|| String::from_utf8_lossy(self.piece(id)).into_owned())
    }
}

/// Turns a stream of byte pieces into text pieces: a UTF-8 character split across tokens is held
/// back until it is whole; bytes that can never become valid UTF-8 come out as U+FFFD.
#[derive(Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[..good]).expect("valid up to here"));
                    match e.error_len() {
                        // Incomplete at the end: wait for more bytes.
                        None => {
                            self.pending.drain(..good);
                            return out;
                        }
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..good + bad);
                        }
                    }
                }
            }
        }
    }

    /// What is left at the end of the stream (an incomplete character becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_is_a_bijection_with_gpt2s_known_points() {
        let m = byte_to_char();
        let set: std::collections::HashSet<char> = m.iter().copied().collect();
        assert_eq!(set.len(), 256);
        assert_eq!(m[b' ' as usize], 'Ġ');
        assert_eq!(m[b'\n' as usize], 'Ċ');
        assert_eq!(m[b'a' as usize], 'a');
        assert_eq!(m[0xad], 'Ń');
    }

    #[test]
    fn utf8_stream_holds_split_characters() {
        let text = "a€b😀";
        let bytes = text.as_bytes();
        // Every way of cutting the bytes into two pieces gives the same text.
        for cut in 0..=bytes.len() {
            let mut s = Utf8Stream::default();
            let mut out = s.push(&bytes[..cut]);
            out += &s.push(&bytes[cut..]);
            out += &s.finish();
            assert_eq!(out, text, "cut at {cut}");
        }
        let mut s = Utf8Stream::default();
        assert_eq!(s.push(&[0xe2, 0x82]), "");
        assert_eq!(s.push(&[0xac]), "€");
        assert_eq!(s.push(&[0xff, b'x']), "\u{fffd}x");
        assert_eq!(s.push(&[0xf0, 0x9f]), "");
        assert_eq!(s.finish(), "\u{fffd}");
    }
}
