//! Compiling user kernels past the pipeline cache's size does not grow the process for good
//! (issue 28: each compile evicted from the cache leaked ~45 KB, in plain Python too). Its own
//! test binary: it reads the process's resident memory, and sets a small cache.

use kiln_core::{DType, Kernel, Tensor};

/// Resident bytes of this process (Linux).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// The `i`th distinct kernel (the cache keys on the source).
fn source(i: usize) -> String {
    // Fresh constants each run: Mesa's on-disk shader cache must not answer for the driver.
    static SALT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let salt = SALT.get_or_init(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 % 1_000_000 + 3
    });
    format!(
        "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
         @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {{\n\
         if (g.x < arrayLength(&x)) {{ x[g.x] = x[g.x] * {salt}.0 + {i}.0; }}\n}}"
    )
}

fn compile_and_run(i: usize, x: &Tensor) {
    let k = Kernel::new(&source(i), "main").unwrap();
    let every: usize = std::env::var("RSS_TEST_DISPATCH_EVERY").ok().and_then(|v| v.parse().ok()).unwrap_or(97);
    if i.is_multiple_of(every) && std::env::var_os("RSS_TEST_NO_DISPATCH").is_none() {
        // Dispatch some of them, so that evicted pipelines were also used by the GPU.
        k.dispatch(&[x], None, [1, 1, 1]).unwrap();
    }
}

/// Compiles `n` distinct kernels from `start`, printing resident memory every `every`.
fn compile_range(start: usize, n: usize, every: usize, x: &Tensor) -> Vec<(usize, u64)> {
    let mut seen = Vec::new();
    for i in start..start + n {
        compile_and_run(i, x);
        if (i + 1 - start).is_multiple_of(every) {
            if std::env::var_os("RSS_TEST_NO_SYNC").is_none() {
                kiln_core::device().unwrap().synchronize().unwrap();
            }
            seen.push((i + 1, rss_bytes()));
        }
    }
    seen
}

#[test]
fn compiles_evicted_from_the_cache_do_not_grow_the_process() {
    // A small cache, so that few compiles reach the steady state where every compile evicts one.
    std::env::set_var("KILN_PIPELINE_CACHE_ENTRIES", "32");
    let x = Tensor::from_slice(&[1.0f32; 64], &[64]).unwrap();
    // Warm up: the cache fills, the compile threads, allocator arenas and driver pools grow.
    compile_range(0, 300, 300, &x);
    let before = rss_bytes();
    let seen = compile_range(300, 700, 100, &x);
    let after = rss_bytes();
    let per_compile = after.saturating_sub(before) as f64 / 700.0;
    eprintln!("rss over 700 compiles past a 32-entry cache: {before} -> {after} ({per_compile:.0} B/compile) {seen:?}");
    assert_eq!(x.dtype(), DType::F32);
    // The issue reported ~45 KB a compile (31 MB here). Measured here (lavapipe, Mesa's shader
    // cache bypassed by fresh constants): 11-14 KB a compile over these 700, falling to 1-6 KB
    // over 5,000-15,000 compiles (`rss_over_five_thousand_compiles`): allocator and driver
    // growth that levels off, not a fixed cost per evicted pipeline. The bound catches a leak
    // of the reported size, not that.
    assert!(per_compile < 24_000.0, "{per_compile:.0} bytes of resident memory per compile");
}

/// The measurement (`--ignored --nocapture`): resident memory over 5,000 distinct
/// compiles with the default cache (512 entries). Test-only variables vary it:
/// RSS_TEST_COMPILES (how many), RSS_TEST_DISPATCH_EVERY (dispatch every Nth kernel, 97;
/// 1 makes lavapipe JIT every one), RSS_TEST_NO_DISPATCH, RSS_TEST_NO_SYNC.
#[test]
#[ignore]
fn rss_over_five_thousand_compiles() {
    let x = Tensor::from_slice(&[1.0f32; 64], &[64]).unwrap();
    let t0 = std::time::Instant::now();
    let start = rss_bytes();
    let n: usize = std::env::var("RSS_TEST_COMPILES").ok().and_then(|v| v.parse().ok()).unwrap_or(5000);
    for (n, rss) in compile_range(0, n, n / 10, &x) {
        println!("{n} compiles: rss {:.1} MiB (+{:.1})", rss as f64 / 1048576.0, (rss - start) as f64 / 1048576.0);
    }
    println!("{:.1} s", t0.elapsed().as_secs_f64());
}

/// What one live kernel costs (`--ignored --nocapture`): resident memory with 500 distinct
/// kernels held, the basis of `KERNEL_CHARGE_BYTES`.
#[test]
#[ignore]
fn rss_of_live_kernels() {
    let x = Tensor::from_slice(&[1.0f32; 64], &[64]).unwrap();
    compile_range(100_000, 200, 200, &x); // warm up
    kiln_core::device().unwrap().synchronize().unwrap();
    let before = rss_bytes();
    let held: Vec<Kernel> = (0..500).map(|i| Kernel::new(&source(200_000 + i), "main").unwrap()).collect();
    kiln_core::device().unwrap().synchronize().unwrap();
    let after = rss_bytes();
    println!("500 live kernels: +{:.0} bytes each", (after - before) as f64 / 500.0);
    drop(held);
}
