//! A sentence-transformers folder loaded with model.safetensors streamed (SafetensorsStream: the
//! header, then each tensor uploaded as its bytes arrive, as a page's download gives them)
//! against the same folder loaded from the whole file: the same embeddings, bit for bit, for any
//! way the file is cut into chunks; and a stream that is cut short, too long, or lies in its
//! header is a Corrupt error naming the file, never a panic.

use kiln_models::{EncodeOptions, LoadOptions, ModelError, ModelFiles, SafetensorsStream, SentenceEmbedder};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/encoders/bert")
}

/// The folder's files but model.safetensors, and that file's bytes.
fn files() -> (BTreeMap<String, Vec<u8>>, Vec<u8>) {
    let dir = folder();
    let mut m = BTreeMap::new();
    for name in [
        "config.json",
        "modules.json",
        "sentence_bert_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "1_Pooling/config.json",
    ] {
        m.insert(name.to_string(), std::fs::read(dir.join(name)).unwrap());
    }
    (m, std::fs::read(dir.join("model.safetensors")).unwrap())
}

fn stream(bytes: &[u8], chunk: usize) -> kiln_models::Result<kiln_models::UploadedWeights> {
    let mut s = SafetensorsStream::new(Path::new("model.safetensors"));
    for c in bytes.chunks(chunk.max(1)) {
        s.push(c)?;
    }
    s.finish()
}

fn embed(e: &SentenceEmbedder) -> Vec<u32> {
    let texts = ["A man is playing a guitar.", "", "the quick brown fox"];
    let v = e.encode_with(&texts, EncodeOptions::default()).unwrap();
    v.data.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn a_streamed_checkpoint_gives_the_bits_of_the_whole_file() {
    let (rest, st) = files();
    let mut whole = rest.clone();
    whole.insert("model.safetensors".into(), st.clone());
    let want =
        embed(&SentenceEmbedder::from_files(ModelFiles::Memory(whole), LoadOptions::default(), |_, _| {}).unwrap());
    // 1 byte at a time (the header's length split too), odd sizes, the whole file at once.
    for chunk in [1, 7, 4093, 65536, st.len()] {
        let w = stream(&st, chunk).unwrap();
        let e = SentenceEmbedder::from_files_uploaded(
            ModelFiles::Memory(rest.clone()),
            w,
            LoadOptions::default(),
            |_, _| {},
        )
        .unwrap();
        assert_eq!(embed(&e), want, "chunks of {chunk} bytes");
    }
}

fn corrupt(r: kiln_models::Result<kiln_models::UploadedWeights>, words: &str) {
    match r {
        Err(ModelError::Corrupt { path, message }) => {
            assert_eq!(path, Path::new("model.safetensors"));
            assert!(message.contains(words), "{message:?} lacks {words:?}");
        }
        Err(e) => panic!("{e}: expected Corrupt ({words})"),
        Ok(_) => panic!("accepted: expected Corrupt ({words})"),
    }
}

#[test]
fn a_short_long_or_lying_stream_is_refused() {
    let (_, st) = files();
    let n = u64::from_le_bytes(st[..8].try_into().unwrap()) as usize;
    // Cut short: inside the length, inside the header, at its end, inside a tensor.
    for cut in [0, 5, 8 + n / 2, 8 + n, 8 + n + 100, st.len() - 1] {
        let r = stream(&st[..cut], 1000);
        corrupt(r, if cut < 8 + n { "inside its header" } else { "inside tensor" });
    }
    // One byte too many.
    let mut long = st.clone();
    long.push(0);
    corrupt(stream(&long, 4096), "past the last tensor");
    // A header length past the bound, and one past the file (never allocated: it ends first).
    let mut huge = st.clone();
    huge[..8].copy_from_slice(&(200_000_000u64).to_le_bytes());
    corrupt(stream(&huge, 4096), "a header of 200000000 bytes");
    let mut past = st.clone();
    past[..8].copy_from_slice(&(99_000_000u64).to_le_bytes());
    corrupt(stream(&past, 4096), "inside its header");
    // Not JSON; offsets with a gap (the first tensor's end moved by one); a zero-length header.
    let mut garbage = st.clone();
    garbage[8] = b'!';
    corrupt(stream(&garbage, 4096), "header");
    let header = String::from_utf8(st[8..8 + n].to_vec()).unwrap();
    let first_end = header.find("\"data_offsets\":[0,").map(|i| i + "\"data_offsets\":[0,".len()).unwrap();
    let digits: String = header[first_end..].chars().take_while(char::is_ascii_digit).collect();
    let moved = format!(
        "{}{}{}",
        &header[..first_end],
        digits.parse::<u64>().unwrap() + 1,
        &header[first_end + digits.len()..]
    );
    let mut gap = (moved.len() as u64).to_le_bytes().to_vec();
    gap.extend_from_slice(moved.as_bytes());
    gap.extend_from_slice(&st[8 + n..]);
    corrupt(stream(&gap, 4096), "offset");
    corrupt(stream(&0u64.to_le_bytes(), 4096), "header");
}
