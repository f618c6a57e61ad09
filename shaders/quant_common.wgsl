// Shared by the quant kernels: reading GGUF blocks (Q4_0, Q4_1, Q8_0, Q5_0, Q5_1 and the K
// formats' super-blocks) out of a U32 tensor `w` that holds the raw bytes, little-endian,
// zero-padded to whole words. Every block size is even, so blocks and their 16-bit fields start
// on 16-bit boundaries: a field is read as one or two words and shifted. The kernel that
// includes this declares `w`.
//
// The kernels walk a row in groups of 32 values (a whole block, or one of a K super-block's 8)
// through `decode_at`. A "unit" is 8 values of one group, decoded together: values at group
// positions pa..pa+3 in `a` and pb..pb+3 in `b`, computed as ggml's dequantize_row_* does (its
// products of small integers and f16 scales are exact in f32, so a fused multiply-add rounds
// the same).

// Halfwords per block, and the units (of 8 values) in a block.
const BLOCK_H: u32 = {{BLOCK_H}}u;
const UPB: u32 = 4u;
// 32-value groups per block: 1, or 8 for a K super-block.
const GPB: u32 = {{GPB}}u;

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

// The byte at byte offset `off` of the block starting at halfword hb.
fn byte_at(hb: u32, off: u32) -> u32 {
    let o = 2u * hb + off;
    return (w[o >> 2u] >> ((o & 3u) * 8u)) & 0xffu;
}

// The same byte as a signed 8-bit integer.
fn sbyte_at(hb: u32, off: u32) -> i32 {
    return (bitcast<i32>(byte_at(hb, off)) << 24u) >> 24u;
}

// Bits first .. first + 3 of q (Q5_0 / Q5_1's fifth bits of 4 values).
fn bits4(q: u32, first: u32) -> vec4<f32> {
    return vec4<f32>(f32((q >> first) & 1u), f32((q >> (first + 1u)) & 1u), f32((q >> (first + 2u)) & 1u),
                     f32((q >> (first + 3u)) & 1u));
}

// Bit `bit` of each byte of q (Q5_K's fifth bits).
fn byte_bits(q: u32, bit: u32) -> vec4<f32> {
    return vec4<f32>(f32((q >> bit) & 1u), f32((q >> (bit + 8u)) & 1u), f32((q >> (bit + 16u)) & 1u),
                     f32((q >> (bit + 24u)) & 1u));
}

// Bits shift, shift + 1 of each byte of q (Q6_K's high 2 bits).
fn crumbs(q: u32, shift: u32) -> vec4<f32> {
    return vec4<f32>(f32((q >> shift) & 3u), f32((q >> (shift + 8u)) & 3u), f32((q >> (shift + 16u)) & 3u),
                     f32((q >> (shift + 24u)) & 3u));
}

// ggml's get_scale_min_k4: the 6-bit scale and min of group j of the Q4_K / Q5_K super-block at
// halfword hb (12 bytes of them from byte 4).
fn scale_min_k4(hb: u32, j: u32) -> vec2<u32> {
    if (j < 4u) {
        return vec2<u32>(byte_at(hb, 4u + j) & 63u, byte_at(hb, 8u + j) & 63u);
    }
    let b = byte_at(hb, 8u + j);
    return vec2<u32>((b & 0xfu) | ((byte_at(hb, j) >> 6u) << 4u), (b >> 4u) | ((byte_at(hb, 4u + j) >> 6u) << 4u));
}

// scale_min_k4 from the scale words already loaded: q0, q1, q2 hold the 12 bytes (bytes 4..16
// of the super-block), j the group.
fn scale_min_k4_words(q0: u32, q1: u32, q2: u32, j: u32) -> vec2<u32> {
    let t = 8u * (j % 4u);
    if (j < 4u) {
        return vec2<u32>((q0 >> t) & 63u, (q1 >> t) & 63u);
    }
    let b = q2 >> t;
    return vec2<u32>((b & 0xfu) | ((((q0 >> t) >> 6u) & 3u) << 4u), ((b >> 4u) & 0xfu) | ((((q1 >> t) >> 6u) & 3u) << 4u));
}

// Q3_K's 6-bit scale j (of 16), minus 32, of the super-block at halfword hb (12 bytes from
// byte 96: low nibbles in bytes 0..8, high 2 bits in bytes 8..12).
fn q3_scale(hb: u32, j: u32) -> i32 {
    let lo = select(byte_at(hb, 96u + j - 8u) >> 4u, byte_at(hb, 96u + j) & 0xfu, j < 8u);
    let hi = (byte_at(hb, 104u + j % 4u) >> (2u * (j / 4u))) & 3u;
    return i32(lo | (hi << 4u)) - 32;
}

// Unit u (0..UPB) of group s (0..GPB) of the block starting at halfword hb.
fn decode(hb: u32, s: u32, u: u32) -> Unit {
    var r: Unit;
{{DECODE}}
    return r;
}

// Unit u of group b (0..K/32) of the W row starting at halfword hrow.
fn decode_at(hrow: u32, b: u32, u: u32) -> Unit {
    return decode(hrow + (b / GPB) * BLOCK_H, b % GPB, u);
}
