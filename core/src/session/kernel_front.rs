//! The checks every WGSL kernel passes before anything else looks at it: naga's parse and
//! validation (errors with line:column), the entry point, the shader policy of a session's
//! kernel, and the workgroup and private memory limits. One function, so that the compile path
//! (`kernel/compile.rs`) and the sandbox check the fuzz targets drive (`sandbox_check.rs`) cannot drift
//! apart in what they accept.

use super::{policy, ShaderPolicy};
use crate::{kernel_limits, Error, Result};
use naga::valid::{Capabilities, ModuleInfo, ValidationFlags, Validator};
use naga::Module;

/// A kernel that passed the front checks, with what the later steps need.
pub(crate) struct Front {
    pub module: Module,
    pub info: ModuleInfo,
    pub ep_index: usize,
    pub layouter: naga::proc::Layouter,
    /// The source declared `override`s: `module` is the module with them replaced by their
    /// values, which is what must be compiled (the source as written would be resolved by the
    /// driver, after the checks).
    pub resolved_overrides: bool,
}

/// The validator of the compile path: f16 only where the device has it.
pub(crate) fn validator(has_f16: bool) -> Validator {
    let caps = if has_f16 { Capabilities::SHADER_FLOAT16 } else { Capabilities::empty() };
    Validator::new(ValidationFlags::all(), caps)
}

/// A validation error with its chain of causes.
pub(crate) fn validation_text(e: &naga::WithSpan<naga::valid::ValidationError>) -> String {
    let mut text = e.as_inner().to_string();
    let mut src = e.as_inner() as &dyn std::error::Error;
    while let Some(next) = src.source() {
        text += &format!(": {next}");
        src = next;
    }
    text
}

pub(crate) fn shader_error(kind: &str, text: String, loc: Option<naga::SourceLocation>) -> Error {
    match loc {
        Some(l) => Error::Shader(format!("{}:{}: {kind}: {text}", l.line_number, l.line_position)),
        None => Error::Shader(format!("{kind}: {text}")),
    }
}

/// Parses and validates `source`, finds the compute entry point `entry`, checks `sandbox`'s
/// policy (a session's kernel) and the memory limits (`workgroup_limit` bytes of workgroup memory).
pub(crate) fn check(
    source: &str,
    entry: &str,
    has_f16: bool,
    sandbox: Option<&ShaderPolicy>,
    workgroup_limit: u32,
) -> Result<Front> {
    let mut module = naga::front::wgsl::parse_str(source)
        .map_err(|e| shader_error("parse error", e.message().to_string(), e.location(source)))?;
    let mut info = validator(has_f16)
        .validate(&module)
        .map_err(|e| shader_error("validation error", validation_text(&e), e.location(source)))?;
    let Some(mut ep_index) = module.entry_points.iter().position(|ep| ep.name == entry) else {
        let names: Vec<_> = module.entry_points.iter().map(|e| e.name.as_str()).collect();
        return Err(Error::Shader(format!("no entry point named {entry:?} (the module has {names:?})")));
    };
    if module.entry_points[ep_index].stage != naga::ShaderStage::Compute {
        return Err(Error::Shader(format!("entry point {entry:?} is not a @compute function")));
    }
    // Pipeline-overridable constants (`override w: u32 = 1024u; @workgroup_size(w)`) leave the
    // module's workgroup size at [1, 1, 1] and override-sized workgroup arrays unsized until the
    // pipeline is made, after every check: a 1024-invocation workgroup passed a 64-invocation
    // policy and was charged as 1. Kiln sets no pipeline constants, so each override takes its
    // default (one without a default cannot be compiled): resolve them all here, so that every
    // check, the reflection, the charge and the compiled code see the same resolved module.
    let resolved_overrides = !module.overrides.is_empty();
    if resolved_overrides {
        let (m, i) = naga::back::pipeline_constants::process_overrides(
            &module,
            &info,
            Some((naga::ShaderStage::Compute, entry)),
            &Default::default(),
        )
        .map_err(|e| Error::Shader(format!("pipeline-overridable constants (override): {e}")))?;
        (module, info) = (m.into_owned(), i.into_owned());
        ep_index =
            module.entry_points.iter().position(|ep| ep.name == entry).ok_or_else(|| {
                Error::Internal(format!("entry point {entry:?} went missing while resolving overrides"))
            })?;
    }
    let mut layouter = naga::proc::Layouter::default();
    layouter.update(module.to_ctx()).map_err(|e| Error::Shader(format!("cannot lay out the module's types: {e}")))?;
    let uses = info.get_entry_point(ep_index);
    if let Some(p) = sandbox {
        policy::check(p, source, &module, uses, entry)?;
    }
    kernel_limits::check_workgroup_memory(&module, uses, &layouter, entry, workgroup_limit)?;
    kernel_limits::check_private_memory(&module, &info, ep_index, &layouter)?;
    Ok(Front { module, info, ep_index, layouter, resolved_overrides })
}
