//! Sessions on two real devices: Mesa's llvmpipe through Vulkan (lavapipe) and through OpenGL,
//! both listed with `KILN_BACKENDS=vulkan,gl` (read once, when the runtime starts: this file is a
//! test binary of its own, and its one test sets it before anything touches the runtime).
//! Placement (fewest sessions first), pinning by request and by tenant config, bad devices, ops,
//! creation ops and kernels running on the session's device (the tensors' own device, and the
//! device's memory counters), and the per-device metrics.

mod common;

use common::*;
use kiln_core::ops::BinaryOp;
use kiln_core::{reference, DType};
use kiln_serve::client::{Client, Reply};
use serde_json::{json, Value};

fn open(c: &Client, body: Option<Value>) -> Reply {
    match body {
        Some(b) => c.post_json("/v1/sessions", &b).unwrap(),
        None => c.send("POST", "/v1/sessions", "", vec![]).unwrap(),
    }
}

/// (session id, device) of a 201 answer.
fn placed(r: &Reply) -> (u64, u64) {
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    (r.json()["id"].as_u64().unwrap(), r.json()["device"].as_u64().unwrap())
}

/// Finite values without subnormals (OpenGL drivers may flush those), some NaN and infinities.
fn plain_values(seed: u64, n: usize) -> Vec<f32> {
    values(seed, n).into_iter().map(|x| if x != 0.0 && x.abs() < 1e-30 { 0.25 } else { x.min(1e6) }).collect()
}

fn metric(text: &str, name: &str, device: u64) -> f64 {
    let prefix = format!("{name}{{");
    text.lines()
        .find(|l| l.starts_with(&prefix) && l.contains(&format!("device=\"{device}\"")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} for device {device} in:\n{text}"))
}

/// Every kind of work in session `sid` (on `device`): each tensor it makes must live there, and
/// its values must match the reference.
fn work_in(c: &Client, sid: u64, device: u64) {
    let n = 257;
    let (a, b) = (plain_values(device, n), plain_values(100 + device, n));
    let up = |v: &[f32]| {
        let r = c
            .send(
                "POST",
                &format!("/v1/sessions/{sid}/tensors?dtype=float32&shape={}", v.len()),
                "application/octet-stream",
                f32_bytes(v),
            )
            .unwrap();
        assert_eq!(
            (r.status, r.json()["device"].as_u64()),
            (201, Some(device)),
            "{}",
            String::from_utf8_lossy(&r.body)
        );
        r.json()["id"].as_u64().unwrap()
    };
    let (ia, ib) = (up(&a), up(&b));
    let op = |name: &str, body: Value| {
        let r = c.post_json(&format!("/v1/sessions/{sid}/ops/{name}"), &body).unwrap();
        assert_eq!(r.status, 201, "{name}: {}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.json()["device"].as_u64(), Some(device), "{name} ran off the session's device");
        r.json()["id"].as_u64().unwrap()
    };
    let read = |id: u64| f32s(&c.get(&format!("/v1/sessions/{sid}/tensors/{id}?format=raw")).unwrap().body);
    // An op with inputs.
    let y = op("add", json!({"inputs": [{"name": "a", "id": ia}, {"name": "b", "id": ib}], "params": {}}));
    let to64 = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
    let (want, _) =
        reference::elementwise::binary(BinaryOp::Add, &to64(&a), &[n], &to64(&b), &[n], DType::F32).unwrap();
    let want: Vec<f32> = want.iter().map(|&x| x as f32).collect();
    assert!(same_f32(&read(y), &want), "add on device {device}");
    // An op without inputs: made on the default device, then moved to the session's.
    let y = op("arange", json!({"inputs": [], "params": {"start": 3, "stop": 40, "step": 3, "dtype": "float32"}}));
    let want: Vec<f32> = (0..13).map(|i| 3.0 + 3.0 * i as f32).collect();
    assert_eq!(read(y), want, "arange on device {device}");
    // A kernel compiled and dispatched on the session's device.
    let src = r#"
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&x)) { y[id.x] = 2.0 * x[id.x] + 1.0; }
}"#;
    let iy = up(&vec![0.0; n]);
    let r = c.post_json(&format!("/v1/sessions/{sid}/kernels"), &json!({"source": src, "entry": "main"})).unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let kid = r.json()["id"].as_u64().unwrap();
    let body = json!({"tensors": [ia, iy], "workgroups": [5, 1, 1]});
    let r = c.post_json(&format!("/v1/sessions/{sid}/kernels/{kid}/dispatch"), &body).unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let want: Vec<f32> = a.iter().map(|v| 2.0 * v + 1.0).collect();
    assert!(same_f32(&read(iy), &want), "kernel on device {device}");
}

/// Bytes held by live tensors on adapter `index`.
fn in_use(index: u64) -> u64 {
    let d = kiln_core::device::live_devices().into_iter().find(|d| d.info().index as u64 == index);
    d.map(|d| d.memory_stats().in_use_bytes).unwrap_or(0)
}

#[test]
fn sessions_spread_over_two_devices_land_where_pinned_and_run_there() {
    std::env::set_var("KILN_BACKENDS", "vulkan,gl");
    std::env::remove_var("KILN_ADAPTER");
    let adapters = kiln_core::adapters();
    assert!(adapters.len() >= 2, "two adapters expected (lavapipe and llvmpipe's GL): {adapters:?}");

    // A config naming an adapter this machine lacks does not start; nor one pinning a tenant to
    // a device the server does not serve.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let cfg = kiln_serve::config::parse(&format!("devices = [0, 9]\n{}", config_text(""))).unwrap();
    let e = rt.block_on(kiln_serve::start(cfg)).err().expect("a server on adapter 9 started").to_string();
    assert!(e.contains("adapter 9") && e.contains("kiln devices"), "{e}");
    let e = kiln_serve::config::parse(&format!("devices = [1]\n{}", config_text("devices = [0]"))).unwrap_err();
    assert!(e.contains("device 0"), "{e}");
    assert!(kiln_serve::config::parse(&config_text("devices = []")).is_err());

    // By default a server serves every adapter of the best kind through the best backend: here
    // lavapipe only (llvmpipe's GL is the same CPU through another backend).
    let one = start_with(&config_text(""));
    let h = one.anon.get("/health").unwrap().json();
    assert_eq!(h["devices"].as_array().unwrap().len(), 1, "{h}");
    assert_eq!(h["devices"][0]["backend"], "vulkan", "{h}");
    drop(one);

    // Both, named in the config; tenant b may use device 0 only.
    let s = start_with(&format!("devices = [1, 0, 1]\n{}", config_text("devices = [0]")));
    let h = s.anon.get("/health").unwrap().json();
    let listed: Vec<u64> = h["devices"].as_array().unwrap().iter().map(|d| d["index"].as_u64().unwrap()).collect();
    assert_eq!(listed, vec![0, 1], "{h}");
    let c = &s.a;

    // The first device this process opens is adapter 1: the metrics label it by its adapter
    // index, not by the order devices were opened in.
    let (first, _) = placed(&open(c, Some(json!({"device": 1}))));
    c.upload_raw(first, "float32", &[4], vec![0; 16]).unwrap();
    let text = s.metrics();
    let labelled = |d: &str| {
        text.lines().any(|l| l.starts_with("kiln_device_allocated_bytes{") && l.contains(&format!("device=\"{d}\"")))
    };
    assert!(labelled("1") && !labelled("0"), "{text}");
    assert_eq!(c.delete(&format!("/v1/sessions/{first}")).unwrap().status, 200);
    assert_eq!(s.anon.get("/ready").unwrap().status, 200);

    // Unpinned sessions go to the device with the fewest: 0, 1, 0, 1.
    let mut sessions: Vec<(u64, u64)> = (0..4).map(|_| placed(&open(c, None))).collect();
    assert_eq!(sessions.iter().map(|s| s.1).collect::<Vec<_>>(), vec![0, 1, 0, 1]);
    // Pinned by the request: where asked, whatever the load; then the next unpinned one evens out.
    sessions.push(placed(&open(c, Some(json!({"device": 1})))));
    sessions.push(placed(&open(c, Some(json!({"device": 1})))));
    assert_eq!((sessions[4].1, sessions[5].1), (1, 1));
    sessions.push(placed(&open(c, Some(json!({})))));
    assert_eq!(sessions[6].1, 0, "the less loaded device");
    // Bad devices: 400 with a message that says what is wrong, and nothing opened.
    let before = c.get("/v1/sessions").unwrap().json()["sessions"].as_array().unwrap().len();
    for (body, code, says) in [
        (json!({"device": 7}), "INVALID_ARGUMENT", "device 7"),
        (json!({"device": 2}), "INVALID_ARGUMENT", "[0, 1]"),
        (json!({"device": -1}), "BAD_REQUEST", "device"),
        (json!({"device": "gpu"}), "BAD_REQUEST", "device"),
        (json!({"device": 1.5}), "BAD_REQUEST", "device"),
        (json!({"device": 1e30}), "BAD_REQUEST", "device"),
        (json!({"devices": 1}), "BAD_REQUEST", "unknown field"),
        (json!([1]), "BAD_REQUEST", "session request"),
    ] {
        let r = open(c, Some(body.clone()));
        assert_eq!((r.status, r.code().as_str()), (400, code), "{body}: {}", String::from_utf8_lossy(&r.body));
        let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(msg.contains(says), "{body}: {msg}");
    }
    let r = c.send("POST", "/v1/sessions", "application/json", b"{\"device\": ".to_vec()).unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(c.get("/v1/sessions").unwrap().json()["sessions"].as_array().unwrap().len(), before);
    // Tenant b is pinned to device 0 by its config: placed there, refused device 1.
    let (sb, db) = placed(&open(&s.b, None));
    assert_eq!(db, 0);
    let r = open(&s.b, Some(json!({"device": 1})));
    assert_eq!((r.status, r.code().as_str()), (400, "INVALID_ARGUMENT"));
    assert_eq!(s.b.delete(&format!("/v1/sessions/{sb}")).unwrap().status, 200);

    // Work in a session on each device runs on that device.
    let on = |d: u64| sessions.iter().find(|s| s.1 == d).unwrap().0;
    for d in [0, 1] {
        work_in(c, on(d), d);
        assert_eq!(c.get(&format!("/v1/sessions/{}", on(d))).unwrap().json()["device"], d);
    }
    // And its memory is on that device: 1 MiB uploaded on device 1 shows there, not on 0.
    let (m0, m1) = (in_use(0), in_use(1));
    let big = c.upload_raw(on(1), "float32", &[1 << 18], vec![0; 1 << 20]).unwrap();
    assert!(in_use(1) >= m1 + (1 << 20), "device 1: {} -> {}", m1, in_use(1));
    assert!(in_use(0) < m0 + (1 << 20), "device 0: {} -> {}", m0, in_use(0));

    // Metrics: sessions and their bytes per device, labelled as the runtime's device families.
    let text = s.metrics();
    let count = |d: u64| sessions.iter().filter(|s| s.1 == d).count() as f64;
    assert_eq!(metric(&text, "kiln_serve_device_sessions", 0), count(0));
    assert_eq!(metric(&text, "kiln_serve_device_sessions", 1), count(1));
    assert!(metric(&text, "kiln_serve_device_session_bytes", 1) >= (1 << 20) as f64);
    assert!(metric(&text, "kiln_device_in_use_bytes", 1) >= (1 << 20) as f64);
    assert_eq!(c.delete(&format!("/v1/sessions/{}/tensors/{big}", on(1))).unwrap().status, 200);

    // Closing sessions frees their places: with device 1's closed, new ones go there.
    for (sid, d) in &sessions {
        if *d == 1 {
            assert_eq!(c.delete(&format!("/v1/sessions/{sid}")).unwrap().status, 200);
        }
    }
    assert_eq!(metric(&s.metrics(), "kiln_serve_device_sessions", 1), 0.0);
    assert_eq!(placed(&open(c, None)).1, 1);

    // Opens at once are placed one at a time: from none open, ten at once split five and five.
    for x in c.get("/v1/sessions").unwrap().json()["sessions"].as_array().unwrap() {
        assert_eq!(c.delete(&format!("/v1/sessions/{}", x["id"])).unwrap().status, 200);
    }
    let got: Vec<u64> = std::thread::scope(|sc| {
        let opens: Vec<_> = (0..10).map(|_| sc.spawn(|| placed(&open(c, None)).1)).collect();
        opens.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(got.iter().filter(|&&d| d == 0).count(), 5, "{got:?}");
}
