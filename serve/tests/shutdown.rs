//! Graceful shutdown: an in-flight request is answered in full, new connections are refused,
//! every session is closed.

mod common;

use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

#[test]
fn shutdown_finishes_the_request_in_flight() {
    // A loop budget large enough that the dispatch takes a while on lavapipe.
    let mut s =
        start_with(&config_text("").replacen("max_loop_iterations = 20000", "max_loop_iterations = 3000000", 1));
    let sid = s.a.open_session().unwrap();
    let out = s.a.upload_raw(sid, "float32", &[64], vec![0; 256]).unwrap();
    let r = s.a.post_json(&format!("/v1/sessions/{sid}/kernels"), &json!({"source": kiln_serve::load::INFINITE_LOOP}));
    let kid = r.unwrap().json()["id"].as_u64().unwrap();
    let c = s.a.with_token(Some(TOKEN_A));
    let slow = std::thread::spawn(move || {
        let t0 = Instant::now();
        let body = json!({"tensors": [out], "workgroups": [32, 1, 1]});
        let r = c.post_json(&format!("/v1/sessions/{sid}/kernels/{kid}/dispatch"), &body);
        (r, t0.elapsed())
    });
    let running = s.running.take().unwrap();
    let t0 = Instant::now();
    while running.state.metrics.in_flight() < 1 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(running.state.metrics.in_flight(), 1, "the slow request never started");
    let addr = running.api_addr;
    let stopped = s.rt.block_on(running.shutdown());
    let (reply, took) = slow.join().unwrap();
    let reply = reply.expect("the in-flight request was answered");
    // Answered in full: done (lavapipe may end the loops itself before the budget) or stopped by
    // the budget, either way a complete JSON reply.
    let code = reply.code();
    assert!(
        (reply.status == 200 && reply.json()["dispatched"].is_string())
            || (reply.status == 429 && code == "COMPUTE_LIMIT"),
        "{} {}",
        reply.status,
        String::from_utf8_lossy(&reply.body)
    );
    assert!(stopped.drained, "{stopped:?}");
    assert_eq!(stopped.sessions_closed, 1);
    eprintln!("the in-flight dispatch took {took:?}");
    assert!(kiln_serve::client::Client::new(addr, Some(TOKEN_A)).get("/health").is_err(), "still accepting");
}
