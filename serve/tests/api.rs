//! Every endpoint's happy path against the CPU reference, bad input at every endpoint, tenant
//! isolation, quotas, an infinite loop, metrics.

mod common;

use common::*;
use kiln_core::ops::BinaryOp;
use kiln_core::{reference, DType};
use kiln_serve::npy;
use serde_json::json;
use std::io::{Read, Write};

#[test]
fn sessions_tensors_ops_and_kernels_match_the_reference() {
    let s = start();
    let c = &s.a;
    let sid = c.open_session().unwrap();
    let listed = c.get("/v1/sessions").unwrap().json();
    assert!(listed["sessions"].as_array().unwrap().iter().any(|x| x["id"] == sid));
    for n in [0usize, 1, 7, 257] {
        let (a, b) = (values(n as u64, n), values(1000 + n as u64, n));
        // a as .npy, b as raw bytes.
        let file = npy::encode(DType::F32, &[n], &f32_bytes(&a)).unwrap();
        let r = c.send("POST", &format!("/v1/sessions/{sid}/tensors"), "application/x-npy", file).unwrap();
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.json()["shape"], json!([n]));
        let ia = r.json()["id"].as_u64().unwrap();
        let ib = c.upload_raw(sid, "float32", &[n], f32_bytes(&b)).unwrap();
        // Round trips: .npy and raw downloads give back what was uploaded, bit for bit.
        let d = c.get(&format!("/v1/sessions/{sid}/tensors/{ia}")).unwrap();
        assert_eq!(d.header("content-type"), Some("application/x-npy"));
        let back = npy::decode(&d.body).unwrap();
        assert!(same_f32(&f32s(&back.bytes), &a));
        let d = c.send("GET", &format!("/v1/sessions/{sid}/tensors/{ib}"), "", vec![]).unwrap();
        let d2 = c.get(&format!("/v1/sessions/{sid}/tensors/{ib}?format=raw")).unwrap();
        assert_eq!(d2.header("x-kiln-shape"), Some(n.to_string().as_str()));
        assert!(same_f32(&f32s(&d2.body), &b));
        assert_eq!(npy::decode(&d.body).unwrap().bytes, d2.body);
        // add against the reference.
        let body = json!({"inputs": [{"name": "a", "id": ia}, {"name": "b", "id": ib}], "params": {}});
        let r = c.post_json(&format!("/v1/sessions/{sid}/ops/add"), &body).unwrap();
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        let y = r.json()["id"].as_u64().unwrap();
        let got = f32s(&c.get(&format!("/v1/sessions/{sid}/tensors/{y}?format=raw")).unwrap().body);
        let (a64, b64): (Vec<f64>, Vec<f64>) =
            (a.iter().map(|&x| x as f64).collect(), b.iter().map(|&x| x as f64).collect());
        let (want, shape) = reference::elementwise::binary(BinaryOp::Add, &a64, &[n], &b64, &[n], DType::F32).unwrap();
        assert_eq!(shape, vec![n]);
        let want: Vec<f32> = want.iter().map(|&x| x as f32).collect();
        assert!(same_f32(&got, &want), "add n={n}");
        assert_eq!(c.delete(&format!("/v1/sessions/{sid}/tensors/{y}")).unwrap().status, 200);
        assert_eq!(c.get(&format!("/v1/sessions/{sid}/tensors/{y}")).unwrap().status, 404);
    }
    // matmul of awkward shapes against the reference, with a tolerance (summation order).
    let (m, k, n) = (3usize, 67usize, 5usize);
    let (a, b) = (values(5, m * k).iter().map(|x| x.clamp(-10.0, 10.0)).collect::<Vec<_>>(), values(6, k * n));
    let b: Vec<f32> = b.iter().map(|x| if x.is_finite() { x.clamp(-10.0, 10.0) } else { 1.0 }).collect();
    let a: Vec<f32> = a.iter().map(|x| if x.is_nan() { 0.5 } else { *x }).collect();
    let ia = c.upload_raw(sid, "float32", &[m, k], f32_bytes(&a)).unwrap();
    let ib = c.upload_raw(sid, "float32", &[k, n], f32_bytes(&b)).unwrap();
    let body = json!({"inputs": [{"name": "a", "id": ia}, {"name": "b", "id": ib}]});
    let r = c.post_json(&format!("/v1/sessions/{sid}/ops/matmul"), &body).unwrap();
    assert_eq!(r.json()["shape"], json!([m, n]));
    let got = f32s(&c.get(&format!("/v1/sessions/{sid}/tensors/{}?format=raw", r.json()["id"])).unwrap().body);
    let to64 = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
    let (want, _) = reference::matmul::matmul(&to64(&a), &[m, k], &to64(&b), &[k, n]).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert!(((*g as f64) - w).abs() <= 1e-3 + 1e-4 * w.abs(), "matmul: {g} vs {w}");
    }
    // sum with parameters.
    let body = json!({"inputs": [{"name": "x", "id": ia}], "params": {"axes": [1], "keepdims": false}});
    let r = c.post_json(&format!("/v1/sessions/{sid}/ops/sum"), &body).unwrap();
    let got = f32s(&c.get(&format!("/v1/sessions/{sid}/tensors/{}?format=raw", r.json()["id"])).unwrap().body);
    let (want, shape) = reference::reduce::sum(&to64(&a), &[m, k], Some(&[1]), false, DType::F32).unwrap();
    assert_eq!(shape, vec![m]);
    for (g, w) in got.iter().zip(&want) {
        assert!(((*g as f64) - w).abs() <= 1e-3 + 1e-5 * w.abs(), "sum: {g} vs {w}");
    }
    // A kernel compiled in the session and dispatched: y = 2x + 1 over 300 elements.
    let src = r#"
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&x)) { y[id.x] = 2.0 * x[id.x] + 1.0; }
}"#;
    let x = values(9, 300);
    let ix = c.upload_raw(sid, "float32", &[300], f32_bytes(&x)).unwrap();
    let iy = c.upload_raw(sid, "float32", &[300], vec![0; 1200]).unwrap();
    let r = c.post_json(&format!("/v1/sessions/{sid}/kernels"), &json!({"source": src, "entry": "main"})).unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let kid = r.json()["id"].as_u64().unwrap();
    let body = json!({"tensors": [ix, iy], "workgroups": [5, 1, 1]});
    let r = c.post_json(&format!("/v1/sessions/{sid}/kernels/{kid}/dispatch"), &body).unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let got = f32s(&c.get(&format!("/v1/sessions/{sid}/tensors/{iy}?format=raw")).unwrap().body);
    let want: Vec<f32> = x.iter().map(|v| 2.0 * v + 1.0).collect();
    assert!(same_f32(&got, &want));
    // Stats count the work; listing the tensors shows them; closing frees everything.
    let st = c.get(&format!("/v1/sessions/{sid}")).unwrap().json();
    assert!(st["dispatches"].as_u64().unwrap() > 0 && st["bytes_in_use"].as_u64().unwrap() > 0, "{st}");
    assert_eq!(st["kernels_compiled"], 1);
    let listed = c.get(&format!("/v1/sessions/{sid}/tensors")).unwrap().json();
    assert_eq!(listed["tensors"].as_array().unwrap().len() as u64, st["tensors"].as_u64().unwrap());
    assert_eq!(c.delete(&format!("/v1/sessions/{sid}")).unwrap().status, 200);
    assert_eq!(c.get(&format!("/v1/sessions/{sid}")).unwrap().status, 404);
}

fn expect(r: kiln_serve::client::Reply, status: u16, code: &str) {
    assert_eq!((r.status, r.code().as_str()), (status, code), "{}", String::from_utf8_lossy(&r.body));
    let msg = r.json()["error"]["message"].as_str().unwrap_or("").to_string();
    assert!(!msg.is_empty() && !msg.contains("/work") && !msg.contains(".rs"), "{msg}");
}

#[test]
fn bad_input_gets_a_clear_4xx_and_the_server_stays_up() {
    let s = start();
    let c = &s.a;
    let sid = c.open_session().unwrap();
    let t = c.upload_raw(sid, "float32", &[4], vec![0; 16]).unwrap();
    // Auth, at every /v1 route.
    for (m, p) in [
        ("POST", "/v1/sessions".to_string()),
        ("GET", "/v1/sessions".into()),
        ("GET", format!("/v1/sessions/{sid}")),
        ("DELETE", format!("/v1/sessions/{sid}")),
        ("POST", format!("/v1/sessions/{sid}/tensors")),
        ("GET", format!("/v1/sessions/{sid}/tensors/{t}")),
        ("POST", format!("/v1/sessions/{sid}/ops/add")),
        ("POST", format!("/v1/sessions/{sid}/kernels")),
        ("POST", format!("/v1/sessions/{sid}/kernels/1/dispatch")),
    ] {
        expect(s.anon.send(m, &p, "", vec![]).unwrap(), 401, "UNAUTHORIZED");
        expect(c.with_token(Some("wrong-token-0123456789")).send(m, &p, "", vec![]).unwrap(), 401, "UNAUTHORIZED");
    }
    // Ids that are not numbers, or not there.
    expect(c.get("/v1/sessions/abc").unwrap(), 404, "NOT_FOUND");
    expect(c.get("/v1/sessions/99999").unwrap(), 404, "NOT_FOUND");
    expect(c.get(&format!("/v1/sessions/{sid}/tensors/-1")).unwrap(), 404, "NOT_FOUND");
    expect(c.delete(&format!("/v1/sessions/{sid}/tensors/424242")).unwrap(), 404, "NOT_FOUND");
    expect(c.post_json(&format!("/v1/sessions/{sid}/kernels/77/dispatch"), &json!({})).unwrap(), 404, "NOT_FOUND");
    expect(c.get("/v2/nothing").unwrap(), 404, "NOT_FOUND");
    expect(c.send("PUT", "/v1/sessions", "", vec![]).unwrap(), 405, "METHOD_NOT_ALLOWED");
    // Uploads: truncated, huge declared sizes, bad dtypes and shapes, not .npy, too large.
    let up = |q: &str, body: Vec<u8>| c.send("POST", &format!("/v1/sessions/{sid}/tensors{q}"), "", body).unwrap();
    expect(up("?dtype=float32&shape=4", vec![0; 15]), 400, "BAD_REQUEST");
    expect(up("?dtype=float32&shape=4611686018427387904,4", vec![0; 16]), 400, "BAD_REQUEST");
    expect(up("?dtype=float32&shape=99999999999999999999999", vec![]), 400, "BAD_REQUEST");
    expect(up("?dtype=complex64&shape=1", vec![0; 8]), 400, "BAD_REQUEST");
    expect(up("?dtype=float32", vec![0; 4]), 400, "BAD_REQUEST");
    expect(up("?format=xml", vec![]), 400, "BAD_REQUEST");
    expect(up("?bogus=1", vec![]), 400, "BAD_REQUEST");
    expect(up("", b"not an npy file".to_vec()), 400, "BAD_REQUEST");
    let file = npy::encode(DType::F32, &[4], &[0; 16]).unwrap();
    expect(up("", file[..file.len() - 3].to_vec()), 400, "BAD_REQUEST");
    let huge = String::from_utf8_lossy(&file).replace("(4,)", "(4611686018427387904,)").into_bytes();
    expect(up("", huge), 400, "BAD_REQUEST");
    // A declared length over the 1 MiB limit is refused before the body is read (so the body
    // is not even sent here).
    let mut raw = std::net::TcpStream::connect(s.running.as_ref().unwrap().api_addr).unwrap();
    let head = format!(
        "POST /v1/sessions/{sid}/tensors?dtype=uint8&shape=2000000 HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN_A}\r\ncontent-length: 2000000\r\nconnection: close\r\n\r\n"
    );
    raw.write_all(head.as_bytes()).unwrap();
    let mut reply = String::new();
    let _ = raw.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 413") && reply.contains("PAYLOAD_TOO_LARGE"), "{reply}");
    // The same without a Content-Length (chunked): caught while reading.
    let mut raw = std::net::TcpStream::connect(s.running.as_ref().unwrap().api_addr).unwrap();
    let head = format!(
        "POST /v1/sessions/{sid}/tensors?dtype=uint8&shape=1 HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN_A}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    );
    raw.write_all(head.as_bytes()).unwrap();
    let chunk = vec![b'a'; 65536];
    for _ in 0..17 {
        if raw.write_all(format!("{:x}\r\n", chunk.len()).as_bytes()).is_err() || raw.write_all(&chunk).is_err() {
            break;
        }
        let _ = raw.write_all(b"\r\n");
    }
    let _ = raw.write_all(b"0\r\n\r\n");
    let mut reply = String::new();
    let _ = raw.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 413") && reply.contains("PAYLOAD_TOO_LARGE"), "{reply}");
    // JSON bodies.
    let op = |name: &str, body: &[u8]| {
        c.send("POST", &format!("/v1/sessions/{sid}/ops/{name}"), "application/json", body.to_vec()).unwrap()
    };
    expect(op("add", b"{not json"), 400, "BAD_REQUEST");
    expect(op("add", b"{\"inputs\": 3}"), 400, "BAD_REQUEST");
    expect(op("add", b"{\"inputz\": []}"), 400, "BAD_REQUEST");
    expect(op("no_such_op", b"{}"), 400, "INVALID_ARGUMENT");
    expect(op("add", b"{\"inputs\": [{\"name\": \"a\", \"id\": 999}]}"), 404, "NOT_FOUND");
    expect(
        op("add", format!("{{\"inputs\": [{{\"name\": \"a\", \"id\": {t}}}]}}").as_bytes()),
        400,
        "INVALID_ARGUMENT",
    );
    let t3 = c.upload_raw(sid, "float32", &[3], vec![0; 12]).unwrap();
    let body = format!("{{\"inputs\": [{{\"name\": \"a\", \"id\": {t}}}, {{\"name\": \"b\", \"id\": {t3}}}]}}");
    expect(op("add", body.as_bytes()), 400, "SHAPE_MISMATCH");
    expect(op("zeros", b"{\"params\": {\"shape\": [-1], \"dtype\": \"float32\"}}"), 400, "INVALID_ARGUMENT");
    // Kernels: invalid WGSL, bad dispatches.
    let k = |body: serde_json::Value| c.post_json(&format!("/v1/sessions/{sid}/kernels"), &body).unwrap();
    expect(k(json!({"source": "fn main( {", "entry": "main"})), 400, "SHADER");
    expect(k(json!({"source": 5})), 400, "BAD_REQUEST");
    let src = "@group(0) @binding(0) var<storage, read_write> y: array<f32>;\n@compute @workgroup_size(1) fn main() { y[0] = 1.0; }";
    let kid = k(json!({"source": src})).json()["id"].as_u64().unwrap();
    let d =
        |body: serde_json::Value| c.post_json(&format!("/v1/sessions/{sid}/kernels/{kid}/dispatch"), &body).unwrap();
    expect(d(json!({"tensors": [t], "workgroups": [1, 1]})), 400, "BAD_REQUEST");
    expect(d(json!({"tensors": [t], "workgroups": [1, 1, 1], "uniforms": "zz"})), 400, "BAD_REQUEST");
    expect(d(json!({"tensors": [12345], "workgroups": [1, 1, 1]})), 404, "NOT_FOUND");
    expect(d(json!({"tensors": [], "workgroups": [1, 1, 1]})), 400, "INVALID_ARGUMENT");
    // Downloads.
    expect(c.get(&format!("/v1/sessions/{sid}/tensors/{t}?format=csv")).unwrap(), 400, "BAD_REQUEST");
    // Still serving, and the tenant's session still works.
    assert_eq!(c.get("/health").unwrap().status, 200);
    assert_eq!(c.get(&format!("/v1/sessions/{sid}/tensors/{t}?format=raw")).unwrap().body, vec![0; 16]);
}

#[test]
fn another_tenants_ids_answer_like_ids_that_never_existed() {
    let s = start();
    let sid = s.a.open_session().unwrap();
    let t = s.a.upload_raw(sid, "float32", &[2], f32_bytes(&[1.5, 2.5])).unwrap();
    let paths = [
        format!("/v1/sessions/{sid}"),
        format!("/v1/sessions/{sid}/tensors"),
        format!("/v1/sessions/{sid}/tensors/{t}"),
    ];
    let seen: Vec<_> = paths.iter().map(|p| s.b.get(p).unwrap()).collect();
    for r in &seen {
        expect(kiln_serve::client::Reply { status: r.status, body: r.body.clone(), headers: vec![] }, 404, "NOT_FOUND");
    }
    // b cannot delete, upload into, or run ops in a's session either; a's data is intact.
    expect(s.b.delete(&format!("/v1/sessions/{sid}/tensors/{t}")).unwrap(), 404, "NOT_FOUND");
    expect(s.b.delete(&format!("/v1/sessions/{sid}")).unwrap(), 404, "NOT_FOUND");
    expect(
        s.b.send("POST", &format!("/v1/sessions/{sid}/tensors?dtype=float32&shape=1"), "", vec![0; 4]).unwrap(),
        404,
        "NOT_FOUND",
    );
    let listed = s.b.get("/v1/sessions").unwrap().json();
    assert!(!listed.to_string().contains(&format!("\"id\":{sid}")), "{listed}");
    assert_eq!(f32s(&s.a.get(&format!("/v1/sessions/{sid}/tensors/{t}?format=raw")).unwrap().body), vec![1.5, 2.5]);
    // Once a's session is gone, the same paths answer b exactly as before.
    s.a.delete(&format!("/v1/sessions/{sid}")).unwrap();
    for (p, before) in paths.iter().zip(&seen) {
        let after = s.b.get(p).unwrap();
        assert_eq!((after.status, &after.body), (before.status, &before.body), "{p}");
    }
    // A second token of b acts as b.
    let b2 = s.b.with_token(Some("tenant-b-second-token-0123"));
    let bs = s.b.open_session().unwrap();
    assert_eq!(b2.get(&format!("/v1/sessions/{bs}")).unwrap().status, 200);
}

#[test]
fn quotas_and_limits_answer_their_codes_and_nothing_else_changes() {
    let s = start();
    let sid = s.b.open_session().unwrap();
    let small = s.b.upload_raw(sid, "float32", &[1024], vec![7; 4096]).unwrap();
    // 64 KiB quota: a 128 KiB upload and a 1 MiB zeros are refused.
    let r =
        s.b.send("POST", &format!("/v1/sessions/{sid}/tensors?dtype=float32&shape=32768"), "", vec![0; 131072])
            .unwrap();
    expect(r, 429, "QUOTA_EXCEEDED");
    let r = s.b.post_json(
        &format!("/v1/sessions/{sid}/ops/zeros"),
        &json!({"params": {"shape": [262144], "dtype": "float32"}}),
    );
    expect(r.unwrap(), 429, "QUOTA_EXCEEDED");
    let st = s.b.get(&format!("/v1/sessions/{sid}")).unwrap().json();
    assert_eq!(st["quota_exceeded"], 2, "{st}");
    assert_eq!(s.b.get(&format!("/v1/sessions/{sid}/tensors/{small}?format=raw")).unwrap().body, vec![7; 4096]);
    // Two sessions at most.
    s.b.open_session().unwrap();
    expect(s.b.send("POST", "/v1/sessions", "", vec![]).unwrap(), 429, "TOO_MANY_SESSIONS");
    // The shader policy: atomics are off by default.
    let src = "@group(0) @binding(0) var<storage, read_write> y: array<atomic<u32>>;\n@compute @workgroup_size(1) fn main() { atomicAdd(&y[0], 1u); }";
    expect(s.b.post_json(&format!("/v1/sessions/{sid}/kernels"), &json!({"source": src})).unwrap(), 400, "SHADER");
    // Tenant a is untouched by all of it.
    let a = s.a.open_session().unwrap();
    assert!(s.a.upload_raw(a, "float32", &[32768], vec![0; 131072]).is_ok());
}

#[test]
fn an_infinite_loop_answers_compute_limit_and_the_server_keeps_serving() {
    let s = start();
    // In tenant a: a kernel is charged 256 KiB (KERNEL_CHARGE_BYTES), past tenant b's 64 KiB.
    let sid = s.a.open_session().unwrap();
    let out = s.a.upload_raw(sid, "float32", &[64], vec![0; 256]).unwrap();
    let r = s.a.post_json(&format!("/v1/sessions/{sid}/kernels"), &json!({"source": kiln_serve::load::INFINITE_LOOP}));
    let kid = r.unwrap().json()["id"].as_u64().unwrap();
    for _ in 0..2 {
        let r = s.a.post_json(
            &format!("/v1/sessions/{sid}/kernels/{kid}/dispatch"),
            &json!({"tensors": [out], "workgroups": [1, 1, 1]}),
        );
        expect(r.unwrap(), 429, "COMPUTE_LIMIT");
    }
    expect(s.a.get(&format!("/v1/sessions/{sid}/tensors/{out}")).unwrap(), 429, "COMPUTE_LIMIT");
    let other = s.b.open_session().unwrap();
    let x = s.b.upload_raw(other, "float32", &[3], f32_bytes(&[1.0, -2.0, 0.5])).unwrap();
    let r =
        s.b.post_json(&format!("/v1/sessions/{other}/ops/abs"), &json!({"inputs": [{"name": "x", "id": x}]})).unwrap();
    let y = r.json()["id"].as_u64().unwrap();
    assert_eq!(
        f32s(&s.b.get(&format!("/v1/sessions/{other}/tensors/{y}?format=raw")).unwrap().body),
        vec![1.0, 2.0, 0.5]
    );
    assert_eq!(s.a.get("/ready").unwrap().status, 200);
    let st = s.a.get(&format!("/v1/sessions/{sid}")).unwrap().json();
    assert!(st["compute_limit_hits"].as_u64().unwrap() >= 2, "{st}");
}

#[test]
fn metrics_merge_the_runtime_and_the_service() {
    let s = start();
    let sid = s.a.open_session().unwrap();
    s.anon.get("/v1/sessions").unwrap();
    let m = s.metrics();
    assert!(m.contains("kiln_sessions_open"), "{m}");
    assert!(m.contains(r#"kiln_serve_requests_total{route="/v1/sessions",status="201",tenant="a"} 1"#), "{m}");
    assert!(m.contains(r#"kiln_serve_requests_total{route="/v1/sessions",status="401",tenant="-"} 1"#), "{m}");
    assert!(m.contains("kiln_serve_request_seconds_bucket"), "{m}");
    assert!(m.contains("kiln_serve_requests_in_flight 0"), "{m}");
    // The open session's own runtime samples.
    assert!(m.contains("kiln_session_bytes_in_use{session="), "{m}");
    s.a.delete(&format!("/v1/sessions/{sid}")).unwrap();
    let addr = s.running.as_ref().unwrap().metrics_addr;
    let probe = kiln_serve::client::Client::new(addr, None);
    assert_eq!(probe.get("/health").unwrap().status, 200);
    assert_eq!(probe.get("/ready").unwrap().status, 200);
}

#[test]
fn a_tenant_with_every_slot_busy_waits_alone_and_times_out_alone() {
    let s = start_with(&config_text("").replace("request_timeout_ms = 60000", "request_timeout_ms = 300"));
    let state = s.running.as_ref().unwrap().state.clone();
    let b_tenant = state.tenant_for(TOKEN_B).unwrap();
    let (sa, sb) = (s.a.open_session().unwrap(), s.b.open_session().unwrap());
    // Every slot of b is taken (as by b's own long-running work).
    let held = s.rt.block_on(b_tenant.permits.clone().acquire_owned()).unwrap();
    let r = s.b.send("POST", &format!("/v1/sessions/{sb}/tensors?dtype=float32&shape=1"), "", vec![0; 4]).unwrap();
    expect(r, 504, "TIMEOUT");
    // a is not behind b's queue.
    let t = s.a.upload_raw(sa, "float32", &[2], f32_bytes(&[3.0, 4.0])).unwrap();
    assert_eq!(f32s(&s.a.get(&format!("/v1/sessions/{sa}/tensors/{t}?format=raw")).unwrap().body), vec![3.0, 4.0]);
    drop(held);
    assert!(s.b.upload_raw(sb, "float32", &[1], vec![0; 4]).is_ok());
}
