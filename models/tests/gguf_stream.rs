//! A GGUF file loaded as a page's download gives it (GgufStream: the header, then each weight
//! stack uploaded to the GPU the moment its last tensor arrives) against the same file loaded
//! whole: the same logits, bit for bit, for any way the file is cut into chunks (1 byte at a
//! time included) and whatever order its tensors' bytes come in; and a stream cut short
//! anywhere, or hostile, is the error the whole file gives, never a panic. On
//! fixtures::tiny_llama_gguf (Q8_0, "llama": Q and K rows un-permuted on the way).

mod fixtures;

use kiln_models::gguf::{GgufFile, Header};
use kiln_models::{Backend, CausalLM, FileBytes, GgufStream, ModelError};
use std::path::Path;

const PATH: &str = "model.gguf";

fn whole(bytes: &[u8]) -> kiln_models::Result<CausalLM> {
    let f = GgufFile::from_bytes(Path::new(PATH), FileBytes::Owned(bytes.to_vec()))?;
    CausalLM::from_gguf(f, Backend::Gpu, |_, _| {})
}

fn stream(bytes: &[u8], chunk: usize) -> kiln_models::Result<kiln_models::StreamedGguf> {
    let mut s = GgufStream::new(Path::new(PATH));
    for c in bytes.chunks(chunk.max(1)) {
        s.push(c)?;
    }
    s.finish()
}

fn streamed(bytes: &[u8], chunk: usize) -> kiln_models::Result<CausalLM> {
    CausalLM::from_streamed(stream(bytes, chunk)?, |_, _| {})
}

/// Logits of a short prompt (every position's pass through all the stacks) and 4 greedy
/// tokens, as bits.
fn run(m: &CausalLM) -> (Vec<u32>, Vec<u32>) {
    let ids = [94, 7, 33, 50, 12];
    let logits = m.logits(&ids).unwrap().iter().map(|x| x.to_bits()).collect();
    let mut opts = kiln_models::GenerateOptions { max_tokens: 4, stop_at_eos: false, ..Default::default() };
    opts.sampling.temperature = 0.0;
    let mut g = m.generate_from_ids(ids.to_vec(), opts);
    g.text().unwrap();
    (logits, g.tokens().to_vec())
}

/// `bytes` with its tensors' data laid out in the reverse of the table's order (the table's
/// offsets patched in place): the stream must route bytes that come in any order.
fn reversed(bytes: &[u8]) -> Vec<u8> {
    let h = Header::parse(bytes).unwrap();
    let mut out = bytes[..h.data_offset as usize].to_vec();
    let mut data = Vec::new();
    for t in h.tensors.iter().rev() {
        while data.len() % h.alignment as usize != 0 {
            data.push(0);
        }
        // The table entry: name, n_dims, dims, type, offset; found by its bytes, offset patched.
        let mut entry = (t.name.len() as u64).to_le_bytes().to_vec();
        entry.extend_from_slice(t.name.as_bytes());
        entry.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        t.dims.iter().for_each(|d| entry.extend_from_slice(&d.to_le_bytes()));
        entry.extend_from_slice(&t.ty.id().to_le_bytes());
        entry.extend_from_slice(&t.offset.to_le_bytes());
        let at = out.windows(entry.len()).position(|w| w == entry).unwrap() + entry.len() - 8;
        out[at..at + 8].copy_from_slice(&(data.len() as u64).to_le_bytes());
        let start = (h.data_offset + t.offset) as usize;
        data.extend_from_slice(&bytes[start..start + t.n_bytes as usize]);
    }
    out.extend(data);
    out
}

#[test]
fn a_streamed_gguf_gives_the_bits_of_the_whole_file() {
    let file = fixtures::tiny_llama_gguf(7, 95, 64);
    let want = run(&whole(&file).unwrap());
    // The stream's plan: the embedding and 4 stacks a layer, on the GPU; only the vectors (norms)
    // kept on the host.
    let s = stream(&file, 4096).unwrap();
    assert_eq!(s.stacks(), 1 + 4 * 2);
    for t in s.file().tensors() {
        assert_eq!(s.file().has_data(t), t.dims.len() == 1, "{}", t.name);
    }
    // 1 byte at a time (every length, count and tensor split), odd sizes, the whole file at once.
    for chunk in [1, 7, 333, file.len()] {
        assert_eq!(run(&streamed(&file, chunk).unwrap()), want, "chunks of {chunk} bytes");
    }
    // The tensors' bytes in reverse order (K before Q, layer 1 before layer 0, ...), and bytes
    // past the last tensor (ignored, as a whole file's are).
    let rev = reversed(&file);
    assert_eq!(run(&whole(&rev).unwrap()), want, "the reordered file itself");
    for chunk in [5, 4096] {
        assert_eq!(run(&streamed(&rev, chunk).unwrap()), want, "reordered, chunks of {chunk}");
    }
    let mut long = file.clone();
    long.extend_from_slice(&[0xAB; 100]);
    assert_eq!(run(&streamed(&long, 64).unwrap()), want, "trailing bytes");
}

#[track_caller]
fn same_error(got: kiln_models::Result<CausalLM>, want: kiln_models::Result<CausalLM>, what: &str) {
    let (Err(got), Err(want)) = (got, want) else { panic!("{what}: expected an error from both loads") };
    assert_eq!(got.to_string(), want.to_string(), "{what}");
}

#[test]
fn a_stream_cut_anywhere_is_the_whole_files_error() {
    let file = fixtures::tiny_llama_gguf(7, 95, 64);
    let h = Header::parse(&file).unwrap();
    // Every cut inside the header, and around each tensor's first and last byte.
    let mut cuts: Vec<usize> = (0..h.data_offset as usize + 2).collect();
    for t in &h.tensors {
        let (s, e) = ((h.data_offset + t.offset) as usize, (h.data_offset + t.offset + t.n_bytes) as usize);
        cuts.extend([s + 1, (s + e) / 2, e - 1]);
    }
    for cut in cuts {
        let prefix = &file[..cut];
        let want = GgufFile::from_bytes(Path::new(PATH), FileBytes::Owned(prefix.to_vec()));
        let want = want.err().unwrap_or_else(|| panic!("a prefix of {cut} bytes parsed whole"));
        for chunk in [1, 64] {
            let got = stream(prefix, chunk).err().unwrap_or_else(|| panic!("{cut} bytes in chunks of {chunk}"));
            assert_eq!(got.to_string(), want.to_string(), "{cut} bytes in chunks of {chunk}");
            assert!(matches!(got, ModelError::Corrupt { .. }), "{got:?}");
        }
    }
}

#[test]
fn a_hostile_stream_is_the_whole_files_error_or_refused_early() {
    // Issue 28's 1000 layers over one matrix's bytes: refused when the table is in.
    let aliased = fixtures::aliased_gguf(1000);
    same_error(streamed(&aliased, 4096), whole(&aliased), "aliased layers");
    // A missing matrix (renamed): the loader's MissingWeight, from the stream as soon as the
    // header is in; a missing norm (renamed): the loader's, after the stream.
    let file = fixtures::tiny_llama_gguf(7, 95, 64);
    for (from, to) in [("blk.1.ffn_down.weight", "blk.1.ffn_dowX.weight"), ("blk.1.ffn_norm", "blk.1.ffn_xorm")] {
        let at = file.windows(from.len()).position(|w| w == from.as_bytes()).unwrap();
        let mut bad = file.clone();
        bad[at..at + to.len()].copy_from_slice(to.as_bytes());
        same_error(streamed(&bad, 100), whole(&bad), from);
        assert!(matches!(streamed(&bad, 100), Err(ModelError::MissingWeight(_))));
    }
    // That matrix is refused once the header is in (parsed again as it grows by a quarter:
    // by 1.25x its size), not after the tensors' bytes came.
    let at = file.windows(21).position(|w| w == b"blk.1.ffn_down.weight").unwrap();
    let mut bad = file.clone();
    bad[at + 20] = b'X';
    let h = Header::parse(&file).unwrap();
    let mut s = GgufStream::new(Path::new(PATH));
    let mut chunks = bad.chunks(16);
    let e = chunks.by_ref().find_map(|c| s.push(c).err()).unwrap();
    assert!(matches!(e, ModelError::MissingWeight(_)), "{e}");
    assert!(s.received() <= h.data_offset * 5 / 4 + 16, "refused after {} bytes", s.received());
    assert!(s.received() < bad.len() as u64 / 4);
    // Spent after an error: the next chunk is refused too.
    assert!(matches!(s.push(chunks.next().unwrap()), Err(ModelError::Corrupt { .. })));
    // Counts no file backs (tensors, metadata, a string's length): refused when they pass the
    // header bound, with nothing of that size allocated; the same file whole says "count".
    let mut g = fixtures::Gguf::default();
    g.header(3, u64::MAX / 2);
    let e = stream(&g.buf, 7).err().unwrap().to_string();
    assert!(e.contains("model.gguf") && e.contains("header") && e.contains("bytes"), "{e}");
    let mut g = fixtures::Gguf::default();
    g.header(0, 1).u64(1 << 40).u64(0).u64(0);
    let e = stream(&g.buf, 1).err().unwrap().to_string();
    assert!(e.contains("header"), "{e}");
    // Not GGUF at all: refused from the first 4 bytes.
    let mut s = GgufStream::new(Path::new(PATH));
    let e = s.push(b"PK\x03\x04 a zip file").err().unwrap().to_string();
    assert!(e.contains("not a GGUF file"), "{e}");
}

/// The llama.cpp-converted files of arch_models.rs (models/tests/reference/arch: their tensors in
/// the converter's order), each architecture's own stacks: Llama 3's RoPE factors, an untied
/// output head, Phi-3's fused QKV and gate/up, Qwen2's biases, Gemma 1/2/3 (post-norms, QK
/// norms), and Q4_K_M's stacks of mixed block formats. Streamed, the same logits as loaded whole, bit for bit.
#[test]
fn converted_files_of_every_architecture_stream_to_the_same_bits() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/arch");
    for name in [
        "llama2.Q4_0.gguf",
        "llama3.Q4_K_M.gguf",
        "llama3_untied.Q4_0.gguf",
        "phi3.Q4_0.gguf",
        "qwen2.Q4_K_M.gguf",
        "gemma.Q4_K_M.gguf",
        "gemma2.Q4_K_M.gguf",
        "gemma3.Q4_K_M.gguf",
    ] {
        let file = std::fs::read(dir.join(name)).unwrap();
        let w = whole(&file).unwrap();
        let ids: Vec<u32> = (1..6u32).map(|i| i * 7 % w.config.vocab as u32).collect();
        let want: Vec<u32> = w.logits(&ids).unwrap().iter().map(|x| x.to_bits()).collect();
        drop(w);
        let s = streamed(&file, 4093).unwrap();
        let got: Vec<u32> = s.logits(&ids).unwrap().iter().map(|x| x.to_bits()).collect();
        assert!(got == want, "{name}: streamed logits differ from the whole file's");
    }
}

/// A header whose config and table agree on a token embedding of 2^24 - 1 rows (570 MB of
/// Q8_0), followed by 1 MB of it: the stream holds what came (its buffer reserved ahead only
/// to a bound, not to the claim) and ends with the whole file's truncation error.
#[test]
fn a_header_claiming_a_huge_embedding_costs_what_the_stream_brings() {
    const D: u64 = 32;
    const F: u64 = 64;
    const V: u64 = (1 << 24) - 1;
    let mut tensors: Vec<(String, Vec<u64>, u32)> = vec![("token_embd.weight".into(), vec![D, V], 8)];
    tensors.push(("output_norm.weight".into(), vec![D], 0));
    let n = |s: &str| format!("blk.0.{s}.weight");
    for (s, dims, ty) in [
        ("attn_norm", vec![D], 0),
        ("attn_q", vec![D, D], 8),
        ("attn_k", vec![D, D], 8),
        ("attn_v", vec![D, D], 8),
        ("attn_output", vec![D, D], 8),
        ("ffn_norm", vec![D], 0),
        ("ffn_gate", vec![D, F], 8),
        ("ffn_up", vec![D, F], 8),
        ("ffn_down", vec![F, D], 8),
    ] {
        tensors.push((n(s), dims, ty));
    }
    let mut g = fixtures::Gguf::default();
    g.header(tensors.len() as u64, 10);
    g.str("general.architecture").u32(8).str("llama");
    for (k, v) in [
        ("llama.block_count", 1),
        ("llama.embedding_length", D as u32),
        ("llama.feed_forward_length", F as u32),
        ("llama.attention.head_count", 2),
        ("llama.context_length", 64),
        ("llama.vocab_size", V as u32),
    ] {
        g.str(k).u32(4).u32(v);
    }
    g.str("llama.attention.layer_norm_rms_epsilon").u32(6).buf.extend_from_slice(&1e-5f32.to_le_bytes());
    g.str("tokenizer.ggml.model").u32(8).str("gpt2");
    g.str("tokenizer.ggml.tokens").u32(9).u32(8).u64(2).str("a").str("b");
    let mut offset = 0u64;
    for (name, dims, ty) in &tensors {
        g.str(name).u32(dims.len() as u32);
        dims.iter().for_each(|&d| {
            g.u64(d);
        });
        g.u32(*ty).u64(offset);
        let elems: u64 = dims.iter().product();
        offset += if *ty == 0 { elems * 4 } else { elems / 32 * 34 };
        offset = offset.div_ceil(32) * 32;
    }
    g.pad_to(32);
    g.buf.extend(std::iter::repeat_n(0u8, 1 << 20));
    let want = GgufFile::from_bytes(Path::new(PATH), FileBytes::Owned(g.buf.clone())).err().unwrap();
    let got = stream(&g.buf, 65536).err().unwrap();
    assert_eq!(got.to_string(), want.to_string());
    assert!(got.to_string().contains("token_embd.weight data"), "{got}");
}
