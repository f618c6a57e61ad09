//! Ops by name with JSON parameters: the one dispatcher that `kiln conformance` (tests/conformance
//! cases) and `kiln serve` (`POST /v1/sessions/{id}/ops/{op}`) share, so a name means the same
//! call everywhere. Parameter names follow the conformance manifest (tests/conformance/FORMAT.md).
//! Custom kernels are not here: each caller compiles and dispatches them its own way.

use super::{BinaryOp, QuantFormat, UnaryOp};
use crate::{ops, DType, Error, Result, Tensor};
use serde_json::{Map, Value};

/// An op call: JSON parameters and named input tensors (in order: `concat` takes them all).
pub struct OpCall<'a> {
    pub params: &'a Map<String, Value>,
    pub inputs: &'a [(String, Tensor)],
}

/// What the fallback arm says for a name it does not know; `dispatch` turns it into None. Never
/// seen by a caller.
const UNMAPPED: &str = "\u{0}unmapped op";

fn bad(msg: String) -> Error {
    Error::InvalidArgument(msg)
}

impl OpCall<'_> {
    fn input(&self, name: &str) -> Result<&Tensor> {
        self.opt_input(name).ok_or_else(|| bad(format!("no input {name:?}")))
    }
    fn opt_input(&self, name: &str) -> Option<&Tensor> {
        self.inputs.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }
    fn get(&self, k: &str) -> Result<&Value> {
        self.params.get(k).ok_or_else(|| bad(format!("no parameter {k:?}")))
    }
    fn f(&self, k: &str) -> Result<f64> {
        self.get(k)?.as_f64().ok_or_else(|| bad(format!("{k} is not a number")))
    }
    fn i(&self, k: &str) -> Result<i64> {
        self.get(k)?.as_i64().ok_or_else(|| bad(format!("{k} is not an integer")))
    }
    /// A count or size: a negative one is refused here rather than wrapped to a huge usize.
    fn n(&self, k: &str) -> Result<usize> {
        let v = self.i(k)?;
        usize::try_from(v).map_err(|_| bad(format!("{k} must not be negative (got {v})")))
    }
    fn axis(&self, k: &str) -> Result<isize> {
        Ok(self.i(k)? as isize)
    }
    fn u64(&self, k: &str) -> Result<u64> {
        self.get(k)?.as_u64().ok_or_else(|| bad(format!("{k} is not an unsigned integer")))
    }
    fn b(&self, k: &str) -> Result<bool> {
        self.get(k)?.as_bool().ok_or_else(|| bad(format!("{k} is not a bool")))
    }
    fn s(&self, k: &str) -> Result<&str> {
        self.get(k)?.as_str().ok_or_else(|| bad(format!("{k} is not a string")))
    }
    fn opt_ints(&self, k: &str) -> Result<Option<Vec<i64>>> {
        match self.get(k)? {
            Value::Null => Ok(None),
            v => Ok(Some(ints(v).ok_or_else(|| bad(format!("{k} is not a list of integers")))?)),
        }
    }
    fn ints(&self, k: &str) -> Result<Vec<i64>> {
        self.opt_ints(k)?.ok_or_else(|| bad(format!("{k} is null")))
    }
    fn opt_axes(&self, k: &str) -> Result<Option<Vec<isize>>> {
        Ok(self.opt_ints(k)?.map(|v| v.into_iter().map(|a| a as isize).collect()))
    }
    fn opt_axis(&self, k: &str) -> Result<Option<isize>> {
        match self.get(k)? {
            Value::Null => Ok(None),
            v => Ok(Some(v.as_i64().ok_or_else(|| bad(format!("{k} is not an integer")))? as isize)),
        }
    }
    fn opt_dtype(&self, k: &str) -> Result<Option<DType>> {
        match self.get(k)? {
            Value::Null => Ok(None),
            v => Ok(Some(DType::parse(v.as_str().ok_or_else(|| bad(format!("{k} is not a string")))?)?)),
        }
    }
    fn sizes(&self, k: &str) -> Result<Vec<usize>> {
        self.ints(k)?
            .into_iter()
            .map(|d| usize::try_from(d).map_err(|_| bad(format!("{k} has a negative value ({d})"))))
            .collect()
    }
    fn pair(&self, k: &str) -> Result<[usize; 2]> {
        let v = self.sizes(k)?;
        if v.len() != 2 {
            return Err(bad(format!("{k} must have two values")));
        }
        Ok([v[0], v[1]])
    }
    fn shape(&self) -> Result<Vec<usize>> {
        self.sizes("shape")
    }
    fn dtype(&self) -> Result<DType> {
        DType::parse(self.s("dtype")?)
    }
    fn format(&self) -> Result<QuantFormat> {
        QuantFormat::parse(self.s("format")?)
    }
}

fn ints(v: &Value) -> Option<Vec<i64>> {
    v.as_array()?.iter().map(|x| x.as_i64()).collect()
}

/// Runs op `name` (an op of `ops::op_names()`); an unknown name is INVALID_ARGUMENT.
pub fn run(name: &str, call: &OpCall) -> Result<Tensor> {
    dispatch(name, call).unwrap_or_else(|| Err(bad(format!("no op named {name:?}"))))
}

/// Whether `run` maps `name`. It asks the dispatch itself with an empty call (every mapped op
/// refuses it for a missing input or parameter before it reaches the GPU), so this cannot drift
/// from `run`.
pub fn knows(name: &str) -> bool {
    let params = Map::new();
    dispatch(name, &OpCall { params: &params, inputs: &[] }).is_some()
}

/// None: no op of that name.
fn dispatch(op: &str, c: &OpCall) -> Option<Result<Tensor>> {
    Some(match op {
        "zeros" => (|| ops::zeros(&c.shape()?, c.dtype()?))(),
        "ones" => (|| ops::ones(&c.shape()?, c.dtype()?))(),
        "full" => (|| ops::full(&c.shape()?, c.dtype()?, c.f("value")?))(),
        "arange" => (|| ops::arange(c.f("start")?, c.f("stop")?, c.f("step")?, c.dtype()?))(),
        "random_uniform" => {
            (|| ops::random_uniform(&c.shape()?, c.dtype()?, c.u64("seed")?, c.f("low")?, c.f("high")?))()
        }
        "random_normal" => {
            (|| ops::random_normal(&c.shape()?, c.dtype()?, c.u64("seed")?, c.f("mean")?, c.f("std")?))()
        }
        _ => return dispatch_on_inputs(op, c),
    })
}

fn dispatch_on_inputs(op: &str, c: &OpCall) -> Option<Result<Tensor>> {
    let r = || -> Result<Tensor> {
        Ok(match op {
            "where" => ops::where_(c.input("cond")?, c.input("a")?, c.input("b")?)?,
            "clip" if c.inputs.len() == 3 => ops::clip(c.input("x")?, Some(c.input("min")?), Some(c.input("max")?))?,
            "clip" => ops::clip_scalar(c.input("x")?, c.f("min")?, c.f("max")?)?,
            "cast" => ops::cast(c.input("x")?, c.dtype()?)?,
            "matmul" => ops::matmul(c.input("a")?, c.input("b")?)?,
            "sum" | "mean" | "max" | "min" | "all" | "any" => {
                let f = match op {
                    "sum" => ops::sum,
                    "mean" => ops::mean,
                    "max" => ops::max,
                    "all" => ops::all,
                    "any" => ops::any,
                    _ => ops::min,
                };
                f(c.input("x")?, c.opt_axes("axes")?.as_deref(), c.b("keepdims")?)?
            }
            "var" => ops::var(c.input("x")?, c.opt_axes("axes")?.as_deref(), c.b("keepdims")?, c.n("ddof")?)?,
            "std" => ops::std(c.input("x")?, c.opt_axes("axes")?.as_deref(), c.b("keepdims")?, c.n("ddof")?)?,
            "argmax" => ops::argmax(c.input("x")?, c.opt_axis("axis")?, c.b("keepdims")?)?,
            "argmin" => ops::argmin(c.input("x")?, c.opt_axis("axis")?, c.b("keepdims")?)?,
            "vecdot" => ops::vecdot(c.input("a")?, c.input("b")?, c.axis("axis")?)?,
            "tensordot" => {
                let n = c.i("n")?;
                let axes = if n >= 0 {
                    ops::TensordotAxes::Count(n as usize)
                } else {
                    let list = |k: &str| -> Result<Vec<isize>> { Ok(c.opt_axes(k)?.unwrap_or_default()) };
                    ops::TensordotAxes::Pairs(list("axes1")?, list("axes2")?)
                };
                ops::tensordot(c.input("a")?, c.input("b")?, &axes)?
            }
            "diff" => {
                ops::diff(c.input("x")?, c.axis("axis")?, c.n("n")?, c.opt_input("prepend"), c.opt_input("append"))?
            }
            "prod" => {
                ops::prod(c.input("x")?, c.opt_axes("axes")?.as_deref(), c.b("keepdims")?, c.opt_dtype("dtype")?)?
            }
            "cumulative_sum" | "cumulative_prod" => {
                let f = if op == "cumulative_sum" { ops::cumulative_sum } else { ops::cumulative_prod };
                f(c.input("x")?, c.opt_axis("axis")?, c.opt_dtype("dtype")?, c.b("include_initial")?)?
            }
            "softmax" => ops::softmax(c.input("x")?, c.axis("axis")?)?,
            "log_softmax" => ops::log_softmax(c.input("x")?, c.axis("axis")?)?,
            "layer_norm" => {
                ops::layer_norm(c.input("x")?, c.opt_input("weight"), c.opt_input("bias"), c.f("eps")? as f32)?
            }
            "rms_norm" => ops::rms_norm(c.input("x")?, c.opt_input("weight"), c.f("eps")? as f32)?,
            "batch_norm" => ops::batch_norm(
                c.input("x")?,
                c.input("mean")?,
                c.input("var")?,
                c.opt_input("weight"),
                c.opt_input("bias"),
                c.f("eps")? as f32,
            )?,
            "conv2d" => ops::conv2d(
                c.input("x")?,
                c.input("w")?,
                c.opt_input("bias"),
                c.pair("stride")?,
                c.pair("padding")?,
                c.pair("dilation")?,
                c.n("groups")?,
            )?,
            "max_pool2d" => ops::max_pool2d(c.input("x")?, c.pair("kernel")?, c.pair("stride")?, c.pair("padding")?)?,
            "avg_pool2d" => ops::avg_pool2d(c.input("x")?, c.pair("kernel")?, c.pair("stride")?, c.pair("padding")?)?,
            "reshape" => {
                let s: Vec<isize> = c.ints("shape")?.into_iter().map(|d| d as isize).collect();
                ops::reshape(c.input("x")?, &s)?
            }
            "permute" => {
                let a: Vec<isize> = c.ints("axes")?.into_iter().map(|d| d as isize).collect();
                ops::permute(c.input("x")?, &a)?
            }
            "transpose" => ops::transpose(c.input("x")?, c.axis("axis0")?, c.axis("axis1")?)?,
            "concat" => {
                let ts: Vec<&Tensor> = c.inputs.iter().map(|(_, t)| t).collect();
                ops::concat(&ts, c.axis("axis")?)?
            }
            "slice" => ops::slice(
                c.input("x")?,
                c.axis("axis")?,
                c.i("start")? as isize,
                c.i("stop")? as isize,
                c.i("step")? as isize,
            )?,
            "index_select" => ops::index_select(c.input("x")?, c.axis("axis")?, c.input("indices")?)?,
            "gather" => ops::gather(c.input("x")?, c.axis("axis")?, c.input("index")?)?,
            "embedding" => ops::embedding(c.input("weight")?, c.input("ids")?)?,
            "rope" => ops::rope(c.input("x")?, c.n("pos_offset")?, c.f("base")? as f32)?,
            "attention" => {
                let scale = match c.get("scale")? {
                    Value::Null => None,
                    v => Some(v.as_f64().ok_or_else(|| bad("scale is not a number".into()))? as f32),
                };
                ops::attention(c.input("q")?, c.input("k")?, c.input("v")?, c.b("causal")?, scale)?
            }
            "quant_from_bytes" => {
                let data = c.input("data")?;
                let mut bytes = data.to_bytes()?;
                bytes.truncate(c.n("nbytes")?);
                ops::quant_from_bytes(data.device(), &bytes, c.format()?, c.n("rows")?, c.n("cols")?)?
            }
            "quantize" => ops::quantize(c.input("x")?, c.format()?)?,
            "dequantize" => ops::dequantize(c.input("w")?, c.format()?, c.n("rows")?, c.n("cols")?)?,
            "quant_matmul" => ops::quant_matmul(c.input("x")?, c.input("w")?, c.format()?, c.n("n")?)?,
            "quant_embedding" => ops::quant_embedding(c.input("w")?, c.format()?, c.n("d")?, c.input("ids")?)?,
            // Searching, sorting and sets; ops giving a tuple name the element with `output`.
            "sort" => ops::sort(c.input("x")?, c.axis("axis")?, c.b("descending")?)?,
            "argsort" => ops::argsort(c.input("x")?, c.axis("axis")?, c.b("descending")?)?,
            "searchsorted" => ops::searchsorted(c.input("x1")?, c.input("x2")?, c.b("right")?)?,
            "count_nonzero" => ops::count_nonzero(c.input("x")?, c.opt_axes("axes")?.as_deref(), c.b("keepdims")?)?,
            "nonzero" | "unique_all" | "unique_counts" | "unique_inverse" => {
                let x = c.input("x")?;
                let k = c.n("output")?;
                let outs = match op {
                    "nonzero" => ops::nonzero(x)?,
                    "unique_all" => {
                        let u = ops::unique_all(x)?;
                        vec![u.values, u.indices, u.inverse_indices, u.counts]
                    }
                    "unique_counts" => {
                        let (v, n) = ops::unique_counts(x)?;
                        vec![v, n]
                    }
                    _ => {
                        let (v, i) = ops::unique_inverse(x)?;
                        vec![v, i]
                    }
                };
                outs.into_iter().nth(k).ok_or_else(|| bad(format!("{op} has no output {k}")))?
            }
            "unique_values" => ops::unique_values(c.input("x")?)?,
            "isin" => ops::isin(c.input("x1")?, c.input("x2")?, c.b("invert")?)?,
            _ => {
                if let Ok(u) = UnaryOp::parse(op) {
                    ops::unary(u, c.input("x")?)?
                } else {
                    let Ok(b) = BinaryOp::parse(op) else { return Err(bad(UNMAPPED.into())) };
                    match c.params.get("scalar") {
                        Some(s) => ops::binary_scalar(
                            b,
                            c.input("a")?,
                            s.as_f64().ok_or_else(|| bad("scalar is not a number".into()))?,
                            c.b("scalar_first")?,
                        )?,
                        None => ops::binary(b, c.input("a")?, c.input("b")?)?,
                    }
                }
            }
        })
    };
    match r() {
        Err(Error::InvalidArgument(m)) if m == UNMAPPED => None,
        r => Some(r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_of_the_table_is_mapped_and_nothing_else() {
        for op in ops::op_names() {
            assert!(knows(op), "by_name has no mapping for {op}");
        }
        assert!(!knows("no_such_op"));
        assert!(!knows("kernel"));
        let params = Map::new();
        let e = run("no_such_op", &OpCall { params: &params, inputs: &[] }).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::InvalidArgument);
    }

    #[test]
    fn a_negative_size_is_refused_not_wrapped() {
        let params: Map<String, Value> = serde_json::from_str(r#"{"shape": [-1, 2], "dtype": "float32"}"#).unwrap();
        let e = run("zeros", &OpCall { params: &params, inputs: &[] }).unwrap_err();
        assert_eq!(e.code(), crate::ErrorCode::InvalidArgument);
    }
}
