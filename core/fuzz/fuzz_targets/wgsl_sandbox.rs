//! Arbitrary bytes as the WGSL of a session's kernel, through everything it meets before the
//! driver (`sandbox_check`: parse, validate, shader policy, memory limits, the loop rewrite,
//! validation of the rewritten module, naga's WGSL writer, parse and validation of its text).
//!
//! Asserted, beyond "no panic": a kernel that validated keeps validating once its loops are
//! bounded, every loop of the rewritten module (and of the WGSL written from it) starts with the
//! budget check (`sandbox_check` answers `Error::Internal` otherwise), and every policy refusal
//! names a line and column of the source. An input with no `@compute` is taken as the body of
//! one (`as_kernel`).
#![no_main]

use kiln_core::session::sandbox_check::sandbox_check;
use kiln_core::{Error, ShaderPolicy};
use libfuzzer_sys::fuzz_target;

/// The name of the first `@compute` function, found in the text (naga is what is under test), or
/// "main" when there is none.
fn entry_of(src: &str) -> &str {
    let Some(at) = src.find("@compute") else { return "main" };
    let rest = &src[at..];
    let Some(f) = rest.find("fn ") else { return "main" };
    let name = rest[f + 3..].trim_start();
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(name.len());
    if end == 0 {
        "main"
    } else {
        &name[..end]
    }
}

/// A tenant's policy that refuses what it can: small workgroups, few bindings, no f16, atomics,
/// workgroup memory or subgroups.
fn strict() -> ShaderPolicy {
    ShaderPolicy {
        max_source_bytes: 0,
        max_workgroup_invocations: 64,
        max_bindings: 2,
        allow_f16: false,
        allow_atomics: false,
        allow_workgroup_memory: false,
        allow_subgroups: false,
    }
}

/// Whether `m` starts with `line:column: ` (both whole numbers from 1).
fn has_line_column(m: &str) -> bool {
    let mut parts = m.splitn(3, ':');
    let whole = |s: Option<&str>| s.and_then(|s| s.parse::<u32>().ok()).is_some_and(|n| n >= 1);
    whole(parts.next()) && whole(parts.next())
}

fn check(src: &str, entry: &str, policy: &ShaderPolicy) -> Result<(), Error> {
    let r = sandbox_check(src, entry, policy);
    match &r {
        Err(Error::Internal(m)) => panic!("broken promise: {m}\n--- source ---\n{src}"),
        Err(Error::Shader(m)) if m.contains("policy:") => {
            // A source over the size limit is refused as a whole, with no place to name.
            let whole_source = m.starts_with("policy: the source is");
            assert!(whole_source || has_line_column(m), "policy error without line:column: {m}\n--- source ---\n{src}");
        }
        Err(Error::Shader(_)) => {}
        Err(e) => panic!("unexpected error kind {:?}: {e}", e.code()),
        Ok(_) => {}
    }
    r.map(|_| ())
}

/// What an input without an entry point becomes: the body of one, with a buffer to write (the
/// seed corpus holds such bodies, so mutations stay among statements and loops instead of
/// spending most runs on text that never parses).
fn as_kernel(src: &str) -> std::borrow::Cow<'_, str> {
    if src.contains("@compute") {
        return src.into();
    }
    format!(
        "@group(0) @binding(0) var<storage, read_write> o: array<u32>;\n\
         @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {{\n{src}\n}}\n"
    )
    .into()
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let src = &*as_kernel(text);
    let entry = entry_of(src);
    let open = check(src, entry, &ShaderPolicy::default());
    // The strict policy only matters for kernels that got past validation.
    let validated = match &open {
        Ok(()) => true,
        Err(Error::Shader(m)) => !(m.contains("parse error") || m.contains("validation error")),
        Err(_) => false,
    };
    if validated {
        let _ = check(src, entry, &strict());
    }
});
