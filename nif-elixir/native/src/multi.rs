//! nonzero, giving one tensor per dimension of its input (a list); the op table's named tuples
//! (unique_all, topk, …) are generated in ops_gen.rs.

use crate::{guard, Out, Reply, TRef};
use kiln_core::ops;
use rustler::Env;

#[rustler::nif(schedule = "DirtyIo")]
fn nonzero(env: Env<'_>, x: TRef) -> Reply<Vec<Out>> {
    guard(env, || Ok(ops::nonzero(&x.get()?)?.into_iter().map(Out).collect()))
}
