//! Hostile clients against the service's own limits (issue 28): stalled uploads against the body
//! byte budgets, slow request heads against the connection cap and the header timeout (also
//! under a lowered open-file limit), a .npy header that backtracks, SIGTERM during a long
//! kernel, what session ids and messages tell, and /ready while the device is busy.
//!
//! The open-file and SIGTERM cases run the server in a child process: this test binary again,
//! in `child_server` mode (`KILN_SERVE_CHILD_CONFIG` set), started through bash for `ulimit -n`.

mod common;

use common::*;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn rss_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap() / 1024.0
}

/// Opens a connection and sends `head` plus up to `body` bytes without blocking on a full
/// socket (a client that stalls mid-upload).
fn stalled(addr: SocketAddr, head: &str, body: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.set_nonblocking(true).unwrap();
    let mut sent = 0;
    while sent < body.len() {
        match s.write(&body[sent..]) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    s
}

fn upload_head(sid: u64, token: &str, n: usize) -> String {
    format!(
        "POST /v1/sessions/{sid}/tensors?dtype=uint32&shape={} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {token}\r\ncontent-length: {n}\r\n\r\n",
        n / 4
    )
}

/// The case: one tenant with `max_concurrent_requests = 1` and 40 stalled uploads held
/// 40 bodies in memory (the body was read before the slot was taken).
#[test]
fn stalled_uploads_hold_one_slot_of_memory_and_other_tenants_are_served() {
    const BODY: usize = 4 << 20;
    let text = config_text("")
        .replace("max_body_bytes = 1048576", &format!("max_body_bytes = {BODY}\nbody_read_timeout_ms = 60000"));
    let s = start_with(&text);
    let addr = s.running.as_ref().unwrap().api_addr;
    let state = s.running.as_ref().unwrap().state.clone();
    let sb = s.b.open_session().unwrap();
    let sa = s.a.open_session().unwrap();
    // Warm up the device and the allocator with a's upload first.
    s.a.upload_raw(sa, "uint32", &[BODY / 4], vec![1; BODY]).unwrap();
    let before = rss_mib();
    let half = vec![7u8; BODY / 2];
    let held: Vec<TcpStream> = (0..40).map(|_| stalled(addr, &upload_head(sb, TOKEN_B, BODY), &half)).collect();
    std::thread::sleep(Duration::from_millis(1500));
    let b = state.tenant_for(TOKEN_B).unwrap();
    let grown = rss_mib() - before;
    eprintln!(
        "40 stalled uploads of b: rss +{grown:.1} MiB, b's body bytes {} , the server's {}",
        b.body_bytes.in_use(),
        state.body_bytes.in_use()
    );
    // One slot's worth (the upload reading now), never 40 half bodies (80 MiB).
    assert!(b.body_bytes.in_use() <= BODY as u64, "{}", b.body_bytes.in_use());
    assert!(state.body_bytes.in_use() <= BODY as u64);
    assert!(grown < 24.0, "rss grew {grown:.1} MiB");
    // a is served meanwhile, promptly.
    let t0 = Instant::now();
    let t = s.a.upload_raw(sa, "float32", &[2], f32_bytes(&[3.0, 4.0])).unwrap();
    assert_eq!(f32s(&s.a.get(&format!("/v1/sessions/{sa}/tensors/{t}?format=raw")).unwrap().body), vec![3.0, 4.0]);
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    drop(held);
    // Once they are gone, b's bytes come back and b is served again.
    let t0 = Instant::now();
    while b.body_bytes.in_use() > 0 && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(b.body_bytes.in_use(), 0);
    assert!(s.b.upload_raw(sb, "float32", &[1], vec![0; 4]).is_ok());
}

/// The server-wide budget holds when tenants multiply: two tenants with 4 slots each, bodies of
/// 1 MiB, a 2 MiB budget for all; a stalled body that stops sending is refused in time.
#[test]
fn the_server_wide_body_budget_bounds_tenants_together_and_stalls_time_out() {
    let text = config_text("")
        .replace(
            "max_body_bytes = 1048576",
            "max_body_bytes = 1048576\nmax_body_bytes_in_flight = 2097152\nbody_read_timeout_ms = 1500",
        )
        .replace("max_concurrent_requests = 1", "max_concurrent_requests = 4");
    let s = start_with(&text);
    let addr = s.running.as_ref().unwrap().api_addr;
    let state = s.running.as_ref().unwrap().state.clone();
    let (sa, sb) = (s.a.open_session().unwrap(), s.b.open_session().unwrap());
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(stalled(addr, &upload_head(sa, TOKEN_A, 1 << 20), &[1; 1000]));
        held.push(stalled(addr, &upload_head(sb, TOKEN_B, 1 << 20), &[1; 1000]));
    }
    let mut peak = 0;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(1000) {
        peak = peak.max(state.body_bytes.in_use());
        std::thread::sleep(Duration::from_millis(5));
    }
    eprintln!("16 stalled 1 MiB uploads of two tenants: the server's body bytes peaked at {peak}");
    assert!(peak > 0 && peak <= 2 << 20, "{peak}");
    // The first stalled ones are answered 408 once they have sent nothing for 1.5 s.
    let mut first = held.remove(0);
    first.set_nonblocking(false).unwrap();
    first.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut reply = String::new();
    let _ = first.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 408") && reply.contains("REQUEST_TIMEOUT"), "{reply}");
}

/// Slow request heads, more than the cap: each new connection at the cap closes the one idle
/// the longest, unfinished heads are closed after the header timeout, and a well-behaved client
/// is answered at once throughout.
#[test]
fn slow_heads_past_the_cap_do_not_lock_out_a_good_client() {
    let text = config_text("").replace(
        "shutdown_grace_ms = 60000",
        "shutdown_grace_ms = 60000\nmax_connections = 32\nheader_read_timeout_ms = 2000",
    );
    let s = start_with(&text);
    let running = s.running.as_ref().unwrap();
    let addr = running.api_addr;
    assert_eq!(running.connections.cap, 32);
    // A trickler: one byte of its head every 100 ms, never finishing.
    let mut trickler = TcpStream::connect(addr).unwrap();
    let t_trickle = Instant::now();
    let trickle = std::thread::spawn(move || {
        for b in b"GET /v1/sessions HTTP/1.1\r\nhost: x\r\nx-slow: ".iter().cycle().take(200) {
            if trickler.write_all(&[*b]).is_err() {
                return t_trickle.elapsed();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Duration::MAX
    });
    let slow: Vec<TcpStream> = (0..100)
        .map(|_| {
            let mut c = TcpStream::connect(addr).unwrap();
            let _ = c.write_all(b"POST /v1/sessions HTTP/1.1\r\nhost: x\r\n");
            c
        })
        .collect();
    for round in 0..3 {
        let t0 = Instant::now();
        let sid = s.a.open_session().unwrap();
        assert_eq!(s.a.get(&format!("/v1/sessions/{sid}")).unwrap().status, 200);
        assert!(t0.elapsed() < Duration::from_secs(2), "round {round}: {:?}", t0.elapsed());
        assert!(running.connections.open() <= 32);
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(running.connections.evicted.load(std::sync::atomic::Ordering::Relaxed) > 0);
    // The trickler is cut at the header timeout (or earlier, by eviction), not kept forever.
    let cut = trickle.join().unwrap();
    assert!(cut < Duration::from_secs(6), "{cut:?}");
    // Every slow head is closed by now (header timeout 2 s): reads see the end.
    std::thread::sleep(Duration::from_millis(1500));
    for mut c in slow {
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = Vec::new();
        // Closed: the end, or a reset (closed with the head unread); a timeout means still open.
        match c.read_to_end(&mut buf) {
            Ok(_) => {}
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "a slow head still open: {e}"),
        }
    }
}

/// The test binary as the server, when the parent sets the config; otherwise nothing.
#[test]
fn child_server() {
    let Ok(text) = std::env::var("KILN_SERVE_CHILD_CONFIG") else { return };
    let c = kiln_serve::config::parse(&text).unwrap();
    let stopped = kiln_serve::run_until_signal(c, |r| {
        println!("LISTENING {} {} cap={}", r.api_addr, r.metrics_addr, r.connections.cap);
    })
    .unwrap();
    println!("STOPPED drained={}", stopped.drained);
}

struct ChildServer {
    child: Child,
    addr: SocketAddr,
    cap: usize,
    lines: std::sync::mpsc::Receiver<String>,
}

fn spawn_child(text: &str, ulimit: Option<u32>, env: &[(&str, &str)]) -> ChildServer {
    let exe = std::env::current_exe().unwrap();
    let script = match ulimit {
        Some(n) => format!("ulimit -n {n} && exec \"$0\" \"$@\""),
        None => "exec \"$0\" \"$@\"".into(),
    };
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &script])
        .arg(exe)
        .args(["child_server", "--exact", "--nocapture", "--test-threads", "1"])
        .env("KILN_SERVE_CHILD_CONFIG", text)
        .stdout(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let line = loop {
        let l = rx.recv_timeout(Duration::from_secs(60)).expect("the child server did not start");
        // libtest writes "test child_server ... " before it on the same line.
        if let Some(at) = l.find("LISTENING ") {
            break l[at..].to_string();
        }
    };
    let parts: Vec<&str> = line.split_whitespace().collect();
    ChildServer {
        child,
        addr: parts[1].parse().unwrap(),
        cap: parts[3].trim_start_matches("cap=").parse().unwrap(),
        lines: rx,
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The case: with `ulimit -n 256`, 300 slow connections locked everyone out.
#[test]
fn three_hundred_slow_connections_under_ulimit_256_do_not_lock_out_a_good_client() {
    let text = config_text("").replace("shutdown_grace_ms = 60000", "shutdown_grace_ms = 1000");
    let srv = spawn_child(&text, Some(256), &[]);
    eprintln!("the child's connection cap under ulimit -n 256: {}", srv.cap);
    assert!(srv.cap < 256 - 16, "{}", srv.cap);
    let slow: Vec<TcpStream> = (0..300)
        .filter_map(|_| {
            let mut c = TcpStream::connect(srv.addr).ok()?;
            let _ = c.write_all(b"GET /v1/sessions HTTP/1.1\r\nhost: x\r\n");
            Some(c)
        })
        .collect();
    assert_eq!(slow.len(), 300);
    let a = kiln_serve::client::Client::new(srv.addr, Some(TOKEN_A));
    for round in 0..3 {
        let t0 = Instant::now();
        // Opens the device too (its files count against the same limit).
        let sid = a.open_session().unwrap();
        let t = a.upload_raw(sid, "float32", &[2], f32_bytes(&[1.5, 2.5])).unwrap();
        let got = a.get(&format!("/v1/sessions/{sid}/tensors/{t}?format=raw")).unwrap();
        assert_eq!(f32s(&got.body), vec![1.5, 2.5]);
        eprintln!("round {round}: answered in {:?}", t0.elapsed());
        assert!(t0.elapsed() < Duration::from_secs(10), "round {round}: {:?}", t0.elapsed());
    }
    drop(slow);
}

/// The case: SIGTERM during a long in-limits kernel exited after 57 s, not the 10 s
/// grace, and the request got no answer. Here the grace is 2 s and the kernel runs far longer;
/// /ready says the device is not answering while it runs.
#[test]
fn sigterm_during_a_long_kernel_answers_and_exits_within_the_grace() {
    let text = config_text("").replace("shutdown_grace_ms = 60000", "shutdown_grace_ms = 2000").replacen(
        "max_loop_iterations = 20000",
        // Room for a kernel of ~2.7e11 operations (invocations x loop budget), ~30 s on lavapipe.
        "max_loop_iterations = 1048576\nmax_ops_total = 10000000000000\nmax_ops_per_dispatch = 1000000000000",
        1,
    );
    let mut srv = spawn_child(&text, None, &[("KILN_TIMEOUT_MS", "600000")]);
    let a = kiln_serve::client::Client::new(srv.addr, Some(TOKEN_A));
    let sid = a.open_session().unwrap();
    // ~3.5 s per 500 workgroups on lavapipe (2 cores): this runs for about half a minute.
    let wgs = 4000usize;
    let out = a.upload_raw(sid, "float32", &[wgs * 64], vec![0; wgs * 256]).unwrap();
    assert_eq!(a.get("/ready").unwrap().status, 200);
    let r = a.post_json(&format!("/v1/sessions/{sid}/kernels"), &json!({"source": kiln_serve::load::INFINITE_LOOP}));
    let kid = r.unwrap().json()["id"].as_u64().unwrap();
    let c = a.with_token(Some(TOKEN_A));
    let slow = std::thread::spawn(move || {
        let body = json!({"tensors": [out], "workgroups": [wgs, 1, 1]});
        c.post_json(&format!("/v1/sessions/{sid}/kernels/{kid}/dispatch"), &body)
    });
    // Once the kernel is on the device (seconds under load), the device is busy past the
    // probe's wait: not ready (it said ready before the fix).
    let t_kernel = Instant::now();
    let (r, t0) = loop {
        let t0 = Instant::now();
        let r = a.get("/ready").unwrap();
        if slow.is_finished() {
            panic!(
                "the kernel ended early: {:?}",
                slow.join().unwrap().map(|r| String::from_utf8_lossy(&r.body).into_owned())
            );
        }
        if r.status != 200 || t_kernel.elapsed() > Duration::from_secs(15) {
            break (r, t0);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!("/ready during the kernel: {} in {:?}", r.status, t0.elapsed());
    assert_eq!((r.status, r.code().as_str()), (503, "NOT_READY"), "{}", String::from_utf8_lossy(&r.body));
    assert!(t0.elapsed() < Duration::from_secs(4));
    // SIGTERM.
    let t0 = Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(srv.child.id() as i32, libc::SIGTERM) }, 0);
    let reply = slow.join().unwrap().expect("the in-flight request got an answer");
    let answered = t0.elapsed();
    assert_eq!(
        (reply.status, reply.code().as_str()),
        (503, "SHUTTING_DOWN"),
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let status = loop {
        if let Some(s) = srv.child.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    let exited = t0.elapsed();
    eprintln!("SIGTERM: answered in {answered:?}, exited ({status}) in {exited:?}");
    assert!(status.success(), "{status}");
    assert!(answered >= Duration::from_millis(1900) && answered < Duration::from_millis(4500), "{answered:?}");
    assert!(exited < Duration::from_millis(2000) + Duration::from_millis(4500), "{exited:?}");
    let lines: Vec<String> = srv.lines.try_iter().collect();
    assert!(lines.iter().any(|l| l.contains("STOPPED drained=false")), "{lines:?}");
}

/// Session ids are random, and Kiln's own session numbers do not leak through messages.
#[test]
fn session_ids_are_opaque_and_messages_name_the_callers_own_id() {
    let s = start();
    let ids: Vec<u64> =
        (0..6).map(|i| if i % 2 == 0 { &s.a } else { &s.b }).filter_map(|c| c.open_session().ok()).collect();
    assert!(ids.len() >= 5);
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len());
    // No counter: consecutive opens are far apart (random ids below 2^53).
    assert!(ids.windows(2).all(|w| w[0].abs_diff(w[1]) > 1000), "{ids:?}");
    assert!(ids.iter().all(|&i| i < 1 << 53));
    // b's quota error names b's session by b's id.
    let sb = ids[1];
    let r = s.b.send("POST", &format!("/v1/sessions/{sb}/tensors?dtype=float32&shape=32768"), "", vec![0; 131072]);
    let r = r.unwrap();
    assert_eq!(r.code(), "QUOTA_EXCEEDED");
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains(&format!("session {sb} ")), "{msg}");
}

/// The case over HTTP: a 40-level nested literal in a .npy header (months in npyz's
/// parser, the request answered 504 and a core stayed busy) is refused at once.
#[test]
fn a_backtracking_npy_header_is_refused_at_once() {
    let s = start();
    let sid = s.a.open_session().unwrap();
    let dict = format!("{{'descr':'<f4','fortran_order':False,'shape':(1,),'x':{}{}}}", "[".repeat(40), "]".repeat(40));
    let mut file = b"\x93NUMPY\x01\x00".to_vec();
    file.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    file.extend_from_slice(dict.as_bytes());
    file.extend_from_slice(&[0; 4]);
    let t0 = Instant::now();
    let r = s.a.send("POST", &format!("/v1/sessions/{sid}/tensors"), "application/x-npy", file).unwrap();
    eprintln!("{}-byte file: {} in {:?}", dict.len() + 14, r.status, t0.elapsed());
    assert_eq!((r.status, r.code().as_str()), (400, "BAD_REQUEST"));
    assert!(t0.elapsed() < Duration::from_millis(500), "{:?}", t0.elapsed());
}
