//! numpy matmul.

use crate::{tensor_reply, Out, Reply, TRef};
use kiln_core::ops;
use rustler::Env;

#[rustler::nif(schedule = "DirtyIo")]
fn matmul(env: Env<'_>, a: TRef, b: TRef) -> Reply<Out> {
    tensor_reply(env, || ops::matmul(&a.get()?, &b.get()?))
}
