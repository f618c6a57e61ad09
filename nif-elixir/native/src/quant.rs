//! GGUF quantized weights (q4_0, q4_1, q8_0): the format travels as its name (lib/kiln.ex turns
//! the atom `:q4_0` into "q4_0") and kiln-core parses it.

use crate::{tensor_reply, Bytes, Int, Out, Reply, TRef, Text};
use kiln_core::ops::{self, QuantFormat};
use rustler::Env;

#[rustler::nif(schedule = "DirtyIo")]
fn quant_from_bytes(env: Env<'_>, data: Bytes, format: Text, rows: Int<usize>, cols: Int<usize>) -> Reply<Out> {
    tensor_reply(env, || {
        ops::quant_from_bytes(&kiln_core::device()?, data.0.as_slice(), QuantFormat::parse(&format.0)?, rows.0, cols.0)
    })
}

#[rustler::nif(schedule = "DirtyIo")]
fn quantize(env: Env<'_>, x: TRef, format: Text) -> Reply<Out> {
    tensor_reply(env, || ops::quantize(&x.get()?, QuantFormat::parse(&format.0)?))
}

#[rustler::nif(schedule = "DirtyIo")]
fn dequantize(env: Env<'_>, w: TRef, format: Text, rows: Int<usize>, cols: Int<usize>) -> Reply<Out> {
    tensor_reply(env, || ops::dequantize(&w.get()?, QuantFormat::parse(&format.0)?, rows.0, cols.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn quant_matmul(env: Env<'_>, x: TRef, w: TRef, format: Text, n: Int<usize>) -> Reply<Out> {
    tensor_reply(env, || ops::quant_matmul(&x.get()?, &w.get()?, QuantFormat::parse(&format.0)?, n.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn quant_embedding(env: Env<'_>, w: TRef, format: Text, d: Int<usize>, ids: TRef) -> Reply<Out> {
    tensor_reply(env, || ops::quant_embedding(&w.get()?, QuantFormat::parse(&format.0)?, d.0, &ids.get()?))
}
