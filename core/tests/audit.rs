//! The audit log: JSON lines for session events, kernel compiles, dispatches, limits and errors,
//! to a callback or a file; off by default; never tensor data or kernel source.

mod common;
use kiln_core::session::{audit_enabled, audit_off, audit_to_callback, audit_to_file};
use kiln_core::{DType, ErrorCode, Kernel, Session, SessionLimits, Tensor};
use serde_json::Value;
use std::sync::{Arc, Mutex};

const SECRET: f32 = 1234.5678;
const KERNEL: &str = "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
    @compute @workgroup_size(4) fn secret_kernel_name(@builtin(global_invocation_id) g: vec3<u32>) {\n\
    for (var i = 0u; i < 3u; i++) { x[g.x] = x[g.x] + 1.0; } }";

/// Everything a session does that the log should show; returns the session's id.
fn workload() -> u64 {
    // Room for the kernel (charged KERNEL_CHARGE_BYTES) and 64 bytes of tensors.
    let s = Session::new(SessionLimits {
        max_bytes: 64 + kiln_core::session::KERNEL_CHARGE_BYTES,
        max_loop_iterations: 10,
        ..Default::default()
    });
    s.run(|| {
        let x = Tensor::from_slice(&[SECRET; 4], &[4]).unwrap();
        let k = Kernel::new(KERNEL, "secret_kernel_name").unwrap();
        k.dispatch(&[&x], None, [1, 1, 1]).unwrap();
        assert_eq!(x.to_vec::<f32>().unwrap(), vec![SECRET + 3.0; 4]);
        let e = Tensor::empty(&[1000], DType::F32).unwrap_err();
        assert_eq!(e.code(), ErrorCode::QuotaExceeded);
        assert!(Kernel::new("not wgsl", "main").is_err());
        let e = k.dispatch(&[], None, [1, 1, 1]).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
    });
    s.close();
    s.id()
}

fn events_of(lines: &[String], session: u64) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .filter(|v| v["session"] == session)
        .collect()
}

#[test]
fn events_go_to_a_callback_then_a_file_and_stop_when_off() {
    assert!(!audit_enabled(), "the audit log is off by default");
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    audit_to_callback(move |l| sink.lock().unwrap().push(l.to_string()));
    let id = workload();
    let got = lines.lock().unwrap().clone();
    let ev = events_of(&got, id);
    let kinds: Vec<&str> = ev.iter().map(|v| v["event"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"session_opened"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"session_closed"), "{kinds:?}");
    for want in ["kernel_compiled", "dispatch", "limit_hit", "error"] {
        assert!(kinds.contains(&want), "no {want} in {kinds:?}");
    }
    let compiled: Vec<&Value> = ev.iter().filter(|v| v["event"] == "kernel_compiled").collect();
    assert_eq!(compiled.len(), 2, "{compiled:?}");
    assert_eq!(compiled[0]["entry"], "secret_kernel_name");
    assert_eq!(compiled[0]["policy"], "allowed");
    assert_eq!(compiled[0]["bounded_loops"], true);
    assert!(compiled[0]["source_hash"].as_str().unwrap().starts_with("fnv1a64:"));
    assert_eq!(compiled[1]["code"], "SHADER");
    let limit = ev.iter().find(|v| v["event"] == "limit_hit").unwrap();
    assert_eq!(limit["code"], "QUOTA_EXCEEDED");
    let error = ev.iter().find(|v| v["event"] == "error").unwrap();
    assert_eq!((&error["code"], &error["during"]), (&Value::from("INVALID_ARGUMENT"), &Value::from("dispatch")));
    let dispatch = ev.iter().find(|v| v["event"] == "dispatch").unwrap();
    assert_eq!(dispatch["workgroups"], serde_json::json!([1, 1, 1]));
    // No tensor data, no source text.
    for l in &got {
        assert!(!l.contains("1234.") && !l.contains("x[g.x]"), "{l}");
        assert!(l.contains("\"ts_ms\""), "{l}");
    }

    let path = std::env::temp_dir().join(format!("kiln-audit-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    audit_to_file(path.to_str().unwrap()).unwrap();
    let id = workload();
    audit_off();
    let n_before_off = std::fs::read_to_string(&path).unwrap().lines().count();
    let _quiet = workload();
    let text = std::fs::read_to_string(&path).unwrap();
    let file_lines: Vec<String> = text.lines().map(String::from).collect();
    assert_eq!(file_lines.len(), n_before_off, "events were written after audit_off");
    assert_eq!(events_of(&file_lines, id).len(), ev.len());
    std::fs::remove_file(&path).unwrap();
    assert!(audit_to_file("/nonexistent-dir/x.jsonl").is_err());
}
