//! Neural-network ops: embedding, rope, attention.

use crate::{tensor_reply, Out, Reply, TRef};
use kiln_core::ops;

#[rustler::nif(schedule = "DirtyIo")]
fn embedding(weight: TRef, ids: TRef) -> Reply<Out> {
    tensor_reply(|| ops::embedding(&weight.get()?, &ids.get()?))
}

#[rustler::nif(schedule = "DirtyIo")]
fn rope(x: TRef, pos_offset: usize, base: f64) -> Reply<Out> {
    tensor_reply(|| ops::rope(&x.get()?, pos_offset, base as f32))
}

#[rustler::nif(schedule = "DirtyIo")]
fn attention(q: TRef, k: TRef, v: TRef, causal: bool, scale: Option<f64>) -> Reply<Out> {
    tensor_reply(|| ops::attention(&q.get()?, &k.get()?, &v.get()?, causal, scale.map(|s| s as f32)))
}
