//! Searching, sorting and sets: sort argsort (axis, descending), searchsorted (right),
//! count_nonzero (axes), nonzero and unique_all (several tensors: a list), unique_values, isin.

use crate::{axes, guard, tensor_reply, Axes, Flag, Int, Opt, Out, Reply, TRef};
use kiln_core::ops;
use rustler::Env;

#[rustler::nif(schedule = "DirtyIo")]
fn sort(env: Env<'_>, x: TRef, axis: Int<isize>, descending: Flag, indices: Flag) -> Reply<Out> {
    tensor_reply(env, || {
        let x = x.get()?;
        if indices.0 {
            ops::argsort(&x, axis.0, descending.0)
        } else {
            ops::sort(&x, axis.0, descending.0)
        }
    })
}

#[rustler::nif(schedule = "DirtyIo")]
fn searchsorted(env: Env<'_>, x1: TRef, x2: TRef, right: Flag) -> Reply<Out> {
    tensor_reply(env, || ops::searchsorted(&x1.get()?, &x2.get()?, right.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn count_nonzero(env: Env<'_>, x: TRef, axes_: Opt<Axes>, keepdims: Flag) -> Reply<Out> {
    tensor_reply(env, || ops::count_nonzero(&x.get()?, axes(&axes_).as_deref(), keepdims.0))
}

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

#[rustler::nif(schedule = "DirtyIo")]
fn unique_values(env: Env<'_>, x: TRef) -> Reply<Out> {
    tensor_reply(env, || ops::unique_values(&x.get()?))
}

#[rustler::nif(schedule = "DirtyIo")]
fn isin(env: Env<'_>, x1: TRef, x2: TRef, invert: Flag) -> Reply<Out> {
    tensor_reply(env, || ops::isin(&x1.get()?, &x2.get()?, invert.0))
}
