//! Scans (cumulative_sum and cumulative_prod: one axis, an optional dtype, include_initial) and
//! the statistics beside the reductions (prod with an optional dtype, std, diff), vecdot and
//! tensordot.

use crate::{axes, opt_get, tensor_reply, Axes, Dt, Flag, Int, Opt, Out, Reply, TRef, Text};
use kiln_core::{ops, Error};
use rustler::Env;

#[rustler::nif(schedule = "DirtyIo")]
fn scan(env: Env<'_>, op: Text, x: TRef, axis: Opt<Int<isize>>, dtype: Opt<Dt>, include_initial: Flag) -> Reply<Out> {
    tensor_reply(env, || {
        let x = x.get()?;
        let (axis, dtype) = (axis.0.map(|a| a.0), dtype.0.map(|d| d.0));
        match op.0.as_str() {
            "cumulative_sum" => ops::cumulative_sum(&x, axis, dtype, include_initial.0),
            "cumulative_prod" => ops::cumulative_prod(&x, axis, dtype, include_initial.0),
            other => Err(Error::InvalidArgument(format!("unknown scan {other:?}"))),
        }
    })
}

#[rustler::nif(schedule = "DirtyIo")]
fn prod(env: Env<'_>, x: TRef, axes_: Opt<Axes>, keepdims: Flag, dtype: Opt<Dt>) -> Reply<Out> {
    tensor_reply(env, || ops::prod(&x.get()?, axes(&axes_).as_deref(), keepdims.0, dtype.0.map(|d| d.0)))
}

#[rustler::nif(schedule = "DirtyIo")]
fn std(env: Env<'_>, x: TRef, axes_: Opt<Axes>, keepdims: Flag, ddof: Int<usize>) -> Reply<Out> {
    tensor_reply(env, || ops::std(&x.get()?, axes(&axes_).as_deref(), keepdims.0, ddof.0))
}

#[rustler::nif(schedule = "DirtyIo")]
fn diff(env: Env<'_>, x: TRef, axis: Int<isize>, n: Int<usize>, prepend: Opt<TRef>, append: Opt<TRef>) -> Reply<Out> {
    tensor_reply(env, || {
        let (p, a) = (opt_get(&prepend)?, opt_get(&append)?);
        ops::diff(&x.get()?, axis.0, n.0, p.as_ref(), a.as_ref())
    })
}

#[rustler::nif(schedule = "DirtyIo")]
fn vecdot(env: Env<'_>, a: TRef, b: TRef, axis: Int<isize>) -> Reply<Out> {
    tensor_reply(env, || ops::vecdot(&a.get()?, &b.get()?, axis.0))
}

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
