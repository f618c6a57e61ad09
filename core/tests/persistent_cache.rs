//! The persistent pipeline cache across processes (issue 34): each case runs this test binary
//! again as a child process (`child_process`, ignored in a normal run) with its own
//! `KILN_CACHE_DIR`, computes a few built-in ops there (checked against the host), and reads
//! what the child reported and left on disk. Attacks: truncated, bit-flipped, foreign, huge,
//! garbage-bodied and unreadable files, a directory in the file's place, concurrent writers.

use kiln_core::persistent_cache::{encode, PersistentCacheStats, MAX_BYTES};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// One child: opens the device, runs softmax and a matmul, checks them, prints its cache
/// stats. `KILN_PC_SLEEP_MS` makes it wait that long before printing (the saver thread's save).
#[test]
#[ignore = "a child process of the other tests of this file"]
fn child_process() {
    use kiln_core::{ops, Tensor};
    let dev = kiln_core::device().unwrap();
    // A named workload: its recorded pipelines built ahead (and waited for), and recorded.
    if let Ok(workload) = std::env::var("KILN_PC_WARM") {
        dev.warm_pipelines(&workload).wait();
    }
    let a: Vec<f32> = (0..12).map(|i| (i as f32 * 0.37).sin()).collect();
    let b: Vec<f32> = (0..8).map(|i| (i as f32 * 0.61).cos()).collect();
    let ta = Tensor::from_slice(&a, &[3, 4]).unwrap();
    let tb = Tensor::from_slice(&b, &[4, 2]).unwrap();
    let c = ops::matmul(&ta, &tb).unwrap().to_vec::<f32>().unwrap();
    for i in 0..3 {
        for j in 0..2 {
            let want: f32 = (0..4).map(|k| a[i * 4 + k] * b[k * 2 + j]).sum();
            assert!((c[i * 2 + j] - want).abs() < 1e-5, "matmul[{i},{j}] = {}, want {want}", c[i * 2 + j]);
        }
    }
    let s = ops::softmax(&ta, -1).unwrap().to_vec::<f32>().unwrap();
    for i in 0..3 {
        let row = &a[i * 4..i * 4 + 4];
        let m = row.iter().cloned().fold(f32::MIN, f32::max);
        let z: f32 = row.iter().map(|x| (x - m).exp()).sum();
        for k in 0..4 {
            assert!((s[i * 4 + k] - (row[k] - m).exp() / z).abs() < 1e-6);
        }
    }
    if let Some(ms) = std::env::var("KILN_PC_SLEEP_MS").ok().and_then(|v| v.parse().ok()) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
    match dev.persistent_cache() {
        None => println!("PCSTATS off"),
        Some(PersistentCacheStats { path, loaded_bytes, rejected, saves, built_ahead, taken_ahead, .. }) => println!(
            "PCSTATS path={} loaded={loaded_bytes} saves={saves} built={built_ahead} taken={taken_ahead} rejected={}",
            path.display(),
            rejected.unwrap_or_else(|| "-".into())
        ),
    }
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kiln-pc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn spawn(dir: &Path, env: &[(&str, &str)]) -> std::process::Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "child_process", "--ignored", "--nocapture", "--test-threads=1"])
        .env("KILN_CACHE_DIR", dir)
        .env_remove("KILN_CACHE")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // The warm-up is off by default on a CPU adapter (lavapipe): on, to be tested.
    c.env("KILN_PIPELINE_WARMUP", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().unwrap()
}

/// What one child reported: (loaded bytes, saves before exit, why a file was rejected).
struct Report {
    loaded: u64,
    saves: u64,
    /// Pipelines built ahead from a workload's record, and taken by a kernel.
    built: u64,
    taken: u64,
    rejected: Option<String>,
    path: PathBuf,
}

fn report(out: Output) -> Option<Report> {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "child failed: {}\n{stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    // libtest prints the test's name on the same line first.
    let line = stdout
        .lines()
        .find_map(|l| l.find("PCSTATS").map(|i| l[i..].trim_end()))
        .unwrap_or_else(|| panic!("no stats: {stdout}"));
    if line == "PCSTATS off" {
        return None;
    }
    let field = |k: &str| {
        let rest = &line[line.find(&format!("{k}=")).unwrap() + k.len() + 1..];
        if k == "rejected" {
            rest.to_string()
        } else {
            rest.split(' ').next().unwrap().to_string()
        }
    };
    let rejected = field("rejected");
    Some(Report {
        loaded: field("loaded").parse().unwrap(),
        saves: field("saves").parse().unwrap(),
        built: field("built").parse().unwrap(),
        taken: field("taken").parse().unwrap(),
        rejected: (rejected != "-").then_some(rejected),
        path: PathBuf::from(field("path")),
    })
}

fn run(dir: &Path, env: &[(&str, &str)]) -> Option<Report> {
    report(spawn(dir, env).wait_with_output().unwrap())
}

/// A valid cache file made by a first child in `dir`: (its path, its bytes).
fn warm(dir: &Path) -> (PathBuf, Vec<u8>) {
    let r = run(dir, &[]).expect("the adapter has a pipeline cache");
    assert_eq!((r.loaded, r.rejected.as_deref()), (0, None), "an empty directory has nothing to load");
    let bytes = std::fs::read(&r.path).expect("written at exit");
    (r.path, bytes)
}

/// Whether the adapter has a pipeline cache at all (Vulkan); the tests say so and pass where not.
fn supported() -> bool {
    let dir = scratch("probe");
    let r = run(&dir, &[]);
    if r.is_none() {
        eprintln!("persistent_cache: this adapter has no pipeline cache (not Vulkan): nothing to test");
    }
    r.is_some()
}

#[test]
fn a_second_process_loads_what_the_first_wrote() {
    if !supported() {
        return;
    }
    let dir = scratch("warm");
    let (path, bytes) = warm(&dir);
    assert!(path.starts_with(&dir), "{} not under KILN_CACHE_DIR", path.display());
    assert!(bytes.starts_with(b"KILNPLC1"), "the file is Kiln's format");
    let r = run(&dir, &[]).unwrap();
    assert_eq!(r.rejected, None);
    assert!(r.loaded > 0, "the second process loaded nothing");
    // Private to the user where Kiln made the directory.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let sub = scratch("mode").join("a/b");
        run(&sub, &[]);
        assert_eq!(std::fs::metadata(&sub).unwrap().permissions().mode() & 0o777, 0o700);
    }
    // No temporary files are left behind.
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

#[test]
fn a_process_with_nothing_new_leaves_the_file_alone() {
    if !supported() {
        return;
    }
    let dir = scratch("unchanged");
    let (path, bytes) = warm(&dir);
    let before = std::fs::metadata(&path).unwrap();
    // The same ops again: every pipeline is in the file, so the driver's data comes back the same
    // and is not rewritten (a rewrite renames a new file over it: another inode).
    let r = run(&dir, &[]).unwrap();
    assert!(r.loaded > 0);
    let after = std::fs::metadata(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(before.ino(), after.ino(), "rewritten although nothing was new");
    }
    assert_eq!(before.modified().unwrap(), after.modified().unwrap());
}

/// The workload record next to the cache file in `dir`.
fn record_in(dir: &Path) -> PathBuf {
    let records: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "warm"))
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    records[0].clone()
}

#[test]
fn a_recorded_workload_is_built_ahead_next_time() {
    if !supported() {
        return;
    }
    let dir = scratch("ahead");
    let w = [("KILN_PC_WARM", "test workload")];
    let first = run(&dir, &w).unwrap();
    assert_eq!((first.built, first.taken), (0, 0), "nothing recorded yet");
    let record = record_in(&dir);
    let bytes = std::fs::read(&record).unwrap();
    // The next process of the workload builds what the first used, and its kernels take it
    // (the child checks their results against the host).
    let second = run(&dir, &w).unwrap();
    assert!(second.built >= 2, "built ahead: {}", second.built);
    assert_eq!(second.taken, second.built, "built ahead but not used");
    assert_eq!(std::fs::read(&record).unwrap(), bytes, "the same workload rewrote its record");
    // Another workload has its own (empty) record; no workload named, nothing is built ahead.
    let other = run(&dir, &[("KILN_PC_WARM", "another workload")]).unwrap();
    assert_eq!((other.built, other.taken), (0, 0));
    let none = run(&dir, &[]).unwrap();
    assert_eq!((none.built, none.taken), (0, 0));
}

#[test]
fn workload_records_are_bounded_per_adapter() {
    use kiln_core::persistent_cache::MAX_RECORDS;
    if !supported() {
        return;
    }
    let dir = scratch("ahead-many");
    run(&dir, &[("KILN_PC_WARM", "kept workload")]).unwrap();
    let kept = record_in(&dir);
    // More stale records than the bound, older than the one in use (as if from other models).
    let stem = kept.file_name().unwrap().to_str().unwrap().split('-').take(2).collect::<Vec<_>>().join("-");
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for i in 0..MAX_RECORDS + 5 {
        let p = dir.join(format!("{stem}-{i:016x}.warm"));
        std::fs::write(&p, b"stale").unwrap();
        std::fs::File::options().append(true).open(&p).unwrap().set_modified(old).unwrap();
    }
    // Another workload writes its record: the directory is pruned to the bound, the stale ones
    // going first; the workload in use and the new one stay.
    run(&dir, &[("KILN_PC_WARM", "new workload")]).unwrap();
    let records: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "warm"))
        .collect();
    assert_eq!(records.len(), MAX_RECORDS, "{records:?}");
    assert!(kept.exists(), "the record in use was pruned");
    assert!(records.iter().filter(|p| std::fs::read(p).unwrap() != b"stale").count() == 2);
}

#[test]
fn a_damaged_or_forged_record_builds_nothing_wrong() {
    if !supported() {
        return;
    }
    let dir = scratch("ahead-attack");
    let w = [("KILN_PC_WARM", "test workload")];
    run(&dir, &w).unwrap();
    let record = record_in(&dir);
    let good = std::fs::read(&record).unwrap();
    // Damaged: ignored (nothing built ahead), the child still computes right, and the record
    // is rewritten whole.
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x10;
    std::fs::write(&record, &flipped).unwrap();
    let r = run(&dir, &w).unwrap();
    assert_eq!((r.built, r.taken), (0, 0));
    assert_eq!(std::fs::read(&record).unwrap(), good, "the damaged record was not rewritten");
    // Forged under a valid checksum: every kernel's WGSL changed (whitespace moved, so each
    // still builds). Built ahead, but no kernel takes a pipeline whose source is not its own.
    let header = 8 + 4 + 8 + 8;
    let key_len = u32::from_le_bytes(good[8..12].try_into().unwrap()) as usize;
    let key = std::str::from_utf8(&good[header..header + key_len]).unwrap();
    let data = &good[header + key_len..];
    let needle = b"    return;";
    let mut forged = data.to_vec();
    let mut changed = 0;
    let mut i = 0;
    while i + needle.len() <= forged.len() {
        if &forged[i..i + needle.len()] == needle {
            forged[i..i + needle.len()].copy_from_slice(b"return;    ");
            changed += 1;
        }
        i += 1;
    }
    assert!(changed > 0, "no kernel source to forge");
    std::fs::write(&record, encode(key, &forged)).unwrap();
    let r = run(&dir, &w).unwrap();
    assert_eq!(r.taken, 0, "a forged recipe was used ({} built ahead)", r.built);
    // The process recorded the real sources again.
    assert_eq!(std::fs::read(&record).unwrap(), good);
}

#[test]
fn the_saver_thread_writes_after_a_quiet_period() {
    if !supported() {
        return;
    }
    let dir = scratch("quiet");
    let r = run(&dir, &[("KILN_PC_SLEEP_MS", "4000")]).unwrap();
    assert!(r.saves >= 1, "nothing saved during 4 s without compiles");
}

#[test]
fn kiln_cache_0_turns_it_off() {
    let dir = scratch("off");
    assert!(run(&dir, &[("KILN_CACHE", "0")]).is_none());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "a file was written with KILN_CACHE=0");
}

#[test]
fn damaged_and_hostile_files_are_ignored_and_rewritten() {
    if !supported() {
        return;
    }
    let dir = scratch("attack");
    let (path, good) = warm(&dir);
    let header = 8 + 4 + 8 + 8;
    let key_len = u32::from_le_bytes(good[8..12].try_into().unwrap()) as usize;
    let key = std::str::from_utf8(&good[header..header + key_len]).unwrap().to_string();
    let data = good[header + key_len..].to_vec();
    let mut flipped = good.clone();
    *flipped.last_mut().unwrap() ^= 0x40;
    // wgpu's header and the driver's own header (VkPipelineCacheHeaderVersionOne, 32 bytes) kept,
    // 4 KiB of noise after them, wgpu's data size fixed to match, under a valid Kiln checksum:
    // what a forger (or a buggy writer) could hand the driver.
    const WGPU_HEADER: usize = 64;
    const VK_HEADER: usize = 32;
    assert!(data.len() >= WGPU_HEADER + VK_HEADER, "wgpu data of {} bytes", data.len());
    let mut noisy = data[..WGPU_HEADER + VK_HEADER].to_vec();
    noisy.extend((0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8));
    let driver_len = (noisy.len() - WGPU_HEADER) as u64;
    noisy[48..56].copy_from_slice(&driver_len.to_be_bytes()); // wgpu writes it big-endian
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", Vec::new(), "truncated"),
        ("truncated", good[..good.len() - 1].to_vec(), "truncated"),
        ("header only", good[..header].to_vec(), "truncated"),
        ("bit flip", flipped, "checksum"),
        ("garbage", b"this is not a pipeline cache at all, just some text".to_vec(), "not a Kiln"),
        ("another key", encode(&key.replace("kiln", "kilm"), &data), "another adapter"),
        ("garbage body", encode(&key, &(0..5000u32).map(|i| (i * 7) as u8).collect::<Vec<_>>()), "-"),
        ("noisy driver data", encode(&key, &noisy), "-"),
    ];
    for (what, bytes, reason) in cases {
        std::fs::write(&path, &bytes).unwrap();
        let r = run(&dir, &[]).unwrap();
        match reason {
            // Kiln's checks pass; wgpu or the driver must refuse (or ignore) the data: the child
            // still computes correctly (checked in it) and does not crash.
            "-" => assert_eq!(r.rejected, None, "{what}"),
            _ => {
                let why = r.rejected.unwrap_or_else(|| panic!("{what}: accepted"));
                assert!(why.contains(reason), "{what}: rejected for {why:?}, want {reason:?}");
                assert_eq!(r.loaded, 0, "{what}");
            }
        }
        // Rewritten by that process: the next one loads a valid file.
        let again = run(&dir, &[]).unwrap();
        assert_eq!(again.rejected, None, "{what}: not rewritten");
        assert!(again.loaded > 0, "{what}");
    }
    // A file over the bound is not read at all (a sparse file: no disk used).
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(MAX_BYTES as u64 + (1 << 20)).unwrap();
    drop(f);
    let r = run(&dir, &[]).unwrap();
    assert!(r.rejected.unwrap().contains("bound"));
    assert!(std::fs::metadata(&path).unwrap().len() < 1 << 20, "the oversized file was not replaced");
    // A directory where the file goes: refused, not written, no crash.
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    let r = run(&dir, &[]).unwrap();
    assert!(r.rejected.unwrap().contains("not a regular file"));
    assert!(path.is_dir());
}

#[test]
fn concurrent_writers_leave_a_whole_file() {
    if !supported() {
        return;
    }
    let dir = scratch("race");
    let children: Vec<_> = (0..3).map(|_| spawn(&dir, &[])).collect();
    for c in children {
        report(c.wait_with_output().unwrap());
    }
    let r = run(&dir, &[]).unwrap();
    assert_eq!(r.rejected, None, "the file three writers left is not whole");
    assert!(r.loaded > 0);
    let left = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(left, 1, "temporary files left behind");
}
