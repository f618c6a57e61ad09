//! Neural-network ops: embedding, rope, attention.

use crate::{tensor_reply, Flag, Int, Opt, Out, Reply, Scalar, TRef};
use kiln_core::ops;
use rustler::Env;

#[rustler::nif(schedule = "DirtyIo")]
fn embedding(env: Env<'_>, weight: TRef, ids: TRef) -> Reply<Out> {
    tensor_reply(env, || ops::embedding(&weight.get()?, &ids.get()?))
}

#[rustler::nif(schedule = "DirtyIo")]
fn rope(env: Env<'_>, x: TRef, pos_offset: Int<usize>, base: Scalar) -> Reply<Out> {
    tensor_reply(env, || ops::rope(&x.get()?, pos_offset.0, base.0 as f32))
}

#[rustler::nif(schedule = "DirtyIo")]
fn attention(env: Env<'_>, q: TRef, k: TRef, v: TRef, causal: Flag, scale: Opt<Scalar>) -> Reply<Out> {
    tensor_reply(env, || ops::attention(&q.get()?, &k.get()?, &v.get()?, causal.0, scale.0.map(|s| s.0 as f32)))
}
