//! A session's shader policy, checked on the validated naga module before anything reaches the
//! driver: source size, workgroup size, bindings, and the WGSL features a tenant may use. Every
//! refusal is a SHADER error that names the line (`line:column: policy: ...`).

use super::ShaderPolicy;
use crate::{Error, Result};
use naga::{AddressSpace, Module, Span, TypeInner};

fn at(source: &str, span: Span, text: String) -> Error {
    match span.is_defined().then(|| span.location(source)) {
        Some(l) => Error::Shader(format!("{}:{}: policy: {text}", l.line_number, l.line_position)),
        None => Error::Shader(format!("policy: {text}")),
    }
}

/// The 1-based line and column of the first occurrence of `needle` at or after byte `from`.
fn at_text(source: &str, from: usize, needle: &str, text: String) -> Error {
    match source.get(from..).and_then(|s| s.find(needle)) {
        Some(i) => {
            let i = from + i;
            let line = source[..i].matches('\n').count() + 1;
            let col = i - source[..i].rfind('\n').map_or(0, |p| p + 1) + 1;
            Error::Shader(format!("{line}:{col}: policy: {text}"))
        }
        None => Error::Shader(format!("policy: {text}")),
    }
}

fn contains_atomic(module: &Module, ty: naga::Handle<naga::Type>) -> bool {
    match &module.types[ty].inner {
        TypeInner::Atomic(_) => true,
        TypeInner::Array { base, .. } | TypeInner::BindingArray { base, .. } => contains_atomic(module, *base),
        TypeInner::Struct { members, .. } => members.iter().any(|m| contains_atomic(module, m.ty)),
        _ => false,
    }
}

/// Checks `module`'s entry point `entry` (whose uses `uses` the validator found) against
/// `policy`.
pub(crate) fn check(
    policy: &ShaderPolicy,
    source: &str,
    module: &Module,
    uses: &naga::valid::FunctionInfo,
    entry: &str,
) -> Result<()> {
    if policy.max_source_bytes > 0 && source.len() > policy.max_source_bytes {
        return Err(Error::Shader(format!(
            "policy: the source is {} bytes, over this session's limit of {}",
            source.len(),
            policy.max_source_bytes
        )));
    }
    let Some(ep) = module.entry_points.iter().find(|e| e.name == entry) else {
        return Err(Error::Shader(format!("no entry point named {entry:?}")));
    };
    let fn_at = source.find(&format!("fn {entry}")).unwrap_or(0);
    let wg_at = source[..fn_at].rfind("@workgroup_size").unwrap_or(0);
    let invocations: u64 = ep.workgroup_size.iter().map(|&d| d as u64).product();
    if policy.max_workgroup_invocations > 0 && invocations > policy.max_workgroup_invocations as u64 {
        return Err(at_text(
            source,
            wg_at,
            "@workgroup_size",
            format!(
                "workgroup size {:?} is {invocations} invocations, over this session's limit of {}",
                ep.workgroup_size, policy.max_workgroup_invocations
            ),
        ));
    }
    let mut bindings = 0u32;
    for (h, var) in module.global_variables.iter() {
        if uses[h].is_empty() {
            continue;
        }
        let span = module.global_variables.get_span(h);
        let name = var.name.clone().unwrap_or_default();
        if var.binding.is_some() {
            bindings += 1;
            if policy.max_bindings > 0 && bindings > policy.max_bindings {
                return Err(at(
                    source,
                    span,
                    format!("binding {name:?} is one more than this session's limit of {}", policy.max_bindings),
                ));
            }
        }
        if !policy.allow_atomics && contains_atomic(module, var.ty) {
            return Err(at(source, span, format!("{name:?} holds atomics, which this session may not use")));
        }
        if !policy.allow_workgroup_memory && var.space == AddressSpace::WorkGroup {
            return Err(at(source, span, format!("{name:?} is workgroup memory, which this session may not use")));
        }
    }
    if !policy.allow_f16 {
        let f16 = module.types.iter().any(|(_, t)| match t.inner {
            TypeInner::Scalar(s) | TypeInner::Vector { scalar: s, .. } | TypeInner::Matrix { scalar: s, .. } => {
                s == naga::Scalar::F16
            }
            _ => false,
        });
        if f16 || source.contains("enable f16") {
            return Err(at_text(source, 0, "f16", "f16 is not allowed in this session".into()));
        }
    }
    if !policy.allow_subgroups {
        let functions = module.functions.iter().map(|(_, f)| f).chain(std::iter::once(&ep.function));
        for f in functions {
            for (h, e) in f.expressions.iter() {
                if matches!(
                    e,
                    naga::Expression::SubgroupBallotResult | naga::Expression::SubgroupOperationResult { .. }
                ) {
                    return Err(at(
                        source,
                        f.expressions.get_span(h),
                        "subgroup operations are not allowed in this session".into(),
                    ));
                }
            }
        }
        let subgroup_builtin = ep.function.arguments.iter().any(|a| {
            use naga::BuiltIn::*;
            matches!(
                a.binding,
                Some(naga::Binding::BuiltIn(NumSubgroups | SubgroupId | SubgroupSize | SubgroupInvocationId))
            )
        });
        if subgroup_builtin {
            return Err(at_text(source, fn_at, "subgroup", "subgroup builtins are not allowed in this session".into()));
        }
    }
    Ok(())
}
