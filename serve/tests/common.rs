//! A server in-process on ephemeral ports for the tests, with two tenants: `a` (roomy) and `b`
//! (a 64 KiB quota, a small loop budget, two sessions at most).

#![allow(dead_code)]

use kiln_serve::client::Client;
use kiln_serve::{config, Running};

pub const TOKEN_A: &str = "tenant-a-token-0123456789";
pub const TOKEN_B: &str = "tenant-b-token-0123456789";

pub struct Server {
    pub rt: tokio::runtime::Runtime,
    pub running: Option<Running>,
    pub a: Client,
    pub b: Client,
    pub anon: Client,
}

pub fn config_text(extra_b: &str) -> String {
    format!(
        r#"
listen = "127.0.0.1:0"
metrics_listen = "127.0.0.1:0"
max_body_bytes = 1048576
request_timeout_ms = 60000
shutdown_grace_ms = 60000
[[tenants]]
name = "a"
tokens = ["{TOKEN_A}"]
max_loop_iterations = 20000
[[tenants]]
name = "b"
tokens = ["{TOKEN_B}", "tenant-b-second-token-0123"]
max_bytes = 65536
max_loop_iterations = 20000
max_open_sessions = 2
max_concurrent_requests = 1
{extra_b}
"#
    )
}

pub fn start_with(text: &str) -> Server {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let running = rt.block_on(kiln_serve::start(config::parse(text).unwrap())).unwrap();
    let addr = running.api_addr;
    Server {
        rt,
        running: Some(running),
        a: Client::new(addr, Some(TOKEN_A)),
        b: Client::new(addr, Some(TOKEN_B)),
        anon: Client::new(addr, None),
    }
}

pub fn start() -> Server {
    start_with(&config_text(""))
}

impl Server {
    pub fn metrics(&self) -> String {
        let addr = self.running.as_ref().unwrap().metrics_addr;
        String::from_utf8(Client::new(addr, None).get("/metrics").unwrap().body).unwrap()
    }
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Varied values with the special ones mixed in (NaN, infinities, signed zeros, huge, tiny).
pub fn values(seed: u64, n: usize) -> Vec<f32> {
    let special = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 3.0e38, -1.0e-38, 1.0e-45];
    let mut s = seed.wrapping_add(0x9e3779b97f4a7c15);
    (0..n)
        .map(|i| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if i % 7 == 3 {
                special[(s >> 60) as usize % special.len()]
            } else {
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 20.0 - 10.0
            }
        })
        .collect()
}

/// Bitwise equality with every NaN equal.
pub fn same_f32(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits())
}
