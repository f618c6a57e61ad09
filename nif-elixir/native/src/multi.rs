//! The ops giving several tensors (a list): nonzero and unique_all (the op table's tuple ops;
//! sort, searchsorted, count_nonzero, unique_values and isin are generated in ops_gen.rs).

use crate::{guard, Out, Reply, TRef};
use kiln_core::ops;
use rustler::Env;

#[rustler::nif(schedule = "DirtyIo")]
fn nonzero(env: Env<'_>, x: TRef) -> Reply<Vec<Out>> {
    guard(env, || Ok(ops::nonzero(&x.get()?)?.into_iter().map(Out).collect()))
}

/// [values, indices, inverse_indices, counts]
#[rustler::nif(schedule = "DirtyIo")]
fn unique_all(env: Env<'_>, x: TRef) -> Reply<Vec<Out>> {
    guard(env, || {
        let u = ops::unique_all(&x.get()?)?;
        Ok(vec![Out(u.values), Out(u.indices), Out(u.inverse_indices), Out(u.counts)])
    })
}
