//! The short load test of `make serve-test`: both phases for a few seconds (`make serve-load`
//! runs the minute-long one through `kiln serve-load`).

use kiln_serve::load::{describe, run, LoadOptions};
use std::time::Duration;

#[test]
fn load_for_ten_seconds_loses_nothing_and_holds_the_bound() {
    let secs = std::env::var("KILN_SERVE_LOAD_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let o = LoadOptions {
        clients: 4,
        duration: Duration::from_secs(secs),
        max_requests: 50_000,
        bound_factor: 3.0,
        bound_slack: Duration::from_millis(250),
    };
    match run(&o) {
        Ok((alone, attacked)) => {
            eprintln!("{}", describe("alone", &alone));
            eprintln!("{}", describe("with attackers", &attacked));
        }
        Err(e) => panic!("{e}"),
    }
}
