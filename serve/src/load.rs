//! The load test (`kiln serve-load`, `make serve-load`): a server in-process on localhost,
//! driven by client threads for a bounded time and a bounded number of requests.
//!
//! Phase 1: `clients` well-behaved clients (spread over two tenants), each in its own session,
//! loop upload a, upload b, `add`, download (checked against a + b computed here), delete.
//! Phase 2: the same, plus a tenant flooding matmuls as fast as it can and a tenant dispatching an
//! infinite-loop kernel (each dispatch must answer COMPUTE_LIMIT). Every response is checked;
//! "lost" counts requests that got no answer at all.

use crate::client::Client;
use crate::config;
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub clients: usize,
    pub duration: Duration,
    /// A cap on requests per phase, so a fast machine still stops early.
    pub max_requests: u64,
    /// Phase 2's bound: the good tenants' p99 with attackers at most `factor` × their p99
    /// alone plus `slack`.
    pub bound_factor: f64,
    pub bound_slack: Duration,
}

#[derive(Clone, Debug, Default)]
pub struct PhaseReport {
    pub requests: u64,
    pub errors: u64,
    pub wrong: u64,
    pub lost: u64,
    pub seconds: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub attacker_requests: u64,
    pub attacker_unexpected: u64,
    /// How long one infinite-loop dispatch takes to come back COMPUTE_LIMIT (median): what one
    /// attacker request costs the shared queue.
    pub loop_p50_ms: f64,
}

impl PhaseReport {
    pub fn throughput(&self) -> f64 {
        self.requests as f64 / self.seconds.max(1e-9)
    }
}

const GOOD_TOKENS: [&str; 2] = ["load-good-tenant-a-0123456789", "load-good-tenant-b-0123456789"];
const FLOOD_TOKEN: &str = "load-flood-tenant-0123456789";
const LOOP_TOKEN: &str = "load-loop-tenant-0123456789";

/// The service config of the load test: ephemeral ports, four tenants. The attackers may run one
/// request at a time each; the infinite loop's budget is 20k iterations per invocation.
pub fn load_config() -> config::Config {
    let text = format!(
        r#"
listen = "127.0.0.1:0"
metrics_listen = "127.0.0.1:0"
request_timeout_ms = 60000
[[tenants]]
name = "good-a"
tokens = ["{}"]
max_open_sessions = 64
max_concurrent_requests = 8
[[tenants]]
name = "good-b"
tokens = ["{}"]
max_open_sessions = 64
max_concurrent_requests = 8
[[tenants]]
name = "flood"
tokens = ["{FLOOD_TOKEN}"]
max_open_sessions = 64
max_concurrent_requests = 1
[[tenants]]
name = "loop"
tokens = ["{LOOP_TOKEN}"]
max_open_sessions = 64
max_concurrent_requests = 1
max_loop_iterations = 20000
"#,
        GOOD_TOKENS[0], GOOD_TOKENS[1]
    );
    config::parse(&text).expect("the load test's config is valid")
}

/// WGSL that never terminates on its own. Two nested loops: lavapipe's llvmpipe stops any single
/// loop after 65535 iterations by itself, so only nesting makes it run (for 2^32 iterations per
/// invocation) into the session's loop budget as on a real GPU.
pub const INFINITE_LOOP: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    var x = 0.0;
    loop {
        loop {
            x = x + 1.0;
            if (x < 0.0) { break; }
        }
        if (x < 0.0) { break; }
    }
    out[id.x] = x;
}
"#;

struct Shared {
    stop: AtomicBool,
    issued: AtomicU64,
    max: u64,
    latencies: Mutex<Vec<f64>>,
    errors: AtomicU64,
    wrong: AtomicU64,
    lost: AtomicU64,
    requests: AtomicU64,
}

impl Shared {
    fn new(max: u64) -> Arc<Shared> {
        Arc::new(Shared {
            stop: AtomicBool::new(false),
            issued: AtomicU64::new(0),
            max,
            latencies: Mutex::new(Vec::new()),
            errors: AtomicU64::new(0),
            wrong: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            requests: AtomicU64::new(0),
        })
    }
    fn go(&self) -> bool {
        !self.stop.load(Ordering::Relaxed) && self.issued.fetch_add(1, Ordering::Relaxed) < self.max
    }
}

/// A tiny deterministic generator (the load test needs varied values, not good randomness).
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 200.0 - 100.0
        })
        .collect()
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// One well-behaved client: five requests per round, every answer checked.
fn good_client(c: Client, sh: Arc<Shared>, k: u64) {
    let Ok(s) = c.open_session() else {
        sh.lost.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let n = 1000;
    let mut round = 0u64;
    let mut lat = Vec::new();
    let timed = |lat: &mut Vec<f64>, f: &mut dyn FnMut() -> Result<bool, String>| {
        let t0 = Instant::now();
        let r = f();
        lat.push(t0.elapsed().as_secs_f64() * 1e3);
        sh.requests.fetch_add(1, Ordering::Relaxed);
        match r {
            Ok(true) => true,
            Ok(false) => {
                sh.errors.fetch_add(1, Ordering::Relaxed);
                false
            }
            Err(_) => {
                sh.lost.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    };
    while sh.go() {
        round += 1;
        let (a, b) = (values(k * 1_000_003 + round, n), values(k * 7_000_001 + round, n));
        let mut ids = [0u64; 3];
        for (i, v) in [&a, &b].iter().enumerate() {
            let path = format!("/v1/sessions/{s}/tensors?dtype=float32&shape={n}");
            let ok = timed(&mut lat, &mut || {
                let r = c.send("POST", &path, "application/octet-stream", bytes(v))?;
                ids[i] = r.json()["id"].as_u64().unwrap_or(0);
                Ok(r.status == 201)
            });
            if !ok {
                continue;
            }
        }
        let ok = timed(&mut lat, &mut || {
            let body = json!({"inputs": [{"name": "a", "id": ids[0]}, {"name": "b", "id": ids[1]}], "params": {}});
            let r = c.post_json(&format!("/v1/sessions/{s}/ops/add"), &body)?;
            ids[2] = r.json()["id"].as_u64().unwrap_or(0);
            Ok(r.status == 201)
        });
        if ok {
            timed(&mut lat, &mut || {
                let r = c.get(&format!("/v1/sessions/{s}/tensors/{}?format=raw", ids[2]))?;
                if r.status != 200 {
                    return Ok(false);
                }
                let got: Vec<f32> =
                    r.body.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
                let right = got.len() == n && got.iter().zip(a.iter().zip(&b)).all(|(g, (x, y))| *g == x + y);
                if !right {
                    sh.wrong.fetch_add(1, Ordering::Relaxed);
                }
                Ok(right)
            });
        }
        for id in ids {
            timed(&mut lat, &mut || Ok(c.delete(&format!("/v1/sessions/{s}/tensors/{id}"))?.status == 200));
        }
    }
    let _ = c.delete(&format!("/v1/sessions/{s}"));
    crate::state::lock(&sh.latencies).extend(lat);
}

/// Flood: matmuls of 128 x 128 as fast as the tenant's one slot allows (answers checked for
/// status only: it is the other tenants that are measured).
fn flood_client(c: Client, stop: Arc<AtomicBool>, count: Arc<AtomicU64>, unexpected: Arc<AtomicU64>) {
    let Ok(s) = c.open_session() else { return };
    let Ok(x) = c.upload_raw(s, "float32", &[128, 128], bytes(&values(9, 128 * 128))) else { return };
    while !stop.load(Ordering::Relaxed) {
        let body = json!({"inputs": [{"name": "a", "id": x}, {"name": "b", "id": x}], "params": {}});
        match c.post_json(&format!("/v1/sessions/{s}/ops/matmul"), &body) {
            Ok(r) if r.status == 201 => {
                let id = r.json()["id"].as_u64().unwrap_or(0);
                let _ = c.delete(&format!("/v1/sessions/{s}/tensors/{id}"));
            }
            _ => {
                unexpected.fetch_add(1, Ordering::Relaxed);
            }
        }
        count.fetch_add(1, Ordering::Relaxed);
    }
    let _ = c.delete(&format!("/v1/sessions/{s}"));
}

/// The infinite loop, dispatched again and again: each must answer 429 COMPUTE_LIMIT.
fn loop_client(
    c: Client,
    stop: Arc<AtomicBool>,
    count: Arc<AtomicU64>,
    unexpected: Arc<AtomicU64>,
    lat: Arc<Mutex<Vec<f64>>>,
) {
    let Ok(s) = c.open_session() else { return };
    let Ok(out) = c.upload_raw(s, "float32", &[64], vec![0; 256]) else { return };
    let r = c.post_json(&format!("/v1/sessions/{s}/kernels"), &json!({"source": INFINITE_LOOP, "entry": "main"}));
    let Some(k) = r.ok().and_then(|r| r.json()["id"].as_u64()) else {
        unexpected.fetch_add(1, Ordering::Relaxed);
        return;
    };
    while !stop.load(Ordering::Relaxed) {
        let body = json!({"tensors": [out], "workgroups": [1, 1, 1]});
        let t0 = Instant::now();
        let r = c.post_json(&format!("/v1/sessions/{s}/kernels/{k}/dispatch"), &body);
        crate::state::lock(&lat).push(t0.elapsed().as_secs_f64() * 1e3);
        match r {
            Ok(r) if r.status == 429 && r.code() == "COMPUTE_LIMIT" => {}
            _ => {
                unexpected.fetch_add(1, Ordering::Relaxed);
            }
        }
        count.fetch_add(1, Ordering::Relaxed);
    }
    let _ = c.delete(&format!("/v1/sessions/{s}"));
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn phase(addr: std::net::SocketAddr, o: &LoadOptions, attackers: bool) -> PhaseReport {
    let sh = Shared::new(o.max_requests / 5);
    let stop = Arc::new(AtomicBool::new(false));
    let (acount, aunexp) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let loop_lat = Arc::new(Mutex::new(Vec::new()));
    let mut attack = Vec::new();
    if attackers {
        let f = Client::new(addr, Some(FLOOD_TOKEN));
        let l = Client::new(addr, Some(LOOP_TOKEN));
        for (c, which) in [(f, 0), (l, 1)] {
            let (stop, n, u, l) = (stop.clone(), acount.clone(), aunexp.clone(), loop_lat.clone());
            attack.push(std::thread::spawn(move || {
                if which == 0 {
                    flood_client(c, stop, n, u)
                } else {
                    loop_client(c, stop, n, u, l)
                }
            }));
        }
        // Both attackers at work before the measured clients start.
        std::thread::sleep(Duration::from_millis(300));
    }
    let t0 = Instant::now();
    let threads: Vec<_> = (0..o.clients)
        .map(|k| {
            let c = Client::new(addr, Some(GOOD_TOKENS[k % 2]));
            let sh = sh.clone();
            std::thread::spawn(move || good_client(c, sh, k as u64))
        })
        .collect();
    while t0.elapsed() < o.duration && sh.issued.load(Ordering::Relaxed) < sh.max {
        std::thread::sleep(Duration::from_millis(20));
    }
    sh.stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let seconds = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for t in attack {
        let _ = t.join();
    }
    let mut lat = std::mem::take(&mut *crate::state::lock(&sh.latencies));
    lat.sort_by(|a, b| a.total_cmp(b));
    let mut ll = std::mem::take(&mut *crate::state::lock(&loop_lat));
    ll.sort_by(|a, b| a.total_cmp(b));
    PhaseReport {
        loop_p50_ms: if ll.is_empty() { 0.0 } else { percentile(&ll, 0.5) },
        requests: sh.requests.load(Ordering::Relaxed),
        errors: sh.errors.load(Ordering::Relaxed),
        wrong: sh.wrong.load(Ordering::Relaxed),
        lost: sh.lost.load(Ordering::Relaxed),
        seconds,
        p50_ms: percentile(&lat, 0.5),
        p99_ms: percentile(&lat, 0.99),
        attacker_requests: acount.load(Ordering::Relaxed),
        attacker_unexpected: aunexp.load(Ordering::Relaxed),
    }
}

/// Runs both phases against a fresh in-process server and checks them: no errors, nothing
/// wrong or lost, every attacker answer as expected, and the bound. Answers both reports, or
/// what failed.
pub fn run(o: &LoadOptions) -> Result<(PhaseReport, PhaseReport), String> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    let running = rt.block_on(crate::start(load_config())).map_err(|e| e.to_string())?;
    let addr = running.api_addr;
    // The device is created before anything is timed.
    let _ = Client::new(addr, None).get("/ready");
    let half = LoadOptions { duration: o.duration / 2, ..o.clone() };
    let alone = phase(addr, &half, false);
    let attacked = phase(addr, &half, true);
    let stopped = rt.block_on(running.shutdown());
    let mut problems = Vec::new();
    for (name, p) in [("alone", &alone), ("with attackers", &attacked)] {
        if p.errors + p.wrong + p.lost > 0 || p.requests == 0 {
            problems.push(format!("{name}: {} errors, {} wrong, {} lost of {}", p.errors, p.wrong, p.lost, p.requests));
        }
    }
    if attacked.attacker_unexpected > 0 || attacked.attacker_requests == 0 {
        problems.push(format!(
            "attackers: {} unexpected answers of {}",
            attacked.attacker_unexpected, attacked.attacker_requests
        ));
    }
    let bound = alone.p99_ms * o.bound_factor + o.bound_slack.as_secs_f64() * 1e3;
    if attacked.p99_ms.is_nan() || attacked.p99_ms > bound {
        problems.push(format!(
            "good tenants' p99 {:.2} ms with attackers is over the bound {bound:.2} ms ({} x {:.2} ms + {} ms)",
            attacked.p99_ms,
            o.bound_factor,
            alone.p99_ms,
            o.bound_slack.as_millis()
        ));
    }
    if !stopped.drained {
        problems.push("shutdown did not drain".into());
    }
    if problems.is_empty() {
        Ok((alone, attacked))
    } else {
        Err(format!(
            "{}\n{}\n{}",
            describe("alone", &alone),
            describe("with attackers", &attacked),
            problems.join("; ")
        ))
    }
}

pub fn describe(name: &str, p: &PhaseReport) -> String {
    format!(
        "{name:<15} {:>7} requests in {:5.1} s = {:7.1} req/s; p50 {:7.2} ms, p99 {:7.2} ms; errors {}, wrong {}, lost {}{}",
        p.requests,
        p.seconds,
        p.throughput(),
        p.p50_ms,
        p.p99_ms,
        p.errors,
        p.wrong,
        p.lost,
        if p.attacker_requests > 0 {
            format!(
                "; attackers sent {} ({} unexpected answers; one infinite-loop dispatch: p50 {:.1} ms)",
                p.attacker_requests, p.attacker_unexpected, p.loop_p50_ms
            )
        } else {
            String::new()
        }
    )
}
