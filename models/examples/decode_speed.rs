//! Decode and prefill speed of CausalLM on one backend, as issue 29's CPU-fallback numbers are
//! taken: a 128-token prompt (prefill time = first-token time, greedy), then `decode` greedy
//! tokens with EOS ignored.
//!
//!     cargo run --release -p kiln-models --example decode_speed -- MODEL.gguf cpu|gpu [decode] [repeats]
//!
//! With `gpu` it also times one Q4_1 matvec of the model's gate/up shape ([3072, 576]) on
//! kiln-core's device, against its bytes, to show where a software adapter's time goes.

use kiln_core::ops::{self, QuantFormat};
use kiln_models::{Backend, CausalLM, GenerateOptions};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).ok_or("usage: decode_speed MODEL.gguf cpu|gpu [decode] [repeats]")?;
    let backend = Backend::parse(args.get(2).map_or("auto", String::as_str)).ok_or("backend: auto, cpu or gpu")?;
    let decode: usize = args.get(3).map_or(Ok(128), |s| s.parse())?;
    let repeats: usize = args.get(4).map_or(Ok(3), |s| s.parse())?;
    let t0 = Instant::now();
    let model = CausalLM::load_on(path, backend, |_, _| {})?;
    eprintln!("{}: loaded in {:.2} s", model.backend(), t0.elapsed().as_secs_f64());
    let text = "The history of the city begins with a small settlement on the river, where traders met to \
                exchange grain, salt and cloth. Over the centuries it grew into a market town, then a port. ";
    let mut prompt = model.tokenizer().encode(&text.repeat(8))?;
    prompt.truncate(128);
    assert_eq!(prompt.len(), 128);
    if model.backend() == Backend::Gpu {
        matvec_probe()?;
    }
    for r in 0..repeats {
        let opts = GenerateOptions { max_tokens: decode + 1, stop_at_eos: false, ..Default::default() };
        let mut g = model.generate_from_ids(prompt.clone(), opts);
        g.text()?;
        let s = g.stats();
        println!(
            "{} run {r}: prompt {} tokens: prefill (first token) {:.3} s = {:.1} tokens/s; decode {} tokens at {:.2} tokens/s",
            model.backend(),
            s.prompt_tokens,
            s.prefill.as_secs_f64(),
            s.prefill_tokens_per_s(),
            s.generated_tokens.saturating_sub(1),
            s.decode_tokens_per_s()
        );
    }
    Ok(())
}

/// One [3072, 576] Q4_1 matvec on kiln-core's device: ms per call and the bytes it reads.
fn matvec_probe() -> Result<(), Box<dyn std::error::Error>> {
    let (n, k) = (3072, 576);
    let dev = kiln_core::device()?;
    let vals: Vec<f32> = (0..n * k).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect();
    let bytes = kiln_core::reference::quant::quantize(&vals, QuantFormat::Q4_1);
    let w = ops::quant_from_bytes(&dev, &bytes, QuantFormat::Q4_1, n, k)?;
    let x = kiln_core::Tensor::from_slice_on(&dev, &vec![0.5f32; k], &[1, k])?;
    for reps in [1usize, 1, 20] {
        let t = Instant::now();
        let mut y = None;
        for _ in 0..reps {
            y = Some(ops::quant_matmul(&x, &w, QuantFormat::Q4_1, n)?);
        }
        dev.synchronize()?;
        drop(y);
        let per = t.elapsed().as_secs_f64() / reps as f64;
        println!(
            "{}: one Q4_1 [{n}, {k}] matvec ({} KiB of blocks): {:.2} ms per call over {reps} calls ({:.2} GB/s)",
            dev.info().name,
            bytes.len() / 1024,
            per * 1e3,
            bytes.len() as f64 / per / 1e9
        );
    }
    Ok(())
}
