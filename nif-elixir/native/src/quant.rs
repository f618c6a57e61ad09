//! quant_from_bytes: raw GGUF bytes (a binary) uploaded as a quantized matrix; the op table's
//! `Bytes` type, so hand-written (the other quant ops are generated in ops_gen.rs). The format
//! travels as its name (lib/kiln.ex turns the atom `:q4_0` into "q4_0") and kiln-core parses it.

use crate::{tensor_reply, Bytes, Int, Out, Reply, Text};
use kiln_core::ops::{self, QuantFormat};
use rustler::Env;

#[rustler::nif(schedule = "DirtyIo")]
fn quant_from_bytes(env: Env<'_>, data: Bytes, format: Text, rows: Int<usize>, cols: Int<usize>) -> Reply<Out> {
    tensor_reply(env, || {
        ops::quant_from_bytes(&kiln_core::device()?, data.0.as_slice(), QuantFormat::parse(&format.0)?, rows.0, cols.0)
    })
}
