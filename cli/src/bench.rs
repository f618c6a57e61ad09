//! `kiln bench`: each op at realistic sizes on the chosen adapter. Each figure is the median of
//! several repetitions of a timed loop (warm-up first; two input sets alternate so caches don't
//! flatter). Where the adapter has timestamp queries the figure is GPU time (first pass begin to
//! last pass end, as a CUDA event pair would measure); elsewhere, or with `--wall-clock`, the
//! wall clock around the loop and its final synchronize. Small-op chains and transfers are
//! always wall clock: host cost is what they measure.
//! Memory-bound ops report GB/s (bytes read + written), matmul and conv TFLOP/s.

use anyhow::Result;
use kiln_core::ops;
use kiln_core::{DType, Tensor};
use serde_json::json;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// Write every figure as JSON to this file.
    #[arg(long)]
    json: Option<String>,
    /// Small sizes (for a smoke run on a software adapter).
    #[arg(long)]
    quick: bool,
    /// Only run benchmarks whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Repetitions per figure (the median is reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Time with the wall clock even where the adapter has GPU timestamp queries.
    #[arg(long)]
    wall_clock: bool,
    /// The all-MiniLM-L6-v2 directory for the embed section (skipped when it is missing).
    #[arg(long, default_value = "build/models/all-MiniLM-L6-v2")]
    minilm: std::path::PathBuf,
    /// The SmolLM2 GGUF file for the llm section (skipped when it is missing).
    #[arg(long, default_value = "build/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")]
    smollm2: std::path::PathBuf,
    /// The data parallel section's devices (`--filter dp`): adapter indices as `kiln devices`
    /// lists them, comma-separated; default every GPU.
    #[arg(long, value_delimiter = ',')]
    devices: Option<Vec<usize>>,
}

type OpFn = Box<dyn Fn(usize) -> kiln_core::Result<Tensor>>;

struct Bench {
    name: &'static str,
    size: String,
    bytes: f64,
    flops: f64,
    run: OpFn,
}

fn rand(shape: &[usize], dtype: DType, seed: u64) -> Result<Tensor> {
    Ok(ops::random_uniform(shape, dtype, seed, -1.0, 1.0)?)
}

/// Two input sets per bench, alternated by iteration index.
fn pair(shape: &[usize], dtype: DType, seed: u64) -> Result<[Tensor; 2]> {
    Ok([rand(shape, dtype, seed)?, rand(shape, dtype, seed + 1)?])
}

fn benches(quick: bool) -> Result<Vec<Bench>> {
    let mut v: Vec<Bench> = Vec::new();
    let big = if quick { 1 << 18 } else { 64 << 20 }; // 256 MiB of f32
    let (rows, cols) = if quick { (256, 1024) } else { (16384, 4096) };
    let mm = if quick { 256 } else { 4096 };
    let f4 = 4.0;

    let x = pair(&[big], DType::F32, 1)?;
    let y = pair(&[big], DType::F32, 3)?;
    let size = format!("{} MiB f32", (big * 4) >> 20);
    for (name, op) in [("relu", ops::UnaryOp::Relu), ("exp", ops::UnaryOp::Exp), ("gelu", ops::UnaryOp::Gelu)] {
        let x = x.clone();
        v.push(Bench {
            name,
            size: size.clone(),
            bytes: 2.0 * f4 * big as f64,
            flops: 0.0,
            run: Box::new(move |i| ops::unary(op, &x[i % 2])),
        });
    }
    {
        let (x, y) = (x.clone(), y.clone());
        v.push(Bench {
            name: "add",
            size: size.clone(),
            bytes: 3.0 * f4 * big as f64,
            flops: 0.0,
            run: Box::new(move |i| ops::add(&x[i % 2], &y[i % 2])),
        });
    }
    {
        let x = x.clone();
        v.push(Bench {
            name: "mul_scalar",
            size: size.clone(),
            bytes: 2.0 * f4 * big as f64,
            flops: 0.0,
            run: Box::new(move |i| ops::mul_scalar(&x[i % 2], 1.5)),
        });
    }
    let m = pair(&[rows, cols], DType::F32, 5)?;
    let msize = format!("{rows}x{cols} f32");
    let mbytes = f4 * (rows * cols) as f64;
    macro_rules! rowop {
        ($name:expr, $bytes:expr, $f:expr) => {{
            let m = m.clone();
            let f = $f;
            v.push(Bench {
                name: $name,
                size: msize.clone(),
                bytes: $bytes,
                flops: 0.0,
                run: Box::new(move |i| f(&m[i % 2])),
            });
        }};
    }
    rowop!("sum_rows", mbytes, |t: &Tensor| ops::sum(t, Some(&[-1]), false));
    rowop!("sum_all", mbytes, |t: &Tensor| ops::sum(t, None, false));
    rowop!("mean_rows", mbytes, |t: &Tensor| ops::mean(t, Some(&[-1]), false));
    rowop!("max_rows", mbytes, |t: &Tensor| ops::max(t, Some(&[-1]), false));
    rowop!("sum_cols", mbytes, |t: &Tensor| ops::sum(t, Some(&[0]), false));
    rowop!("softmax", 2.0 * mbytes, |t: &Tensor| ops::softmax(t, -1));
    // Kiln only: the rows read three times from memory, as before they were kept in registers.
    rowop!("softmax.streamed", 2.0 * mbytes, |t: &Tensor| ops::softmax_on_path(t, -1, false, false));
    let w = rand(&[cols], DType::F32, 9)?;
    let b = rand(&[cols], DType::F32, 10)?;
    {
        let (w, b) = (w.clone(), b.clone());
        rowop!("layer_norm", 2.0 * mbytes, move |t: &Tensor| ops::layer_norm(t, Some(&w), Some(&b), 1e-5));
    }
    rowop!("rms_norm", 2.0 * mbytes, move |t: &Tensor| ops::rms_norm(t, Some(&w), 1e-5));

    for dt in [DType::F32, DType::F16] {
        if dt == DType::F16 && !kiln_core::device()?.has_f16() {
            continue;
        }
        let a = pair(&[mm, mm], dt, 11)?;
        let bm = pair(&[mm, mm], dt, 13)?;
        v.push(Bench {
            name: if dt == DType::F32 { "matmul_f32" } else { "matmul_f16" },
            size: format!(
                "{mm}x{mm}x{mm}{}",
                if dt == DType::F16 { f16_path(&a[0], &bm[0], mm, mm, mm)? } else { String::new() }
            ),
            bytes: 0.0,
            flops: 2.0 * (mm as f64).powi(3),
            run: Box::new(move |i| ops::matmul(&a[i % 2], &bm[i % 2])),
        });
    }
    // f16 with M and N not multiples of any tile (but of 8): the edge tiles' path (issue 30).
    if kiln_core::device()?.has_f16() {
        let r = if quick { 200 } else { 4000 };
        let a = pair(&[r, r], DType::F16, 11)?;
        let bm = pair(&[r, r], DType::F16, 13)?;
        v.push(Bench {
            name: "matmul_f16_ragged",
            size: format!("{r}x{r}x{r}{}", f16_path(&a[0], &bm[0], r, r, r)?),
            bytes: 0.0,
            flops: 2.0 * (r as f64).powi(3),
            run: Box::new(move |i| ops::matmul(&a[i % 2], &bm[i % 2])),
        });
    }
    {
        let (bt, n) = if quick { (4, 128) } else { (32, 1024) };
        let a = pair(&[bt, n, n], DType::F32, 15)?;
        let bm = pair(&[bt, n, n], DType::F32, 17)?;
        v.push(Bench {
            name: "matmul_batched_f32",
            size: format!("{bt}x{n}x{n}x{n}"),
            bytes: 0.0,
            flops: 2.0 * bt as f64 * (n as f64).powi(3),
            run: Box::new(move |i| ops::matmul(&a[i % 2], &bm[i % 2])),
        });
        // f16: the native tier's batched product where the adapter has it (issue 30).
        if kiln_core::device()?.has_f16() {
            let a = pair(&[bt, n, n], DType::F16, 15)?;
            let bm = pair(&[bt, n, n], DType::F16, 17)?;
            v.push(Bench {
                name: "matmul_batched_f16",
                size: format!("{bt}x{n}x{n}x{n}{}", f16_path(&a[0], &bm[0], n, n, n)?),
                bytes: 0.0,
                flops: 2.0 * bt as f64 * (n as f64).powi(3),
                run: Box::new(move |i| ops::matmul(&a[i % 2], &bm[i % 2])),
            });
        }
    }
    for dt in [DType::F32, DType::F16] {
        if dt == DType::F16 && !kiln_core::device()?.has_f16() {
            continue;
        }
        let f16 = dt == DType::F16;
        let (n, c, hw) = if quick { (2, 16, 14) } else { (32, 64, 56) };
        let x = pair(&[n, c, hw, hw], dt, 19)?;
        let w = rand(&[c, c, 3, 3], dt, 21)?;
        v.push(Bench {
            name: if f16 { "conv2d_3x3_f16" } else { "conv2d_3x3" },
            size: format!("{n}x{c}x{hw}x{hw} k3 p1"),
            bytes: 0.0,
            flops: 2.0 * (n * c * hw * hw * c * 9) as f64,
            run: Box::new(move |i| ops::conv2d(&x[i % 2], &w, None, [1, 1], [1, 1], [1, 1], 1)),
        });
        // Other conv shapes, the same rows as torch_bench.py: (names, C, O, kernel, stride,
        // padding, groups) on [n, C, hw, hw].
        #[allow(clippy::type_complexity)]
        let more: [(&str, &str, usize, usize, usize, usize, usize, usize); 4] = [
            ("conv2d_1x1", "conv2d_1x1_f16", c, 4 * c, 1, 1, 0, 1),
            ("conv2d_3x3_s2", "conv2d_3x3_s2_f16", c, 2 * c, 3, 2, 1, 1),
            ("conv2d_3x3_g4", "conv2d_3x3_g4_f16", c, c, 3, 1, 1, 4),
            ("conv2d_dw3x3", "conv2d_dw3x3_f16", 2 * c, 2 * c, 3, 1, 1, 2 * c),
        ];
        for (name, name16, ci, o, k, st, pd, g) in more {
            let x = pair(&[n, ci, hw, hw], dt, 23)?;
            let w = rand(&[o, ci / g, k, k], dt, 25)?;
            let ohw = (hw + 2 * pd - k) / st + 1;
            v.push(Bench {
                name: if f16 { name16 } else { name },
                size: format!("{n}x{ci}x{hw}x{hw} o{o} k{k} s{st} p{pd} g{g}"),
                bytes: 0.0,
                flops: 2.0 * (n * o * ohw * ohw * (ci / g) * k * k) as f64,
                run: Box::new(move |i| ops::conv2d(&x[i % 2], &w, None, [st, st], [pd, pd], [1, 1], g)),
            });
        }
    }
    attention_benches(quick, &mut v)?;
    dispatch_floor_bench(&mut v);
    quant_matvec_benches(quick, &mut v);
    quant_prefill_benches(quick, &mut v);
    quant_epilogue_benches(quick, &mut v);
    Ok(v)
}

/// Which tier and tiling `matmul` runs an f16 `m` x `k` by `k` x `n` product with here, as a
/// suffix of the row's size (" [native cm2_l]", " [wgsl]"): A/B runs with `KILN_NATIVE_TILES`
/// or `KILN_NATIVE_KERNELS=0` then say what they measured. Read after one product of `a` and `b`:
/// a native module the driver refuses is passed over from its first product on.
fn f16_path(a: &Tensor, b: &Tensor, m: usize, n: usize, k: usize) -> Result<String> {
    ops::matmul(a, b)?;
    let dev = kiln_core::device()?;
    Ok(match ops::native_tiling_for(&dev, m, n, k) {
        Some(t) => format!(" [native {t}]"),
        None => " [wgsl]".into(),
    })
}

/// Decode's quantized matrix-vector products at Llama-3.2-1B's shapes (Q4_0, Q8_0, and the
/// Q4_K / Q6_K of a Q4_K_M, Q5_K of a Q5_K_M; `.strided`: the old K kernel) and SmolLM2-135M's
/// (Q4_1), with the fusions decode uses, in GB/s of
/// weight bytes read. Weights are
/// random bytes (speed does not depend on their values), in enough copies (alternated) that the
/// set exceeds an H100's 50 MB L2, as a model's weights do; built on the first call, so a
/// filtered-out row costs nothing. `--quick` takes 1/16 of the rows. `KILN_QUANT_MATVEC=strided`
/// or `wide` forces a kernel for A/B runs.
/// What a dependent dispatch costs at the least: a chain of one-element adds, each reading the
/// previous one's output (so the GPU must finish one before it starts the next), in GPU time a
/// link. Every decode token pays this floor once per dispatch.
fn dispatch_floor_bench(v: &mut Vec<Bench>) {
    let one: std::sync::OnceLock<Tensor> = std::sync::OnceLock::new();
    let last = std::sync::Mutex::new(None::<Tensor>);
    v.push(Bench {
        name: "dispatch_floor",
        size: "1 f32, dependent chain".into(),
        bytes: 8.0,
        flops: 0.0,
        run: Box::new(move |_| {
            if one.get().is_none() {
                let _ = one.set(ops::random_uniform(&[1], DType::F32, 5, -1.0, 1.0)?);
            }
            let one = one.get().expect("set above");
            let mut l = last.lock().expect("bench state");
            let y = match l.take() {
                Some(prev) => ops::add(&prev, one)?,
                None => one.clone(),
            };
            *l = Some(y.clone());
            Ok(y)
        }),
    });
}

fn quant_matvec_benches(quick: bool, v: &mut Vec<Bench>) {
    use ops::QuantFormat::{Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, Q8_0};
    // (name, format, N outputs, K, SwiGLU, RMSNorm, residual); a name ending in `.strided`
    // forces the strided kernel (the K formats' kernel before quant_matvec_k), `_m4` / `_m16` take 4 /
    // 16 rows of x (batched decode).
    #[allow(clippy::type_complexity)]
    let rows: [(&'static str, ops::QuantFormat, usize, usize, bool, bool, bool); 27] = [
        ("quant_matvec_q4_0_gateup", Q4_0, 8192, 2048, true, true, false),
        ("quant_matvec_q4_0_o", Q4_0, 2048, 2048, false, false, true),
        ("quant_matvec_q4_0_qkv", Q4_0, 3072, 2048, false, true, false),
        ("quant_matvec_q4_0_down", Q4_0, 2048, 8192, false, false, true),
        ("quant_matvec_q4_0_head", Q4_0, 128256, 2048, false, true, false),
        ("quant_matvec_q8_0_gateup", Q8_0, 8192, 2048, true, true, false),
        ("quant_matvec_q8_0_down", Q8_0, 2048, 8192, false, false, true),
        ("quant_matvec_q8_0_head", Q8_0, 128256, 2048, false, true, false),
        ("quant_matvec_q4_1_gateup", Q4_1, 1536, 576, true, true, false),
        ("quant_matvec_q4_1_down", Q4_1, 576, 1536, false, false, true),
        ("quant_matvec_q4_1_head", Q4_1, 49152, 576, false, true, false),
        ("quant_matvec_q4_k_gateup", Q4_K, 8192, 2048, true, true, false),
        ("quant_matvec_q4_k_down", Q4_K, 2048, 8192, false, false, true),
        ("quant_matvec_q6_k_down", Q6_K, 2048, 8192, false, false, true),
        ("quant_matvec_q6_k_head", Q6_K, 128256, 2048, false, true, false),
        ("quant_matvec_q4_k_qkv", Q4_K, 3072, 2048, false, true, false),
        ("quant_matvec_q6_k_v", Q6_K, 512, 2048, false, true, false),
        ("quant_matvec_q4_k_o", Q4_K, 2048, 2048, false, false, true),
        ("quant_matvec_q5_k_gateup", Q5_K, 8192, 2048, true, true, false),
        ("quant_matvec_q4_k_gateup_m4", Q4_K, 8192, 2048, true, true, false),
        ("quant_matvec_q4_k_gateup.strided", Q4_K, 8192, 2048, true, true, false),
        ("quant_matvec_q4_k_down.strided", Q4_K, 2048, 8192, false, false, true),
        ("quant_matvec_q6_k_down.strided", Q6_K, 2048, 8192, false, false, true),
        ("quant_matvec_q6_k_head.strided", Q6_K, 128256, 2048, false, true, false),
        ("quant_matvec_q4_k_gateup_m4.strided", Q4_K, 8192, 2048, true, true, false),
        ("quant_matvec_q4_0_gateup_m16.strided", Q4_0, 8192, 2048, true, true, false),
        ("quant_matvec_q4_0_down_m16.strided", Q4_0, 2048, 8192, false, false, true),
    ];
    for (name, f, n, k, glu, norm, res) in rows {
        let n = if quick { n.div_ceil(16) } else { n };
        let kernel = if name.ends_with(".strided") { ops::MatvecKernel::Strided } else { ops::MatvecKernel::Auto };
        let m = if name.contains("_m16") {
            16
        } else if name.contains("_m4") {
            4
        } else {
            1
        };
        let w_rows = if glu { 2 * n } else { n };
        let nbytes = w_rows * f.row_bytes(k).expect("whole blocks");
        // Enough copies (cycled) to exceed any GPU's last-level cache (the H200's is 50 MB): a
        // decode token streams ~0.7 GB of weights, so its matrices always come from memory, and
        // a bench whose copies fit in L2 (as 8 copies of the 1B shape's 2.4 MB o did) times
        // cache hits instead.
        let copies = if quick { 2 } else { (256usize << 20).div_ceil(nbytes).clamp(2, 64) };
        let size = format!(
            "{}{n}x{k}{}{}{}",
            if glu { "2x" } else { "" },
            if glu { " glu" } else { "" },
            if norm { " norm" } else { "" },
            if res { " res" } else { "" }
        );
        type Operands = (Vec<Tensor>, Tensor, Tensor, Tensor);
        let made: std::sync::OnceLock<Operands> = std::sync::OnceLock::new();
        let make = move || -> kiln_core::Result<Operands> {
            let dev = kiln_core::device()?;
            let mut ws = Vec::with_capacity(copies);
            let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ nbytes as u64;
            for _ in 0..copies {
                // Bytes <= 0x3b: every f16 scale finite and below 1.
                let bytes: Vec<u8> = (0..nbytes)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        (state >> 24) as u8 & 0x3b
                    })
                    .collect();
                ws.push(ops::quant_from_bytes(&dev, &bytes, f, w_rows, k)?);
            }
            Ok((
                ws,
                ops::random_uniform(&[m, k], DType::F32, 41, -1.0, 1.0)?,
                ops::random_uniform(&[k], DType::F32, 43, 0.5, 1.5)?,
                ops::random_uniform(&[m, n], DType::F32, 47, -1.0, 1.0)?,
            ))
        };
        v.push(Bench {
            name,
            size,
            bytes: nbytes as f64,
            flops: 0.0,
            run: Box::new(move |i| {
                if made.get().is_none() {
                    let _ = made.set(make()?);
                }
                let (ws, x, g, r) = made.get().expect("set above");
                let fusion =
                    ops::QuantFusion { rms_norm: norm.then_some((g, 1e-5)), swiglu: glu, residual: res.then_some(r) };
                ops::quant_matmul_fused_kernel(x, &ws[i % ws.len()], f, n, fusion, kernel)
            }),
        });
    }
}

/// Prefill's quantized products (512 rows of f32 x) at SmolLM2-135M's shapes (Q4_1) and
/// Llama-3.2-1B's (Q4_0, Q8_0, and a Q4_K_M's Q4_K / Q6_K, Q5_K), per kernel: `.tiled` (quant_tiled.wgsl), `.coop` (cooperative
/// matrices, the tiling Auto picks), `.tWMxWNxTMxTNxBPS` (a forced tiling); the 1B QKV shape
/// also at 16/32/64/128 rows (where Auto switches kernels); and `quant_prefill_f16mm_*`, the
/// plain f16 matmul of the same shape (what dequantizing W to f16 once per pass and then the
/// existing cooperative matmul would cost, the dequantization not counted). In TFLOP/s of the
/// 2 m n k product. Weights are random bytes below 0x3c (finite scales), built on first use.
fn quant_prefill_benches(quick: bool, v: &mut Vec<Bench>) {
    use ops::ProductKernel as K;
    use ops::QuantFormat::{Q2_K, Q3_K, Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K, Q6_K, Q8_0};
    let m_full = if quick { 64 } else { 512 };
    let has_f16 = kiln_core::device().is_ok_and(|d| d.has_f16());
    let tiled: (&str, K) = ("tiled", K::Tiled);
    let coop: (&str, K) = ("coop", K::Coop);
    // Forced tilings, named `{prefix}tWMxWNxTMxTNxBPS`.
    let named = |prefix: &str, tilings: &[[u32; 5]]| -> Vec<(&'static str, K)> {
        tilings
            .iter()
            .map(|t| {
                let name = format!("{prefix}t{}x{}x{}x{}x{}", t[0], t[1], t[2], t[3], t[4]);
                (&*Box::leak(name.into_boxed_str()), K::CoopTiles(*t))
            })
            .collect()
    };
    let tilings = named(
        "",
        &[
            [2u32, 2, 4, 4, 1],
            [2, 2, 2, 4, 1],
            [2, 2, 2, 2, 1],
            [2, 2, 2, 2, 2],
            [2, 2, 4, 4, 2],
            [2, 4, 4, 2, 1],
            [4, 2, 2, 4, 1],
            [2, 2, 4, 2, 1],
            [4, 4, 2, 2, 1],
        ],
    );
    // (tag, format, N, K, rows of x, kernels)
    type Row<'a> = (&'a str, ops::QuantFormat, usize, usize, usize, Vec<(&'static str, K)>);
    let mut rows: Vec<Row> = Vec::new();
    let all: Vec<(&'static str, K)> = [tiled, coop].into_iter().chain(tilings.iter().copied()).collect();
    rows.push(("smol_gateup_q4_1", Q4_1, 3072, 576, m_full, all.clone()));
    rows.push(("smol_down_q4_1", Q4_1, 576, 1536, m_full, all.clone()));
    rows.push(("smol_qkv_q4_1", Q4_1, 960, 576, m_full, vec![tiled, coop]));
    rows.push(("l1b_gateup_q4_0", Q4_0, 16384, 2048, m_full, all.clone()));
    rows.push(("l1b_down_q4_0", Q4_0, 2048, 8192, m_full, all.clone()));
    rows.push(("l1b_qkv_q4_0", Q4_0, 3072, 2048, m_full, all.clone()));
    rows.push(("l1b_gateup_q8_0", Q8_0, 16384, 2048, m_full, vec![tiled, coop]));
    rows.push(("l1b_down_q8_0", Q8_0, 2048, 8192, m_full, vec![tiled, coop]));
    // A Q4_K_M file's matrices: Q4_K gate/up, QKV and o, Q6_K down (and V), Q5_K for Q5_K_M.
    rows.push(("l1b_gateup_q4_k", Q4_K, 16384, 2048, m_full, all.clone()));
    rows.push(("l1b_qkv_q4_k", Q4_K, 3072, 2048, m_full, vec![tiled, coop]));
    rows.push(("l1b_down_q4_k", Q4_K, 2048, 8192, m_full, vec![tiled, coop]));
    rows.push(("l1b_down_q6_k", Q6_K, 2048, 8192, m_full, all.clone()));
    rows.push(("l1b_gateup_q5_k", Q5_K, 16384, 2048, m_full, vec![tiled, coop]));
    // The formats the cooperative kernel decodes at its store (no fetch ahead).
    rows.push(("l1b_gateup_q5_0", Q5_0, 16384, 2048, m_full, vec![tiled, coop]));
    rows.push(("l1b_gateup_q5_1", Q5_1, 16384, 2048, m_full, vec![tiled, coop]));
    rows.push(("l1b_gateup_q2_k", Q2_K, 16384, 2048, m_full, vec![tiled, coop]));
    rows.push(("l1b_gateup_q3_k", Q3_K, 16384, 2048, m_full, vec![tiled, coop]));
    for m in [16, 32, 64, 128] {
        rows.push(("l1b_qkv_q4_0", Q4_0, 3072, 2048, m, vec![tiled, coop]));
    }
    // Batched decode's B = 16 rows of x: tilings of one 16-row accumulator band (bm = 16), so
    // that W is not read through 64-row tiles three quarters empty, and more workgroups.
    let band = named(
        "b16_",
        &[
            [1, 2, 1, 1, 1],
            [1, 4, 1, 1, 2],
            [1, 2, 1, 1, 4],
            [1, 2, 1, 1, 2],
            [1, 2, 1, 2, 2],
            [1, 4, 1, 2, 2],
            [1, 2, 1, 2, 4],
        ],
    );
    let b16: Vec<(&'static str, K)> = [("b16_coop", K::Coop)].into_iter().chain(band).collect();
    rows.push(("l1b_gateup_q4_0", Q4_0, 16384, 2048, 16, b16.clone()));
    rows.push(("l1b_down_q4_0", Q4_0, 2048, 8192, 16, b16.clone()));
    rows.push(("l1b_qkv_q4_0", Q4_0, 3072, 2048, 16, b16.clone()));
    rows.push(("l1b_head_q4_0", Q4_0, 128256, 2048, 16, b16));
    for (tag, f, n, k, m, kernels) in rows {
        let n = if quick { n.div_ceil(16) } else { n };
        let nbytes = n * f.row_bytes(k).expect("whole blocks");
        type Operands = (Tensor, [Tensor; 2]);
        let made: std::sync::Arc<std::sync::OnceLock<Operands>> = Default::default();
        let make = move || -> kiln_core::Result<Operands> {
            let dev = kiln_core::device()?;
            let mut state = 0x2545_f491_4f6c_dd1du64 ^ nbytes as u64;
            let bytes: Vec<u8> = (0..nbytes)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 24) as u8 & 0x3b
                })
                .collect();
            let w = ops::quant_from_bytes(&dev, &bytes, f, n, k)?;
            let x = |seed| ops::random_uniform(&[m, k], DType::F32, seed, -1.0, 1.0);
            Ok((w, [x(51)?, x(52)?]))
        };
        for (kname, kernel) in kernels {
            let name: &'static str = Box::leak(format!("quant_prefill_{tag}.{kname}").into_boxed_str());
            let made = made.clone();
            v.push(Bench {
                name,
                size: format!("{m}x{k} . {n}x{k}"),
                bytes: 0.0,
                flops: 2.0 * (m * n * k) as f64,
                run: Box::new(move |i| {
                    if made.get().is_none() {
                        let _ = made.set(make()?);
                    }
                    let (w, x) = made.get().expect("set above");
                    ops::quant_product(&x[i % 2], w, f, n, kernel)
                }),
            });
        }
        if tag == "l1b_gateup_q4_0" && m == m_full && has_f16 {
            // The same product with f16 x (half the x bytes staged): where the f32 x reads cost.
            let made = made.clone();
            let x16: std::sync::Arc<std::sync::OnceLock<[Tensor; 2]>> = Default::default();
            v.push(Bench {
                name: "quant_prefill_l1b_gateup_q4_0.coop_x_f16",
                size: format!("{m}x{k} . {n}x{k}"),
                bytes: 0.0,
                flops: 2.0 * (m * n * k) as f64,
                run: Box::new(move |i| {
                    if made.get().is_none() {
                        let _ = made.set(make()?);
                    }
                    if x16.get().is_none() {
                        let x = |seed| ops::random_uniform(&[m, k], DType::F16, seed, -1.0, 1.0);
                        let _ = x16.set([x(55)?, x(56)?]);
                    }
                    let (w, x) = (&made.get().expect("set above").0, x16.get().expect("set above"));
                    ops::quant_product(&x[i % 2], w, f, n, K::Coop)
                }),
            });
        }
        if m == m_full && has_f16 {
            let name: &'static str = Box::leak(format!("quant_prefill_f16mm_{tag}").into_boxed_str());
            let ab: std::sync::Arc<std::sync::OnceLock<(Tensor, Tensor)>> = Default::default();
            v.push(Bench {
                name,
                size: format!("{m}x{k} @ {k}x{n} f16"),
                bytes: 0.0,
                flops: 2.0 * (m * n * k) as f64,
                run: Box::new(move |_| {
                    if ab.get().is_none() {
                        let a = ops::random_uniform(&[m, k], DType::F16, 53, -1.0, 1.0)?;
                        let _ = ab.set((a, ops::random_uniform(&[k, n], DType::F16, 54, -1.0, 1.0)?));
                    }
                    let (a, b) = ab.get().expect("set above");
                    ops::matmul(a, b)
                }),
            });
        }
    }
}

/// The many-row `quant_matmul_fused` with its SwiGLU (gate/up shapes) or residual (down shapes)
/// in the cooperative kernel's store (`.fused`) or as separate ops after the product
/// (`.separate`), at SmolLM2's and Llama-3.2-1B's prefill shapes (512 rows).
fn quant_epilogue_benches(quick: bool, v: &mut Vec<Bench>) {
    use ops::EpilogueFusion as E;
    use ops::QuantFormat::{Q4_0, Q4_1, Q4_K, Q6_K};
    let m = if quick { 64 } else { 512 };
    // (tag, format, outputs N, K, SwiGLU)
    let rows = [
        ("smol_gateup_q4_1", Q4_1, 1536usize, 576usize, true),
        ("smol_down_q4_1", Q4_1, 576, 1536, false),
        ("l1b_gateup_q4_0", Q4_0, 8192, 2048, true),
        ("l1b_down_q4_0", Q4_0, 2048, 8192, false),
        ("l1b_o_q4_0", Q4_0, 2048, 2048, false),
        ("l1b_gateup_q4_k", Q4_K, 8192, 2048, true),
        ("l1b_down_q6_k", Q6_K, 2048, 8192, false),
    ];
    for (tag, f, n, k, glu) in rows {
        let n = if quick { n.div_ceil(16) } else { n };
        let w_rows = if glu { 2 * n } else { n };
        type Operands = (Tensor, Tensor, Tensor);
        let made: std::sync::Arc<std::sync::OnceLock<Operands>> = Default::default();
        let make = move || -> kiln_core::Result<Operands> {
            let dev = kiln_core::device()?;
            let nbytes = w_rows * f.row_bytes(k)?;
            let mut state = 0x5851_f42d_4c95_7f2du64 ^ nbytes as u64;
            let bytes: Vec<u8> = (0..nbytes)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 24) as u8 & 0x3b
                })
                .collect();
            Ok((
                ops::quant_from_bytes(&dev, &bytes, f, w_rows, k)?,
                ops::random_uniform(&[m, k], DType::F32, 61, -1.0, 1.0)?,
                ops::random_uniform(&[m, n], DType::F32, 62, -1.0, 1.0)?,
            ))
        };
        for (ename, e) in [("fused", E::Fused), ("separate", E::Separate), ("auto", E::Auto)] {
            let name: &'static str = Box::leak(format!("quant_epilogue_{tag}.{ename}").into_boxed_str());
            let made = made.clone();
            v.push(Bench {
                name,
                size: format!("{m}x{k} . {w_rows}x{k} {}", if glu { "swiglu" } else { "residual" }),
                bytes: 0.0,
                flops: 2.0 * (m * w_rows * k) as f64,
                run: Box::new(move |_| {
                    if made.get().is_none() {
                        let _ = made.set(make()?);
                    }
                    let (w, x, r) = made.get().expect("set above");
                    let fusion = ops::QuantFusion { swiglu: glu, residual: (!glu).then_some(r), ..Default::default() };
                    ops::quant_matmul_fused_product(x, w, f, n, fusion, ops::ProductKernel::Auto, e)
                }),
            });
        }
    }
}

/// Attention as models lay it out, [batch, heads, seq, dim] (the same rows as torch_bench.py):
/// causal prefill at two lengths, and decode (one query against a 4096-long KV cache, counted
/// in GB/s of K and V read). Each also on every path that takes it (`name.path`, Kiln only), so
/// one run shows what Auto should pick.
fn attention_benches(quick: bool, v: &mut Vec<Bench>) -> Result<()> {
    use kiln_core::ops::AttentionPath as P;
    let has_f16 = kiln_core::device()?.has_f16();
    for dt in [DType::F32, DType::F16] {
        if dt == DType::F16 && !has_f16 {
            continue;
        }
        let sfx = if dt == DType::F16 { "_f16" } else { "" };
        let prefill = [
            ("attention_causal", if quick { [2, 2, 128, 64] } else { [8, 8, 1024, 64] }),
            ("attention_causal_long", if quick { [1, 2, 512, 64] } else { [4, 16, 4096, 64] }),
            // Head dimension 128 (Llama-style): where Auto's flash/matmul line was not measured.
            ("attention_causal_d128", if quick { [2, 2, 128, 128] } else { [8, 8, 1024, 128] }),
        ];
        for (name, [b, h, l, d]) in prefill {
            let q = pair(&[b, h, l, d], dt, 23)?;
            let k = rand(&[b, h, l, d], dt, 25)?;
            let vv = rand(&[b, h, l, d], dt, 27)?;
            let coop = dt == DType::F16 && ops::uses_flash_coop(&*kiln_core::device()?, d, d);
            // `.flash_rows`: the flash path's one-row-per-thread kernel (the register-blocked one is
            // the default where it fits).
            let paths = [
                ("", P::Auto),
                (".flash", P::Flash),
                (".flash_rows", P::Flash),
                (".matmul", P::Matmul),
                (".coop", P::FlashCoop),
            ];
            for (tag, path) in &paths[..if coop { 5 } else { 4 }] {
                let (q, k, vv, path) = (q.clone(), k.clone(), vv.clone(), *path);
                let blocked = *tag != ".flash_rows";
                v.push(Bench {
                    name: Box::leak(format!("{name}{sfx}{tag}").into_boxed_str()),
                    size: format!("{b}x{h}x{l}x{d}"),
                    bytes: 0.0,
                    flops: 4.0 * (b * h * l * l * d) as f64 / 2.0,
                    run: Box::new(move |i| {
                        ops::with_flash_blocking(blocked, || {
                            ops::attention_on_path(&q[i % 2], &k, &vv, None, true, None, path)
                        })
                    }),
                });
            }
            // `.native_<variant>`: each native-tier variant this device runs at this head size
            // (the Auto row above takes the first).
            let dev = kiln_core::device()?;
            for variant in ops::attention_native_variants() {
                if dt != DType::F16 || !ops::attention_native_available(&dev, variant, d, d) {
                    continue;
                }
                let (q, k, vv) = (q.clone(), k.clone(), vv.clone());
                v.push(Bench {
                    name: Box::leak(format!("{name}{sfx}.native_{variant}").into_boxed_str()),
                    size: format!("{b}x{h}x{l}x{d}"),
                    bytes: 0.0,
                    flops: 4.0 * (b * h * l * l * d) as f64 / 2.0,
                    run: Box::new(move |i| {
                        ops::with_attention_native(variant, || {
                            ops::attention_on_path(&q[i % 2], &k, &vv, None, true, None, P::Native)
                        })
                    }),
                });
            }
        }
        let (b, h, lk, d) = if quick { (2, 2, 512, 64) } else { (8, 8, 4096, 64) };
        let q = pair(&[b, h, 1, d], dt, 29)?;
        let k = rand(&[b, h, lk, d], dt, 31)?;
        let vv = rand(&[b, h, lk, d], dt, 33)?;
        for (tag, path) in [("", P::Auto), (".split", P::SplitKv), (".fused", P::Fused), (".flash", P::Flash)] {
            let (q, k, vv) = (q.clone(), k.clone(), vv.clone());
            v.push(Bench {
                name: Box::leak(format!("attention_decode{sfx}{tag}").into_boxed_str()),
                size: format!("{b}x{h}x1x{d} kv {lk}"),
                bytes: 2.0 * (b * h * lk * d * dt.size()) as f64,
                flops: 0.0,
                run: Box::new(move |i| ops::attention_on_path(&q[i % 2], &k, &vv, None, false, None, path)),
            });
        }
        // SmolLM2-135M's decode step (Kiln only): 9 query heads over 3 KV heads (K and V
        // broadcast over the group axis, as models/src/llama.rs lays them out), a short and a
        // long cache; latency bound, so a regression in launch or combine cost shows here first.
        for lk in [128, 2048] {
            let q = pair(&[3, 3, 1, 64], dt, 35)?;
            let k = rand(&[3, 1, lk, 64], dt, 37)?;
            let vv = rand(&[3, 1, lk, 64], dt, 39)?;
            v.push(Bench {
                name: Box::leak(format!("attention_decode_gqa{lk}{sfx}").into_boxed_str()),
                size: format!("3x3x1x64 kv 3x{lk}"),
                bytes: 2.0 * (3 * lk * 64 * dt.size()) as f64,
                flops: 0.0,
                run: Box::new(move |i| ops::attention(&q[i % 2], &k, &vv, false, None)),
            });
        }
    }
    Ok(())
}

pub(crate) fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

/// GPU time of one step of a model's forward pass, summed over its occurrences (layers).
pub(crate) struct StepTime {
    pub name: &'static str,
    pub seconds: f64,
    pub passes: u32,
}

/// Runs `forward` with a GPU timer stopped and restarted at each mark it calls, and returns
/// each step's GPU time in first-seen order; empty where the adapter has no timestamp
/// queries. Each stop waits for the GPU, so this runs apart from the timed loops.
pub(crate) fn gpu_steps<T>(
    forward: impl FnOnce(&mut dyn FnMut(&'static str) -> kiln_models::Result<()>) -> kiln_models::Result<T>,
) -> Result<Vec<StepTime>> {
    let dev = kiln_core::device()?;
    dev.synchronize()?;
    if !dev.start_gpu_timer()? {
        return Ok(vec![]);
    }
    let mut steps: Vec<StepTime> = Vec::new();
    let mut mark = |name: &'static str| -> kiln_models::Result<()> {
        if let Some(t) = dev.stop_gpu_timer()? {
            match steps.iter_mut().find(|s| s.name == name) {
                Some(s) => {
                    s.seconds += t.span_s;
                    s.passes += t.passes;
                }
                None => steps.push(StepTime { name, seconds: t.span_s, passes: t.passes }),
            }
        }
        dev.start_gpu_timer()?;
        Ok(())
    };
    let result = forward(&mut mark);
    dev.stop_gpu_timer()?;
    result?;
    Ok(steps)
}

/// Runs `forward` timing on the host what each step costs to record (no GPU timer, no waits
/// between marks: the GPU runs meanwhile), and returns the steps in first-seen order with the
/// whole call's wall seconds; what the steps do not account for is the submit, the wait for the
/// GPU and the readback at the end.
pub(crate) fn host_steps<T>(
    forward: impl FnOnce(&mut dyn FnMut(&'static str) -> kiln_models::Result<()>) -> kiln_models::Result<T>,
) -> Result<(Vec<StepTime>, f64)> {
    kiln_core::device()?.synchronize()?;
    let mut steps: Vec<StepTime> = Vec::new();
    let start = Instant::now();
    let mut last = start;
    let mut mark = |name: &'static str| -> kiln_models::Result<()> {
        let now = Instant::now();
        let dt = (now - last).as_secs_f64();
        last = now;
        match steps.iter_mut().find(|s| s.name == name) {
            Some(s) => {
                s.seconds += dt;
                s.passes += 1;
            }
            None => steps.push(StepTime { name, seconds: dt, passes: 1 }),
        }
        Ok(())
    };
    forward(&mut mark)?;
    Ok((steps, start.elapsed().as_secs_f64()))
}

/// Median wall seconds of `reps` calls of `f` after `warm` untimed ones (the model sections:
/// whole programs' calls, host work included).
pub(crate) fn wall_median(warm: usize, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..warm {
        f()?;
    }
    let mut xs = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f()?;
        xs.push(t.elapsed().as_secs_f64());
    }
    Ok(median(xs))
}

/// One op's figures, each the median over the repetitions, per call.
struct Timing {
    /// GPU time from timestamp queries (first pass begin to last pass end), where the adapter
    /// has them.
    gpu: Option<f64>,
    /// Wall clock around the loop, synchronize included.
    wall: f64,
    /// Host time recording and submitting, before the final wait: when close to `wall`, the op
    /// is bound by host overhead, not by the GPU.
    host: f64,
}

impl Timing {
    /// The figure reported: GPU time where measured, else wall clock.
    fn seconds(&self) -> f64 {
        self.gpu.unwrap_or(self.wall)
    }
}

/// Seconds of untimed calls before each figure (see `time_op`); torch_bench.py does the same.
const WARM_SECONDS: f64 = 0.1;

fn time_op(f: &dyn Fn(usize) -> kiln_core::Result<Tensor>, reps: usize, use_timer: bool) -> Result<Timing> {
    // Ops queue into Kiln's batch as in real use; KILN_BENCH_FLUSH=1 submits after every call.
    let flush = std::env::var("KILN_BENCH_FLUSH").is_ok_and(|v| v == "1");
    let dev = kiln_core::device()?;
    for i in 0..2 {
        f(i)?;
    }
    dev.synchronize()?;
    let t = Instant::now();
    f(0)?;
    dev.synchronize()?;
    let one = t.elapsed().as_secs_f64();
    let iters = ((0.05 / one.max(1e-6)) as usize).clamp(3, 200);
    // Keep the GPU busy for WARM_SECONDS before timing: after a phase of small, latency-bound
    // work its clocks drop, and a heavy kernel timed right after ran at a quarter of its speed
    // (H100: f16 attention 0.65 ms after the decode rows, 0.17 ms alone).
    let t = Instant::now();
    let mut i = 0;
    while t.elapsed().as_secs_f64() < WARM_SECONDS {
        for _ in 0..iters {
            drop(f(i)?);
            i += 1;
        }
        dev.synchronize()?;
    }
    let (mut gpu, mut wall, mut host) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps {
        let timed = use_timer && dev.start_gpu_timer()?;
        let t = Instant::now();
        for i in 0..iters {
            drop(f(i)?);
            if flush {
                dev.flush()?;
            }
        }
        host.push(t.elapsed().as_secs_f64() / iters as f64);
        dev.synchronize()?;
        wall.push(t.elapsed().as_secs_f64() / iters as f64);
        if timed {
            if let Some(g) = dev.stop_gpu_timer()? {
                gpu.push(g.span_s / iters as f64);
            }
        }
    }
    Ok(Timing { gpu: (gpu.len() == reps).then(|| median(gpu)), wall: median(wall), host: median(host) })
}

pub fn main(args: Args) -> Result<()> {
    let dev = kiln_core::device()?;
    let info = dev.info().clone();
    println!("kiln bench on {} ({} {}, {})", info.name, info.driver, info.driver_info, info.backend);
    let mut results = Vec::new();
    let use_timer = !args.wall_clock && info.timestamp_query;
    let clock = if use_timer { "GPU timestamp queries" } else { "wall clock" };
    println!("timing: {clock} (median of {} repetitions; wall ms includes recording and the final wait)", args.reps);
    println!(
        "{:<20} {:<22} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "op", "size", "ms", "GB/s", "TFLOP/s", "wall ms", "host ms"
    );
    let want = |name: &str| args.filter.as_deref().is_none_or(|f| name.contains(f));
    for b in benches(args.quick)? {
        if !want(b.name) {
            continue;
        }
        let t = match time_op(&b.run, args.reps, use_timer) {
            Ok(t) => t,
            Err(e) => {
                println!("{:<20} {:<22} error: {e}", b.name, b.size);
                continue;
            }
        };
        let s = t.seconds();
        let gbps = (b.bytes > 0.0).then(|| b.bytes / s / 1e9);
        let tflops = (b.flops > 0.0).then(|| b.flops / s / 1e12);
        println!(
            "{:<20} {:<22} {:>10.4} {:>10} {:>10} {:>10.4} {:>10.4}",
            b.name,
            b.size,
            s * 1e3,
            gbps.map_or("-".into(), |g| format!("{g:.1}")),
            tflops.map_or("-".into(), |t| format!("{t:.2}")),
            t.wall * 1e3,
            t.host * 1e3
        );
        if std::env::var_os("KILN_BENCH_MEMORY").is_some() {
            let m = dev.memory_stats();
            let st = dev.pipeline_stats();
            println!("    memory: {m:?}; pipelines: {st:?}");
        }
        results.push(json!({
            "op": b.name, "size": b.size, "seconds": s, "timer": if t.gpu.is_some() { "gpu" } else { "wall" },
            "gpu_seconds": t.gpu, "wall_seconds": t.wall, "host_seconds": t.host, "gbps": gbps, "tflops": tflops,
        }));
    }
    if want("small_ops") {
        // 1000 dependent tiny ops queued, then one readback.
        // Also split out, per op: host time recording, and GPU time (timestamps) in a second,
        // timed round, to show which side bounds the chain.
        let n_ops = 1000;
        let (mut samples, mut record, mut gpu) = (Vec::new(), Vec::new(), Vec::new());
        for rep in 0..2 * args.reps.max(3) {
            let timed = rep % 2 == 1 && info.timestamp_query && dev.start_gpu_timer()?;
            let mut x = Tensor::from_slice(&[0.0f32; 256], &[256])?;
            if !timed {
                dev.synchronize()?;
            }
            let t = Instant::now();
            for _ in 0..n_ops {
                x = ops::add_scalar(&x, 1.0)?;
            }
            let recorded = t.elapsed().as_secs_f64() / n_ops as f64;
            let v = x.to_vec::<f32>()?;
            anyhow::ensure!(v[0] == n_ops as f32, "small-op chain gave {}", v[0]);
            if timed {
                if let Some(g) = dev.stop_gpu_timer()? {
                    gpu.push(g.span_s / n_ops as f64);
                }
            } else {
                samples.push(t.elapsed().as_secs_f64() / n_ops as f64);
                record.push(recorded);
            }
        }
        let s = median(samples);
        let (rec, g) = (median(record), (!gpu.is_empty()).then(|| median(gpu)));
        println!(
            "{:<20} {:<22} {:>10.2} µs/op (recording {:.2} µs/op, GPU {} µs/op)",
            "small_ops_1000",
            "256 f32, dependent",
            s * 1e6,
            rec * 1e6,
            g.map_or("-".into(), |g| format!("{:.2}", g * 1e6))
        );
        results.push(json!({"op": "small_ops_1000", "size": "256 f32", "seconds": s, "us_per_op": s * 1e6, "record_seconds": rec, "gpu_seconds": g}));
    }
    if want("latency") {
        // One tiny op, submitted and waited for: the round trip an interactive caller pays.
        let x = Tensor::from_slice(&[0.0f32; 256], &[256])?;
        dev.synchronize()?;
        let mut samples = Vec::new();
        for _ in 0..200 {
            let t = Instant::now();
            let y = ops::add_scalar(&x, 1.0)?;
            dev.synchronize()?;
            samples.push(t.elapsed().as_secs_f64());
            drop(y);
        }
        let s = median(samples);
        println!("{:<20} {:<22} {:>10.2} µs", "latency_1op", "256 f32, op + sync", s * 1e6);
        results.push(json!({"op": "latency_1op", "size": "256 f32", "seconds": s, "us_per_op": s * 1e6}));
        // Where the round trip goes: recording the op, submitting it (the parameter upload
        // included), waiting for it.
        let (mut rec, mut sub, mut wait) = (Vec::new(), Vec::new(), Vec::new());
        let (mut upload, mut finish, mut submit) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..200 {
            let t0 = Instant::now();
            let y = ops::add_scalar(&x, 1.0)?;
            let t1 = Instant::now();
            dev.flush()?;
            let t2 = Instant::now();
            let phases = dev.last_submit_phases();
            dev.synchronize()?;
            let t3 = Instant::now();
            rec.push((t1 - t0).as_secs_f64());
            sub.push((t2 - t1).as_secs_f64());
            wait.push((t3 - t2).as_secs_f64());
            upload.push(phases.upload.as_secs_f64());
            finish.push(phases.finish.as_secs_f64());
            submit.push(phases.submit.as_secs_f64());
            drop(y);
        }
        // A synchronize with nothing queued: the wait's own floor (callback, polls, wake-up).
        let mut idle = Vec::new();
        for _ in 0..200 {
            let t = Instant::now();
            dev.synchronize()?;
            idle.push(t.elapsed().as_secs_f64());
        }
        let (rec, sub, wait) = (median(rec), median(sub), median(wait));
        let (upload, finish, submit, idle) = (median(upload), median(finish), median(submit), median(idle));
        println!(
            "{:<20} {:<22} record {:.2} µs, submit {:.2} µs (upload {:.2}, finish {:.2}, queue.submit {:.2}), \
             wait {:.2} µs; idle synchronize {:.2} µs; ring dispatches {}",
            "latency_phases",
            "256 f32",
            rec * 1e6,
            sub * 1e6,
            upload * 1e6,
            finish * 1e6,
            submit * 1e6,
            wait * 1e6,
            idle * 1e6,
            dev.param_ring_dispatches()
        );
        results.push(json!({"op": "latency_phases", "size": "256 f32", "record_seconds": rec, "submit_seconds": sub,
            "wait_seconds": wait, "upload_seconds": upload, "finish_seconds": finish, "queue_submit_seconds": submit,
            "idle_sync_seconds": idle}));
    }
    if want("transfer") {
        let n = if args.quick { 1 << 20 } else { 64 << 20 };
        let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let bytes = (n * 4) as f64;
        let mut up = Vec::new();
        let mut down = Vec::new();
        for _ in 0..args.reps {
            let t = Instant::now();
            let g = Tensor::from_slice(&host, &[n])?;
            dev.synchronize()?;
            up.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            let back = g.to_vec::<f32>()?;
            down.push(t.elapsed().as_secs_f64());
            anyhow::ensure!(back[n - 1] == (n - 1) as f32, "readback mismatch");
        }
        for (name, s) in [("upload", median(up)), ("readback", median(down))] {
            println!(
                "{:<20} {:<22} {:>10.3} {:>10.1}",
                name,
                format!("{} MiB", (n * 4) >> 20),
                s * 1e3,
                bytes / s / 1e9
            );
            results.push(
                json!({"op": name, "size": format!("{} MiB", (n * 4) >> 20), "seconds": s, "gbps": bytes / s / 1e9}),
            );
        }
    }
    if want("embed") {
        if args.minilm.join("model.safetensors").exists() {
            results.extend(crate::bench_embed::run(&args.minilm, args.quick, args.reps)?);
        } else {
            println!("embed: skipped, no model in {} (make minilm)", args.minilm.display());
        }
    }
    // `--filter llm_prefill`: only the llm section's prefill rows.
    let prefill_only = args.filter.as_deref() == Some("llm_prefill");
    if want("llm") || prefill_only {
        if args.smollm2.exists() {
            results.extend(crate::bench_llm::run(&args.smollm2, args.quick, args.reps, prefill_only)?);
        } else {
            println!("llm: skipped, no model at {} (make smollm2)", args.smollm2.display());
        }
    }
    if want("llm_batch") {
        if args.smollm2.exists() {
            results.extend(crate::bench_llm::run_batch(&args.smollm2, args.quick, args.reps)?);
        } else {
            println!("llm_batch: skipped, no model at {} (make smollm2)", args.smollm2.display());
        }
    }
    // Only when asked for (`--filter dp`): it loads each model once per device count.
    if args.filter.as_deref().is_some_and(|f| f.starts_with("dp")) {
        let dp = crate::bench_dp::DpArgs {
            minilm: &args.minilm,
            smollm2: &args.smollm2,
            quick: args.quick,
            reps: args.reps,
            devices: args.devices.clone(),
        };
        results.extend(crate::bench_dp::run(&dp)?);
    }
    if let Some(path) = args.json {
        let doc = json!({
            "device": info.name, "driver": format!("{} {}", info.driver, info.driver_info),
            "backend": info.backend, "quick": args.quick, "results": results,
        });
        std::fs::write(&path, serde_json::to_string_pretty(&doc)?)?;
        println!("wrote {path}");
    }
    Ok(())
}
