//! The pre-driver path of a session's kernel (`sandbox_check`, what the cargo-fuzz target
//! core/fuzz/fuzz_targets/wgsl_sandbox.rs drives): kernels of every loop shape keep validating
//! once bounded, every loop gets the budget check, policy refusals name a line, and what the
//! fuzzer found stays fixed. No device needed.

use kiln_core::session::sandbox_check::{sandbox_check, SandboxReport};
use kiln_core::{Error, Result, ShaderPolicy};

fn open(src: &str) -> Result<SandboxReport> {
    sandbox_check(src, "main", &ShaderPolicy::default())
}

const OUT: &str = "@group(0) @binding(0) var<storage, read_write> o: array<u32>;\n";

/// (name, body after `OUT`, loops): every way WGSL spells a loop, nested, in helpers, with
/// `continue`, `break if`, switches and barriers.
const LOOPS: &[(&str, &str, usize)] = &[
    ("loop", "@compute @workgroup_size(1) fn main() { var i = 0u; loop { if i > 4u { break; } o[i] = i; i += 1u; } }", 1),
    ("for", "@compute @workgroup_size(1) fn main() { for (var i = 0u; i < 4u; i++) { o[i] = i; } }", 1),
    ("while in helper", "fn h(n: u32) -> u32 { var s = 0u; while s < n { s += 1u; } return s; }\n@compute @workgroup_size(1) fn main() { o[0] = h(o[1]); }", 1),
    (
        "break if",
        "@compute @workgroup_size(1) fn main() { var i = 0u; loop { o[i] = i; continuing { i += 1u; break if i > 3u; } } }",
        1,
    ),
    (
        "continue in switch",
        "@compute @workgroup_size(1) fn main() { for (var i = 0u; i < 4u; i++) { switch i { case 1u: { continue; } default: { o[i] = i; } } } }",
        1,
    ),
    (
        "nested in if and helpers",
        "fn a(n: u32) -> u32 { var s = 0u; for (var i = 0u; i < n; i++) { for (var j = 0u; j < i; j++) { s += j; } } return s; }\n\
         fn b(n: u32) -> u32 { var s = 0u; loop { if s >= n { break; } s += a(s); s += 1u; } return s; }\n\
         @compute @workgroup_size(1) fn main() { if o[0] > 0u { o[1] = b(o[2]); } else { while o[3] < 9u { o[3] += a(2u); } } }",
        4,
    ),
    (
        "barrier in loop",
        "var<workgroup> w: array<u32, 64>;\n@compute @workgroup_size(64) fn main(@builtin(local_invocation_index) l: u32) { for (var i = 0u; i < 4u; i++) { w[l] = i; workgroupBarrier(); o[l] += w[63u - l]; workgroupBarrier(); } }",
        1,
    ),
    (
        "the rewrite's own names taken",
        "var<private> kiln_loop_left: u32;\n@group(0) @binding(1) var<storage, read_write> kiln_loop_guard: array<u32>;\n@compute @workgroup_size(1) fn main() { for (var i = 0u; i < 4u; i++) { kiln_loop_guard[i] = kiln_loop_left; o[i] = i; } }",
        1,
    ),
];

#[test]
fn every_loop_shape_is_bounded_and_still_validates() {
    for (name, body, loops) in LOOPS {
        let src = format!("{OUT}{body}");
        let r = open(&src).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(r.loops, *loops, "{name}");
        let wgsl = r.bounded_wgsl.as_deref().unwrap_or_else(|| panic!("{name}: not rewritten"));
        // One exhausted-budget flag per loop in the text the driver gets (`sandbox_check` checked
        // that each loop starts with one).
        assert_eq!(wgsl.matches("[1] = 1u;").count(), *loops, "{name}: {wgsl}");
        let highest = if src.contains("@binding(1)") { 1 } else { 0 };
        assert_eq!(r.guard_binding, Some(highest + 1), "{name}");
    }
}

#[test]
fn a_kernel_without_loops_is_compiled_as_written() {
    let r = open(&format!("{OUT}@compute @workgroup_size(1) fn main() {{ o[0] = 1u; }}")).unwrap();
    assert_eq!(r, SandboxReport { loops: 0, bounded_wgsl: None, guard_binding: None });
}

/// Found driving the sandbox path: naga accepts `@binding(4294967295)`, and the rewrite put the budget
/// buffer at binding + 1 (an overflow panic; in release builds a wrap to 0).
#[test]
fn the_last_binding_number_is_an_error_not_a_panic() {
    let src = "@group(0) @binding(4294967295) var<storage, read_write> o: array<u32>;\n\
               @compute @workgroup_size(1) fn main() { for (var i = 0u; i < 4u; i++) { o[i] = i; } }";
    match open(src) {
        Err(Error::Shader(m)) => {
            assert!(!m.contains("panicked"), "{m}");
            assert!(m.contains("4294967295") && m.contains("loop budget"), "{m}");
        }
        other => panic!("expected a SHADER error, got {other:?}"),
    }
    // Without a loop there is nothing to bind, so the same binding is fine.
    let no_loop = "@group(0) @binding(4294967295) var<storage, read_write> o: array<u32>;\n\
                   @compute @workgroup_size(1) fn main() { o[0] = 1u; }";
    assert!(open(no_loop).is_ok());
}

fn strict() -> ShaderPolicy {
    ShaderPolicy {
        max_source_bytes: 0,
        max_workgroup_invocations: 64,
        max_bindings: 1,
        allow_f16: false,
        allow_atomics: false,
        allow_workgroup_memory: false,
        allow_subgroups: false,
    }
}

#[test]
fn policy_refusals_name_the_line() {
    let cases = [
        ("@compute @workgroup_size(8, 16) fn main() { o[0] = 1u; }", 1, "workgroup size"),
        ("@group(0) @binding(1) var<storage, read_write> p: array<u32>;\n@compute @workgroup_size(1) fn main() { o[0] = p[0]; }", 1, "binding"),
        ("var<workgroup> w: u32;\n@compute @workgroup_size(1) fn main() { w = 1u; o[0] = w; }", 1, "workgroup memory"),
        ("enable f16;\n@compute @workgroup_size(1) fn main() { o[0] = u32(f16(2.0)); }", 1, "f16"),
    ];
    for (body, line, what) in cases {
        // `enable` must come first.
        let src = if body.starts_with("enable") {
            body.replacen('\n', &format!("\n{OUT}"), 1)
        } else {
            format!("{OUT}{body}")
        };
        let line = if body.starts_with("enable") { line } else { line + 1 };
        match sandbox_check(&src, "main", &strict()) {
            Err(Error::Shader(m)) => {
                assert!(m.starts_with(&format!("{line}:")) && m.contains("policy:") && m.contains(what), "{src}\n{m}")
            }
            other => panic!("{src}: expected a policy refusal, got {other:?}"),
        }
    }
}
