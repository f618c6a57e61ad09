//! The SentencePiece vocabulary of a GGUF file (`tokenizer.ggml.model == "llama"`: Llama 2,
//! Mistral 7B, Phi-3, Gemma) tokenized as llama.cpp tokenizes it (src/llama-vocab.cpp:
//! `llm_tokenizer_spm_session`, `tokenizer_st_partition` and the SPM branch of `tokenize`), not
//! as the `sentencepiece` library does: llama.cpp stores no normalizer and no unigram model,
//! only pieces and scores, and merges bigrams by score.
//!
//! - Special tokens (control, user-defined and unknown ones) are cut out of the text first,
//!   longest first, each left to right, as in llama.cpp; Phi-3 files (by `general.name`, as
//!   llama.cpp decides it) strip whitespace after most of them.
//! - Each remaining fragment gets a space in front where the vocabulary says
//!   (`add_space_prefix`, default on) and the fragment is the first or follows a special token;
//!   spaces become `▁`.
//! - The fragment's UTF-8 characters are merged pairwise, the pair whose merged text is the
//!   highest-scored token first (ties: the leftmost), until no pair is a token; a character no
//!   merge reached and that is no token comes out as its bytes' `<0xNN>` tokens.
//!
//! Bounded for untrusted files and text: the merge queue holds at most three bigrams per
//! character (one seeded, two per merge), each merge removes a symbol, and the special-token
//! scan only runs for tokens an Aho-Corasick pass found in the text (llama.cpp's cut is one
//! scan of the text per such token: text length × tokens present at worst, never more).

use crate::error::{ModelError, Result};
use aho_corasick::AhoCorasick;
use std::collections::{BinaryHeap, HashMap};

/// llama.cpp's token types (tokenizer.ggml.token_type).
pub(crate) const TYPE_NORMAL: i32 = 1;
pub(crate) const TYPE_UNKNOWN: i32 = 2;
pub(crate) const TYPE_CONTROL: i32 = 3;
pub(crate) const TYPE_USER_DEFINED: i32 = 4;
pub(crate) const TYPE_BYTE: i32 = 6;

/// `▁` (U+2581), SentencePiece's space.
const SPACE: &str = "\u{2581}";

pub(crate) struct Spm {
    tokens: Vec<String>,
    scores: Vec<f32>,
    /// Token text to id (the last of duplicates, as llama.cpp's map).
    ids: HashMap<String, u32>,
    /// Tokens cut out of the text before merging: control, user-defined and unknown ones, the
    /// longest first (ids ascending among equals), with whether whitespace after them is
    /// stripped (llama.cpp's RSTRIP attribute).
    specials: Vec<(u32, bool)>,
    /// Finds which of `specials` occur in a text at all.
    special_finder: Option<AhoCorasick>,
    /// The token of each byte (`<0xNN>`, else the byte itself as a one-character token).
    byte_tokens: [Option<u32>; 256],
    pub add_space_prefix: bool,
}

/// A piece of the text after the special tokens are cut out.
enum Fragment<'a> {
    Text(&'a str),
    Token(u32),
}

/// A symbol of the merge: bytes `start .. start + len` of the escaped text (len 0: merged
/// into its left neighbour), its neighbours in the chain.
#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A candidate merge of symbols `left` and `left`'s next, whose text is a token of `score`.
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    /// Bytes of the merged text when queued (a symbol that grew since makes it stale).
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bigram {
    /// The max-heap's top: the highest score, then the leftmost (llama.cpp's comparator).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.score.total_cmp(&other.score).then(other.left.cmp(&self.left))
    }
}

/// C's isspace in the "C" locale (llama.cpp strips with it).
fn c_isspace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

impl Spm {
    /// `rstrip_specials`: the file is a Phi-3 one by llama.cpp's test on `general.name`.
    pub fn new(
        tokens: &[String],
        scores: Vec<f32>,
        types: &[i32],
        add_space_prefix: bool,
        rstrip_specials: bool,
    ) -> Result<Spm> {
        let mut ids = HashMap::with_capacity(tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            ids.insert(t.clone(), i as u32);
        }
        let mut specials: Vec<u32> = (0..tokens.len() as u32)
            .filter(|&i| {
                matches!(types[i as usize], TYPE_CONTROL | TYPE_USER_DEFINED | TYPE_UNKNOWN)
                    && !tokens[i as usize].is_empty()
            })
            .collect();
        specials.sort_by_key(|&i| std::cmp::Reverse(tokens[i as usize].len()));
        // llama.cpp (llama_vocab::impl::load, "phi-3"/"phi3" in general.name): whitespace after
        // every special token is stripped, and after </s>, but not after <unk>, <s> and
        // <|endoftext|>.
        let rstrip =
            |i: u32| rstrip_specials && !matches!(tokens[i as usize].as_str(), "<unk>" | "<s>" | "<|endoftext|>");
        let specials: Vec<(u32, bool)> = specials.into_iter().map(|i| (i, rstrip(i))).collect();
        let special_finder = if specials.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::new(specials.iter().map(|&(i, _)| tokens[i as usize].as_str()))
                    .map_err(|e| ModelError::Tokenizer(format!("special tokens: {e}")))?,
            )
        };
        let mut byte_tokens = [None; 256];
        for (b, slot) in byte_tokens.iter_mut().enumerate() {
            *slot = ids.get(&format!("<0x{b:02X}>")).copied().or_else(|| {
                // llama.cpp falls back to the byte as a one-byte token (only ASCII is text here).
                (b < 0x80).then(|| ids.get(&char::from(b as u8).to_string()).copied()).flatten()
            });
        }
        Ok(Spm { tokens: tokens.to_vec(), scores, ids, specials, special_finder, byte_tokens, add_space_prefix })
    }

    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    pub fn token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// The ids of `text`, special tokens in it parsed (llama.cpp's tokenize with
    /// parse_special), without BOS/EOS.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(text.len() / 2 + 1);
        let mut prev_special = true;
        for fragment in self.partition(text) {
            match fragment {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(t) => {
                    let mut s = String::with_capacity(t.len() * 3 + 3);
                    if self.add_space_prefix && prev_special {
                        s.push_str(SPACE);
                    }
                    s.push_str(&t.replace(' ', SPACE));
                    self.merge(&s, &mut out)?;
                    prev_special = false;
                }
            }
        }
        Ok(out)
    }

    /// llama.cpp's tokenizer_st_partition: for each special token (longest first), every
    /// occurrence in the text fragments not yet cut becomes that token, left to right.
    fn partition<'a>(&self, text: &'a str) -> Vec<Fragment<'a>> {
        let mut fragments = Vec::new();
        if text.is_empty() {
            return fragments;
        }
        fragments.push(Fragment::Text(text));
        let Some(finder) = &self.special_finder else { return fragments };
        let (mut present, mut found) = (vec![false; self.specials.len()], 0);
        for m in finder.find_overlapping_iter(text) {
            let p = &mut present[m.pattern().as_usize()];
            found += usize::from(!*p);
            *p = true;
            if found == present.len() {
                break;
            }
        }
        for (&(id, rstrip), _) in self.specials.iter().zip(&present).filter(|(_, &p)| p) {
            let special = self.tokens[id as usize].as_str();
            let mut next = Vec::with_capacity(fragments.len() + 2);
            for f in fragments {
                let Fragment::Text(mut rest) = f else {
                    next.push(f);
                    continue;
                };
                while let Some(at) = rest.find(special) {
                    if at > 0 {
                        next.push(Fragment::Text(&rest[..at]));
                    }
                    next.push(Fragment::Token(id));
                    rest = &rest[at + special.len()..];
                    if rstrip {
                        // ASCII whitespace only: the cut stays on a character boundary.
                        rest = &rest[rest.bytes().take_while(|&b| c_isspace(b)).count()..];
                    }
                }
                if !rest.is_empty() {
                    next.push(Fragment::Text(rest));
                }
            }
            fragments = next;
        }
        fragments
    }

    /// llm_tokenizer_spm_session::tokenize of one escaped fragment, appended to `out`.
    fn merge(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
        for (i, (start, c)) in text.char_indices().enumerate() {
            let end = start + c.len_utf8();
            symbols.push(Symbol {
                start,
                len: c.len_utf8(),
                prev: i.checked_sub(1),
                next: (end < text.len()).then_some(i + 1),
            });
        }
        let mut queue = BinaryHeap::with_capacity(symbols.len());
        let bigram = |symbols: &[Symbol], left: Option<usize>, right: Option<usize>| -> Option<Bigram> {
            let (l, r) = (symbols[left?], symbols[right?]);
            let t = &text[l.start..l.start + l.len + r.len];
            let id = self.token_id(t)?;
            Some(Bigram { score: self.scores[id as usize], left: left?, right: right?, size: t.len() })
        };
        for i in 1..symbols.len() {
            queue.extend(bigram(&symbols, Some(i - 1), Some(i)));
        }
        while let Some(b) = queue.pop() {
            let (l, r) = (symbols[b.left], symbols[b.right]);
            // One side already merged elsewhere: this candidate is stale.
            if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
                continue;
            }
            symbols[b.left].len += r.len;
            symbols[b.right].len = 0;
            symbols[b.left].next = r.next;
            if let Some(n) = r.next {
                symbols[n].prev = Some(b.left);
            }
            queue.extend(bigram(&symbols, symbols[b.left].prev, Some(b.left)));
            queue.extend(bigram(&symbols, Some(b.left), symbols[b.left].next));
        }
        let mut i = if symbols.is_empty() { None } else { Some(0) };
        while let Some(s) = i {
            let sym = symbols[s];
            let t = &text[sym.start..sym.start + sym.len];
            // A merged symbol is a token (only tokens merge); a lone character may not be.
            match self.token_id(t) {
                Some(id) => out.push(id),
                None => {
                    for &b in t.as_bytes() {
                        out.push(self.byte_tokens[b as usize].ok_or_else(|| {
                            ModelError::Tokenizer(format!(
                                "the vocabulary has no byte token <0x{b:02X}> for {t:?} (SentencePiece byte fallback)"
                            ))
                        })?);
                    }
                }
            }
            i = sym.next;
        }
        Ok(())
    }
}

/// A token's bytes as llama.cpp's token_to_piece gives them for a SentencePiece vocabulary
/// without `special`: normal tokens with `▁` as spaces, user-defined ones as written, byte
/// tokens their byte, everything else (control, unknown, unused) nothing.
pub(crate) fn piece(text: &str, ty: i32) -> Option<Vec<u8>> {
    Some(match ty {
        TYPE_NORMAL => text.replace(SPACE, " ").into_bytes(),
        TYPE_USER_DEFINED => text.as_bytes().to_vec(),
        TYPE_BYTE => {
            let hex = text.strip_prefix("<0x").and_then(|t| t.strip_suffix('>')).filter(|h| h.len() == 2)?;
            vec![u8::from_str_radix(hex, 16).ok()?]
        }
        _ => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(pieces: &[(&str, f32, i32)], space_prefix: bool) -> Spm {
        let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
        let mut scores = vec![0.0; 3];
        let mut types = vec![TYPE_UNKNOWN, TYPE_CONTROL, TYPE_CONTROL];
        for b in 0..=255u8 {
            tokens.push(format!("<0x{b:02X}>"));
            scores.push(0.0);
            types.push(TYPE_BYTE);
        }
        for &(p, s, t) in pieces {
            tokens.push(p.into());
            scores.push(s);
            types.push(t);
        }
        Spm::new(&tokens, scores, &types, space_prefix, false).unwrap()
    }

    fn texts(v: &Spm, ids: &[u32]) -> Vec<String> {
        ids.iter().map(|&i| v.token(i).unwrap().to_string()).collect()
    }

    #[test]
    fn higher_scores_merge_first_and_ties_go_left() {
        let v = vocab(
            &[("a", -9.0, 1), ("b", -9.0, 1), ("ab", -1.0, 1), ("ba", -1.0, 1), ("aba", -3.0, 1), ("▁", -9.0, 1)],
            false,
        );
        // "aba": ab and ba tie; the left one merges, then ab + a = aba.
        assert_eq!(texts(&v, &v.encode("aba").unwrap()), ["aba"]);
        // "bab": ba (left) first, then ba + b is no token.
        assert_eq!(texts(&v, &v.encode("bab").unwrap()), ["ba", "b"]);
        // A character that is no token: its UTF-8 bytes.
        assert_eq!(texts(&v, &v.encode("aé").unwrap()), ["a", "<0xC3>", "<0xA9>"]);
    }

    #[test]
    fn space_prefix_follows_specials_and_rstrip_strips() {
        let mut v = vocab(&[("▁", -1.0, 1), ("x", -1.0, 1), ("▁x", 0.0, 1)], true);
        assert_eq!(texts(&v, &v.encode("x</s>x").unwrap()), ["▁x", "</s>", "▁x"]);
        assert_eq!(texts(&v, &v.encode("").unwrap()), Vec::<String>::new());
        v.specials.iter_mut().for_each(|s| s.1 = true);
        assert_eq!(texts(&v, &v.encode("</s> \n x").unwrap()), ["</s>", "▁x"]);
    }
}
