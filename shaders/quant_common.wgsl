// Shared by the quant kernels: reading GGUF blocks (Q4_0, Q4_1, Q8_0) out of a U32 tensor `w`
// that holds the raw bytes, little-endian, zero-padded to whole words. Every block size (18, 20,
// 34 bytes) is even, so blocks and their fields start on 16-bit boundaries: a field is read as
// one or two words and shifted. The kernel that includes this declares `w`.
//
// A "unit" is 8 values of one block, decoded together: values at block positions pa..pa+3 in
// `a` and pb..pb+3 in `b`, each `d * q + m` (m = 0 but for Q4_1), computed as ggml's
// dequantize_row_* does (d * q is exact in f32, so a fused multiply-add rounds the same).

// Halfwords per block, and the units (of 8 values) in a block.
const BLOCK_H: u32 = {{BLOCK_H}}u;
const UPB: u32 = 4u;

// The 16 bits at halfword index h.
fn half_at(h: u32) -> u32 {
    let word = w[h >> 1u];
    return select(word & 0xffffu, word >> 16u, (h & 1u) == 1u);
}

// The 32 bits starting at halfword index h.
fn word_at(h: u32) -> u32 {
    let i = h >> 1u;
    if ((h & 1u) == 0u) {
        return w[i];
    }
    return (w[i] >> 16u) | (w[i + 1u] << 16u);
}

// IEEE half bits to f32, subnormals, infinities and NaN payloads kept (decoded by hand so that
// no driver's unpack2x16float flushes subnormal scales).
fn half_to_f32(h: u32) -> f32 {
    let s = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0u) {
        let v = f32(m) * 5.9604644775390625e-8;  // m * 2^-24
        return select(v, -v, s != 0u);
    }
    if (e == 31u) {
        return bitcast<f32>(s | 0x7f800000u | (m << 13u));
    }
    return bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
}

struct Unit {
    a: vec4<f32>,
    b: vec4<f32>,
    pa: u32,
    pb: u32,
}

fn nibbles(q: u32, shift: u32) -> vec4<f32> {
    return vec4<f32>(
        f32((q >> shift) & 0xfu),
        f32((q >> (shift + 8u)) & 0xfu),
        f32((q >> (shift + 16u)) & 0xfu),
        f32((q >> (shift + 24u)) & 0xfu),
    );
}

fn sbytes(q: u32) -> vec4<f32> {
    let v = bitcast<i32>(q);
    return vec4<f32>(f32((v << 24u) >> 24u), f32((v << 16u) >> 24u), f32((v << 8u) >> 24u), f32(v >> 24u));
}

// Unit u (0..UPB) of the block starting at halfword hb.
fn decode(hb: u32, u: u32) -> Unit {
    var r: Unit;
{{DECODE}}
    return r;
}
