//! numpy matmul.

use crate::{tensor_reply, Out, Reply, TRef};
use kiln_core::ops;

#[rustler::nif(schedule = "DirtyIo")]
fn matmul(a: TRef, b: TRef) -> Reply<Out> {
    tensor_reply(|| ops::matmul(&a.get()?, &b.get()?))
}
