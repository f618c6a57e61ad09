//! tensordot, whose axes are a count or two lists (the op table's `Other` type): hand-written.

use crate::{tensor_reply, Axes, Int, Out, Reply, TRef};
use kiln_core::ops;
use rustler::Env;

/// `n >= 0`: the last n axes of a with the first n of b; else the pairs `axes1[i]`, `axes2[i]`.
#[rustler::nif(schedule = "DirtyIo")]
fn tensordot(env: Env<'_>, a: TRef, b: TRef, n: Int<isize>, axes1: Axes, axes2: Axes) -> Reply<Out> {
    tensor_reply(env, || {
        let axes = if n.0 >= 0 {
            ops::TensordotAxes::Count(n.0 as usize)
        } else {
            let list = |l: &Axes| l.0.iter().map(|i| i.0).collect();
            ops::TensordotAxes::Pairs(list(&axes1), list(&axes2))
        };
        ops::tensordot(&a.get()?, &b.get()?, &axes)
    })
}
