//! `kiln._kiln`: the PyO3 extension behind `import kiln`. A thin layer: argument conversion
//! (convert.rs), error mapping (errors.rs, the one place ErrorCode becomes an exception class),
//! and one function per kiln-core op (ops.rs, nn.rs). The pure-Python package `kiln` re-exports
//! it, adds aliases, `kiln.random` and the exception classes.

mod classes;
mod convert;
mod errors;
mod ops;
mod ops_gen;
mod runtime;
mod tensor;

use pyo3::prelude::*;

macro_rules! add_fns {
    ($m:expr, $($path:path),* $(,)?) => {
        $( $m.add_function(wrap_pyfunction!($path, $m)?)?; )*
    };
}

#[pymodule(gil_used = false)]
fn _kiln(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<tensor::PyTensor>()?;
    m.add_class::<runtime::PyDevice>()?;
    m.add_class::<runtime::PyKernel>()?;
    add_fns!(
        m,
        // runtime
        runtime::devices, runtime::default_device, runtime::select_adapter, runtime::memory_stats,
        runtime::pipeline_stats, runtime::synchronize, runtime::empty_cache, runtime::reset_devices, runtime::_bench_core,
        errors::error_codes, errors::_raise_error, errors::_panic, tensor::_tensor,
        // creation
        ops::asarray, ops::from_bytes, ops::zeros, ops::ones, ops::empty, ops::full, ops::zeros_like,
        ops::ones_like, ops::full_like, ops::empty_like, ops::arange, ops::copy, ops::fill, ops::astype,
        // the unary and binary ops with a wrapper of their own (the rest: ops_gen::register)
        ops::gelu, ops::divide, ops::floor_divide, ops::remainder, ops::where_,
        // matmul, reduce, norm
        ops::matmul, ops::sum, ops::mean, ops::max, ops::min, ops::var, ops::argmax, ops::argmin,
        ops::softmax, ops::log_softmax, ops::layer_norm, ops::rms_norm, ops::batch_norm,
        // movement, nn, random
        ops::reshape, ops::permute_dims, ops::transpose, ops::swapaxes, ops::matrix_transpose, ops::concat,
        ops::slice, ops::take, ops::index_select, ops::gather, ops::take_along_axis, ops::embedding,
        ops::rope, ops::random_uniform, ops::random_normal,
        // conv, pool, attention
        ops::conv2d, ops::max_pool2d, ops::avg_pool2d, ops::attention,
    );
    ops_gen::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
