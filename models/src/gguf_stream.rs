//! A GGUF file read as it arrives (a page's download: `push` each chunk, then `finish`), its
//! weight matrices uploaded to the GPU on the way, so that the page's wasm memory never holds
//! the file.
//!
//! The header (metadata and tensor table) is gathered first, bounded by [`MAX_HEADER_BYTES`]
//! and checked as [`Header::parse`] checks a whole file. From it come the model's config and
//! the stacks the GPU loader builds ([`plan`]: token embedding, output head, each layer's
//! QKV, attention output, gate/up and down matrices, each stack as one buffer per block
//! format). The tensor data then arrives in file order, whatever order that is: each piece of
//! a matrix is written straight into its stack's GPU buffer at its offset (kiln-core's
//! [`TensorFill`]: whole words at once, the few bytes of a word split between pieces kept until
//! it is whole; Q and K rows gathered one row at a time, each written at the row the
//! converter's permutation took it from). A buffer is allocated ahead of its bytes only up to a
//! bound ([`RESERVE_AHEAD`], or 4x what came so far): a stack claiming more is gathered on the
//! host as its bytes come and uploaded when whole, so a header claiming gigabytes costs what the
//! stream brings. The small tensors the loader reads from the file (norms, biases, RoPE
//! factors) are kept on the host; anything larger that no stack takes is skipped (the loader
//! then refuses it by name, as for a whole file). What wasm memory holds at most: the header
//! and the piece being written (plus any stack past the bound), never the file nor a stack.
//!
//! Errors are the whole file's: a stream cut short gives the error [`Header::parse`] gives for
//! that prefix of the file; a matrix of the wrong type or shape is refused as soon as the
//! header is in (the loader's error, before any data is downloaded).

use crate::error::{ModelError, Result};
use crate::gguf::{GgufError, GgufFile, Header};
use crate::llama::{self, LlamaConfig, OwnedStackPart, StackPart};
use kiln_core::ops::{self, QuantFormat};
use kiln_core::{DType, Tensor, TensorFill};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The most bytes a stream gathers for the header (metadata, vocabulary, tensor table) before
/// the first tensor. A Llama 3 vocabulary (128k tokens and 280k merges) is about 10 MB.
pub const MAX_HEADER_BYTES: usize = 256 << 20;

/// The most a tensor's buffer is allocated ahead of its bytes (what a header claims, before the
/// stream has brought it): SmolLM2's largest tensor, the token embedding, is 17.7 MB.
const RESERVE_AHEAD: u64 = 256 << 20;

/// A stream's uploaded stacks, by [`stack_key`]: one (weights, format, rows) per block format.
pub(crate) type UploadedStacks = HashMap<String, Vec<(Tensor, QuantFormat, usize)>>;

/// What names a stack: its parts (name, rows, heads to un-permute) and its columns.
pub(crate) fn stack_key(parts: &[StackPart<'_>], cols: usize) -> String {
    let parts: Vec<String> = parts.iter().map(|(n, r, h)| format!("{n}:{r}:{h:?}")).collect();
    format!("{}/{cols}", parts.join("+"))
}

/// The stacks `CausalLM::from_gguf`'s GPU path asks its loader for (llama.rs: the same parts,
/// in its order). A stack asked for and not here loads from kept bytes or is an error naming
/// the tensor; a stack here not asked for is an error after loading: a test
/// (models/tests/gguf_stream.rs) keeps the two in step.
fn plan(c: &LlamaConfig, f: &GgufFile) -> Vec<(Vec<OwnedStackPart>, usize)> {
    let mut stacks = vec![(vec![("token_embd.weight".to_string(), c.vocab, None)], c.hidden)];
    if f.tensor("output.weight").is_some() {
        stacks.push((vec![("output.weight".to_string(), c.vocab, None)], c.hidden));
    }
    for i in 0..c.n_layers {
        let n = |s: &str| format!("blk.{i}.{s}.weight");
        stacks.push((c.qkv_parts(f, i), c.hidden));
        stacks.push((vec![(n("attn_output"), c.hidden, None)], c.q_dim()));
        stacks.push((c.gate_up_parts(i), c.hidden));
        stacks.push((vec![(n("ffn_down"), c.hidden, None)], c.ffn));
    }
    stacks
}

/// A finished stream: the file's header and kept tensors, and the stacks on the GPU.
pub struct StreamedGguf {
    file: GgufFile,
    uploaded: UploadedStacks,
}

impl StreamedGguf {
    /// The header and the tensors kept on the host (the others' `has_data` is false).
    pub fn file(&self) -> &GgufFile {
        &self.file
    }

    /// Stacks uploaded to the GPU.
    pub fn stacks(&self) -> usize {
        self.uploaded.len()
    }

    pub(crate) fn into_parts(self) -> (GgufFile, UploadedStacks) {
        (self.file, self.uploaded)
    }
}

/// One run of a stack's rows in one block format: one GPU buffer.
struct Group {
    format: QuantFormat,
    rows: usize,
    /// Each part's first byte in the group's buffer, in the stack's order.
    starts: Vec<u64>,
    /// The group's bytes.
    len: u64,
    parts_left: usize,
    sink: GroupSink,
    done: Option<Tensor>,
}

/// Where a group's bytes go as they arrive.
enum GroupSink {
    /// No byte yet: the buffer is made at the first.
    Unopened,
    /// Straight into the group's GPU buffer, each piece at its offset (no host copy of the
    /// group): what a group within the bound on allocating ahead takes.
    Gpu(TensorFill),
    /// Each part gathered on the host, joined and uploaded when the last is whole: a group
    /// larger than the stream may allocate ahead of its bytes (see `RESERVE_AHEAD`), which then
    /// costs only what arrives.
    Host(Vec<Vec<u8>>),
}

struct Stack {
    key: String,
    cols: usize,
    groups: Vec<Group>,
}

/// Where a tensor's bytes go.
enum Dest {
    /// Onto `stacks[stack].groups[group].parts[part]`; `heads`: (heads, head_dim, row bytes)
    /// of Q or K rows to un-permute once the tensor is whole.
    Stack {
        stack: usize,
        group: usize,
        part: usize,
        heads: Option<(usize, usize, usize)>,
    },
    Keep,
    Skip,
}

/// A tensor's bytes in the file: [start, end).
struct Slot {
    start: u64,
    end: u64,
    name: String,
    dest: Dest,
}

/// The tensor data, routed as it arrives.
struct Body {
    file: GgufFile,
    /// Non-empty tensors in file order.
    slots: Vec<Slot>,
    next: usize,
    /// File position of the next byte.
    pos: u64,
    stacks: Vec<Stack>,
    /// The bytes of the tensor being kept.
    keeping: Vec<u8>,
    /// The Q or K row being gathered (its rows move, so each is written whole at its place).
    row: Vec<u8>,
    device: std::sync::Arc<kiln_core::Device>,
}

enum Phase {
    /// The file's first bytes, parsed again once `retry_at` of them are in.
    Header {
        buf: Vec<u8>,
        retry_at: usize,
    },
    Body(Box<Body>),
    /// An error was returned: the stream takes nothing more.
    Failed,
}

/// A GGUF file as it arrives: see the module doc.
pub struct GgufStream {
    path: PathBuf,
    phase: Phase,
    received: u64,
}

impl GgufStream {
    /// A stream for the file `path` names (for messages).
    pub fn new(path: &Path) -> GgufStream {
        GgufStream { path: path.to_path_buf(), phase: Phase::Header { buf: Vec::new(), retry_at: 0 }, received: 0 }
    }

    /// Bytes pushed so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The next bytes of the file. After an error the stream is spent (every later call errs).
    pub fn push(&mut self, chunk: &[u8]) -> Result<()> {
        let r = self.push_inner(chunk);
        if r.is_err() {
            self.phase = Phase::Failed;
        }
        r
    }

    fn spent(&self) -> ModelError {
        crate::error::corrupt(&self.path, "the stream already failed (an earlier chunk was refused)")
    }

    fn push_inner(&mut self, mut chunk: &[u8]) -> Result<()> {
        self.received += chunk.len() as u64;
        if let Phase::Header { buf, retry_at } = &mut self.phase {
            loop {
                let take = retry_at.saturating_sub(buf.len()).min(chunk.len());
                buf.try_reserve(take).map_err(|_| {
                    kiln_core::Error::OutOfMemory(format!("the GGUF header ({} bytes so far) does not fit", buf.len()))
                })?;
                buf.extend_from_slice(&chunk[..take]);
                chunk = &chunk[take..];
                if buf.len() < *retry_at {
                    return Ok(());
                }
                match Header::parse_prefix(buf) {
                    Ok(header) => {
                        let buf = std::mem::take(buf);
                        self.start_body(header, &buf)?;
                        break;
                    }
                    Err(GgufError::Truncated { offset, needed, .. }) => {
                        let need = offset.saturating_add(needed);
                        if need > MAX_HEADER_BYTES as u64 {
                            return Err(crate::error::corrupt(
                                &self.path,
                                format!(
                                    "its header (metadata and tensor table) needs {need} bytes or more: over the \
                                     {MAX_HEADER_BYTES} a stream reads before the tensors"
                                ),
                            ));
                        }
                        // At least a quarter more each time: 1-byte chunks parse the header
                        // O(log n) times, not once per byte.
                        *retry_at = (need as usize).max(buf.len() + buf.len() / 4).min(MAX_HEADER_BYTES);
                        if chunk.is_empty() {
                            return Ok(());
                        }
                    }
                    Err(e) => return Err(e.into_model_error(&self.path)),
                }
            }
        }
        match &mut self.phase {
            Phase::Body(body) => body.feed(chunk),
            Phase::Failed => Err(self.spent()),
            Phase::Header { .. } => unreachable!("left above"),
        }
    }

    /// The header is in: plans the stacks, then routes `buf` (the file from byte 0).
    fn start_body(&mut self, header: Header, buf: &[u8]) -> Result<()> {
        let file = GgufFile::streamed(&self.path, header, HashMap::new());
        let config = LlamaConfig::from_gguf(&file)?;
        let device = kiln_core::device()?;
        let mut stacks = Vec::new();
        let mut dest: HashMap<&str, Dest> = HashMap::new();
        let planned = plan(&config, &file);
        for (parts, cols) in &planned {
            let parts = llama::borrowed(parts);
            let mut stack = Stack { key: stack_key(&parts, *cols), cols: *cols, groups: Vec::new() };
            for &(name, rows, heads) in &parts {
                // The loader's own checks, now rather than after the download.
                let t = file.expect(name, &llama::MATRIX_TYPES, &[*cols as u64, rows as u64])?;
                let format = llama::quant_format(t)?;
                let row_bytes = format.row_bytes(*cols)?;
                if stack.groups.last().is_none_or(|g: &Group| g.format != format) {
                    stack.groups.push(Group {
                        format,
                        rows: 0,
                        starts: Vec::new(),
                        len: 0,
                        parts_left: 0,
                        sink: GroupSink::Unopened,
                        done: None,
                    });
                }
                let g = stack.groups.last_mut().expect("pushed above");
                g.rows += rows;
                g.starts.push(g.len);
                g.len += t.n_bytes;
                g.parts_left += 1;
                let heads = heads.map(|(h, d)| (h, d, row_bytes));
                let part = g.starts.len() - 1;
                let group = stack.groups.len() - 1;
                dest.insert(name, Dest::Stack { stack: stacks.len(), group, part, heads });
            }
            stacks.push(stack);
        }
        // The vectors the loader reads from the file are at most this long.
        let kv = config.n_kv_heads * config.head_dim;
        let keep_limit = 4 * (config.hidden + config.ffn + config.q_dim() + 2 * kv + config.head_dim) as u64;
        let data_offset = file.header().data_offset;
        let mut slots: Vec<Slot> = file
            .tensors()
            .iter()
            .filter(|t| t.n_bytes > 0)
            .map(|t| {
                let d = dest.remove(t.name.as_str()).unwrap_or(if t.n_bytes <= keep_limit {
                    Dest::Keep
                } else {
                    Dest::Skip
                });
                let start = data_offset + t.offset;
                Slot { start, end: start + t.n_bytes, name: t.name.clone(), dest: d }
            })
            .collect();
        slots.sort_by_key(|s| s.start);
        let mut body = Body { file, slots, next: 0, pos: 0, stacks, keeping: Vec::new(), row: Vec::new(), device };
        body.feed(buf)?;
        self.phase = Phase::Body(Box::new(body));
        Ok(())
    }

    /// The file is all in: the stacks on the GPU and the header with the kept tensors. A file
    /// cut short is the error [`Header::parse`] gives for what arrived.
    pub fn finish(mut self) -> Result<StreamedGguf> {
        if let Phase::Header { buf, .. } = &mut self.phase {
            let buf = std::mem::take(buf);
            match Header::parse_prefix(&buf) {
                Ok(header) => self.start_body(header, &buf)?,
                Err(_) => {
                    return Err(match Header::parse(&buf) {
                        Err(e) => e.into_model_error(&self.path),
                        Ok(_) => crate::error::corrupt(&self.path, "it ends inside its header"),
                    })
                }
            }
        }
        let body = match std::mem::replace(&mut self.phase, Phase::Failed) {
            Phase::Body(b) => b,
            _ => return Err(self.spent()),
        };
        // Header::parse's check of every tensor's range, against the bytes that came.
        let h = body.file.header();
        let data_len = self.received.saturating_sub(h.data_offset);
        for t in &h.tensors {
            if t.offset.checked_add(t.n_bytes).is_none_or(|end| end > data_len) {
                let e = GgufError::Truncated {
                    what: format!("tensor {} data", t.name),
                    offset: h.data_offset.saturating_add(t.offset),
                    needed: t.n_bytes,
                    available: data_len.saturating_sub(t.offset),
                };
                return Err(e.into_model_error(&self.path));
            }
        }
        let Body { file, stacks, .. } = *body;
        let mut uploaded = UploadedStacks::new();
        for s in stacks {
            let mut groups = Vec::new();
            for g in s.groups {
                let w =
                    g.done.ok_or_else(|| crate::error::corrupt(&self.path, format!("stack {} incomplete", s.key)))?;
                groups.push((w, g.format, g.rows));
            }
            uploaded.insert(s.key, groups);
        }
        Ok(StreamedGguf { file, uploaded })
    }
}

/// The row a Q or K row of the file goes back to: the converter's permutation (llama.rs's
/// `unpermute_rows`: file row h*D + 2j + i holds row h*D + i*D/2 + j) undone one row at a time.
fn unpermuted_row(file_row: usize, n_heads: usize, head_dim: usize) -> usize {
    if file_row >= n_heads * head_dim || !head_dim.is_multiple_of(2) {
        return file_row;
    }
    let (h, r) = (file_row / head_dim, file_row % head_dim);
    h * head_dim + (r % 2) * (head_dim / 2) + r / 2
}

/// `piece` appended to `v`, the bytes of `slot`'s tensor gathered on the host (`pos`: the file
/// position of `piece`).
fn gather(v: &mut Vec<u8>, piece: &[u8], pos: u64, slot: &Slot) -> Result<()> {
    let (start, end, name) = (slot.start, slot.end, &slot.name);
    if v.capacity() == 0 {
        // Its claimed size at once (no reallocation copies), where the header's claim is
        // plausible: within RESERVE_AHEAD, or 4x the bytes that came so far; else it grows as
        // the bytes come.
        let ahead = (end - start).min(RESERVE_AHEAD.max(pos.saturating_mul(4)));
        v.try_reserve_exact(ahead as usize)
            .map_err(|_| kiln_core::Error::OutOfMemory(format!("{name} ({ahead} bytes) does not fit")))?;
    }
    v.try_reserve(piece.len())
        .map_err(|_| kiln_core::Error::OutOfMemory(format!("{name} ({} bytes so far) does not fit", v.len())))?;
    v.extend_from_slice(piece);
    Ok(())
}

impl Body {
    /// Routes the file's bytes from `self.pos` on.
    fn feed(&mut self, mut chunk: &[u8]) -> Result<()> {
        while !chunk.is_empty() {
            let Some(slot) = self.slots.get(self.next) else {
                // Past the last tensor: ignored, as a whole file's trailing bytes are.
                self.pos += chunk.len() as u64;
                return Ok(());
            };
            if self.pos < slot.start {
                let skip = (slot.start - self.pos).min(chunk.len() as u64);
                self.pos += skip;
                chunk = &chunk[skip as usize..];
                continue;
            }
            let n = ((slot.end - self.pos) as usize).min(chunk.len());
            let (piece, end) = (&chunk[..n], slot.end);
            match slot.dest {
                Dest::Stack { stack, group, part, heads } => self.route_to_stack(stack, group, part, heads, piece)?,
                Dest::Keep => gather(&mut self.keeping, piece, self.pos, slot)?,
                Dest::Skip => {}
            }
            self.pos += n as u64;
            chunk = &chunk[n..];
            if self.pos == end {
                self.complete()?;
                self.next += 1;
            }
        }
        Ok(())
    }

    /// `piece`, the next bytes of `slots[next]`, a stack's part, to its group.
    fn route_to_stack(
        &mut self,
        stack: usize,
        group: usize,
        part: usize,
        heads: Option<(usize, usize, usize)>,
        piece: &[u8],
    ) -> Result<()> {
        let slot = &self.slots[self.next];
        let at = self.pos - slot.start;
        let s = &mut self.stacks[stack];
        let g = &mut s.groups[group];
        if let GroupSink::Unopened = g.sink {
            // The whole group's buffer at once where the header's claim is plausible: within
            // RESERVE_AHEAD, or 4x the bytes that came so far; else gathered as the bytes come.
            g.sink = if g.len <= RESERVE_AHEAD.max(self.pos.saturating_mul(4)) {
                let words = g.len.div_ceil(4) as usize;
                GroupSink::Gpu(TensorFill::new_on(&self.device, &[words], DType::U32, g.len)?)
            } else {
                GroupSink::Host(vec![Vec::new(); g.starts.len()])
            };
        }
        let start = g.starts[part];
        match &mut g.sink {
            GroupSink::Gpu(fill) => match heads {
                None => fill.write(start + at, piece)?,
                Some((n_heads, head_dim, row_bytes)) => {
                    // Whole rows, each written at the row the converter's permutation took it from.
                    let mut at = at - self.row.len() as u64;
                    let mut rest = piece;
                    while !rest.is_empty() {
                        let take = (row_bytes - self.row.len()).min(rest.len());
                        self.row.extend_from_slice(&rest[..take]);
                        rest = &rest[take..];
                        if self.row.len() == row_bytes {
                            let dst = unpermuted_row((at / row_bytes as u64) as usize, n_heads, head_dim);
                            fill.write(start + (dst * row_bytes) as u64, &self.row)?;
                            self.row.clear();
                            at += row_bytes as u64;
                        }
                    }
                }
            },
            GroupSink::Host(parts) => gather(&mut parts[part], piece, self.pos, slot)?,
            GroupSink::Unopened => unreachable!("opened above"),
        }
        Ok(())
    }

    /// The tensor `slots[next]` is whole.
    fn complete(&mut self) -> Result<()> {
        let slot = &self.slots[self.next];
        match slot.dest {
            Dest::Stack { stack, group, part, heads } => {
                let s = &mut self.stacks[stack];
                let cols = s.cols;
                let g = &mut s.groups[group];
                if let (GroupSink::Host(parts), Some((n_heads, head_dim, row_bytes))) = (&mut g.sink, heads) {
                    parts[part] = llama::unpermute_rows(&parts[part], row_bytes, n_heads, head_dim);
                }
                g.parts_left -= 1;
                if g.parts_left == 0 {
                    g.done = Some(match std::mem::replace(&mut g.sink, GroupSink::Unopened) {
                        GroupSink::Gpu(fill) => fill.finish()?,
                        GroupSink::Host(parts) => {
                            // One buffer for the group's rows (most groups are one tensor: no copy).
                            let bytes = if parts.len() == 1 {
                                parts.into_iter().next().expect("one part")
                            } else {
                                let mut all = Vec::new();
                                all.try_reserve_exact(parts.iter().map(Vec::len).sum()).map_err(|_| {
                                    kiln_core::Error::OutOfMemory(format!("stack {} does not fit", s.key))
                                })?;
                                parts.iter().for_each(|p| all.extend_from_slice(p));
                                all
                            };
                            ops::quant_from_bytes(&self.device, &bytes, g.format, g.rows, cols)?
                        }
                        // Unreachable: a part completes after its bytes, the first of which
                        // opened the sink (tensors of no bytes have no slot).
                        GroupSink::Unopened => {
                            return Err(kiln_core::Error::Internal(format!(
                                "stack {}: a group completed unopened",
                                s.key
                            ))
                            .into())
                        }
                    });
                }
            }
            Dest::Keep => {
                let bytes = std::mem::take(&mut self.keeping);
                self.file.keep(slot.name.clone(), bytes);
            }
            Dest::Skip => {}
        }
        Ok(())
    }
}
