//! `kiln embed --timings` and `kiln generate --timings` (issue 34's cold start): the result is the
//! same as without the flag, and stderr carries the phase table, with the phases a fresh process
//! goes through, each inside the one it ran in. Tiny synthetic models (models/tests/fixtures).

#[path = "../../models/tests/fixtures/mod.rs"]
mod fixtures;

use fixtures::*;
use std::process::{Command, Output};

fn kiln(args: &[&str], cache: &std::path::Path) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .env("KILN_CACHE_DIR", cache)
        // Off by default on a CPU adapter (lavapipe); on, so that its lines are checked.
        .env("KILN_PIPELINE_WARMUP", "1")
        .env_remove("KILN_MODELS_BACKEND")
        .output()
        .expect("kiln runs");
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    o
}

/// One line of the table: (start ms, ms, n, depth, phase); None where `name` has no line.
fn row(table: &str, name: &str) -> Option<(f64, f64, usize, usize, String)> {
    let line = table.lines().find(|l| l.len() > 27 && l[27..].trim_start().starts_with(name))?;
    let num = |s: &str| s.trim().parse::<f64>().unwrap_or(0.0);
    let n = line[20..25].trim();
    let phase = &line[27..];
    let depth = (phase.len() - phase.trim_start().len()) / 2;
    Some((num(&line[..9]), num(&line[10..19]), n.parse().unwrap_or(1), depth, phase.trim().to_string()))
}

/// `inner` lies inside `outer` in time and one level under it.
#[track_caller]
fn nested(table: &str, outer: &str, inner: &str) {
    let o = row(table, outer).unwrap_or_else(|| panic!("no {outer:?} line: {table}"));
    let i = row(table, inner).unwrap_or_else(|| panic!("no {inner:?} line: {table}"));
    assert!(i.3 > o.3, "{inner:?} not indented under {outer:?}: {table}");
    assert!(i.0 >= o.0 && i.0 <= o.0 + o.1 + 0.1, "{inner:?} starts outside {outer:?}: {table}");
    if i.2 == 1 {
        assert!(i.1 <= o.1 + 0.1, "{inner:?} longer than {outer:?}: {table}");
    }
}

#[test]
fn embed_timings_name_every_phase_and_change_nothing_else() {
    let dir = scratch("timings-embed");
    Bert::good().write(&dir);
    let cache = dir.join("cache");
    let m = dir.to_str().unwrap();
    let plain = kiln(&["embed", "--model", m, "hello world"], &cache);
    assert!(!String::from_utf8_lossy(&plain.stderr).contains("timings"), "a table without --timings");
    // A fresh cache (nothing recorded: every pipeline is built on the way).
    let timed = kiln(&["embed", "--model", m, "--timings", "hello world"], &dir.join("fresh cache"));
    assert_eq!(timed.stdout, plain.stdout, "--timings changed the embeddings");
    let t = String::from_utf8_lossy(&timed.stderr).into_owned();
    assert!(t.contains("timings (wall ms"), "{t}");
    nested(&t, "model load", "weights to the GPU");
    // The device opens first (the pipelines a workload recorded are built ahead on it while
    // the weights upload), inside the load.
    nested(&t, "model load", "Vulkan instance");
    nested(&t, "model load", "device creation");
    nested(&t, "device creation", "pipeline-cache file read");
    nested(&t, "embeddings", "readback");
    // The tokenizer parsed on its own thread, inside the load's time.
    let tok = row(&t, "tokenizer load").unwrap_or_else(|| panic!("{t}"));
    assert!(tok.4.ends_with("[thread 1]") || tok.4.ends_with("[thread 2]"), "{t}");
    let load = row(&t, "model load").unwrap();
    assert!(tok.0 >= load.0 && tok.0 + tok.1 <= load.0 + load.1 + 0.1, "{t}");
    // Pipelines: counted, each one's stages under it.
    let p = row(&t, "pipeline creation").unwrap_or_else(|| panic!("{t}"));
    assert!(p.2 >= 1, "{t}");
    nested(&t, "pipeline creation", "compute pipeline (driver");
    // Every phase began before the report, and the phases of main's thread follow one another.
    let end = row(&t, "(this report)").unwrap().0;
    for name in ["model load", "embeddings", "result written"] {
        let r = row(&t, name).unwrap_or_else(|| panic!("no {name}: {t}"));
        assert!(r.0 + r.1 <= end + 0.1, "{name} ends after the report: {t}");
    }
    assert!(row(&t, "model load").unwrap().0 <= row(&t, "embeddings").unwrap().0, "{t}");
    // The cache the plain run recorded into: its pipelines are built ahead on another thread
    // during the load, and the embeddings are the same.
    let warm = kiln(&["embed", "--model", m, "--timings", "hello world"], &cache);
    assert_eq!(warm.stdout, plain.stdout, "pipelines built ahead changed the embeddings");
    let t = String::from_utf8_lossy(&warm.stderr).into_owned();
    let ahead = row(&t, "pipeline built ahead").unwrap_or_else(|| panic!("nothing built ahead: {t}"));
    assert!(ahead.2 >= 1 && ahead.4.contains("[thread"), "{t}");
    nested(&t, "model load", "pipelines built ahead: waited for");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn generate_timings_name_the_load_and_the_first_token() {
    let dir = scratch("timings-gen");
    let path = dir.join("tiny.gguf");
    std::fs::write(&path, tiny_llama_gguf(7, 95, 64)).unwrap();
    let p = path.to_str().unwrap();
    let args = ["generate", "--model", p, "--prompt", "hi", "--max-tokens", "2"];
    let plain = kiln(&args, &dir);
    let timed = kiln(&[&args[..], &["--timings"]].concat(), &dir);
    assert_eq!(timed.stdout, plain.stdout, "--timings changed the text");
    let t = String::from_utf8_lossy(&timed.stderr).into_owned();
    nested(&t, "model load", "GGUF file map");
    nested(&t, "model load", "weights load");
    assert!(row(&t, "tokenizer load (GGUF vocabulary)").is_some_and(|r| r.4.contains("[thread")), "{t}");
    assert!(row(&t, "first token").is_some(), "{t}");
    let _ = std::fs::remove_dir_all(&dir);
}
