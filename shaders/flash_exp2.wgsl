// 2^x for the flash kernels' online softmax (rendered into flash_attention.wgsl and
// flash_attention_blocked.wgsl as FLASH_EXP2), where x is a score minus its row's running maximum
// or the old maximum minus the new one: x <= 0, -inf (masked keys), or NaN (inf - inf, NaN in q or
// k). The shared k_exp2 (elementwise_special.wgsl) serves every x to a few ULP, with branches for
// overflow, NaN and subnormal results; over this range a cheaper form keeps what the tests and the
// conformance suite need, with the same builtin-free property (only floor, fma, select and bit
// operations: the same bits on every backend):
//  - x below -127 (-inf included) is clamped to -127, whose 2^k has the bits of +0: results under
//    about 2^-126.5 are 0 (subnormal weights, rounded or flushed, cannot move a row whose
//    largest weight is 1).
//    The clamp is on the bits (b in (bits of -127, bits of -inf], one unsigned comparison), so
//    NaN of either sign stays NaN through the arithmetic: as a float comparison and select, the
//    H100's compiler made it a max, which returns the other operand for NaN (the tests caught
//    it: an inf - inf score gave a finite row);
//  - 2^x = 2^k 2^f with k = floor(x + 1/2) and f = x - k in [-1/2, 1/2], exact (x - floor(x)
//    is not: it rounds for small |x|); 2^k is built from the bits of k + 2^23 + 127 (its low
//    mantissa bits hold k + 127 in [0, 127]) shifted into the exponent;
//  - 2^f = 1 + f q(f), q of degree 4 fitted for relative error (1.6e-7 measured in f32 over
//    [-1/2, 1/2], about 2 ULP; the tests' bound on the output is 1e-4 relative); 2^0 = 1
//    exactly, so a row whose maximum did not grow is rescaled by exactly 1.
// k_keep (elementwise_special.wgsl) for a vec4: the value, through a select the compiler cannot
// see through, so it does not fold or reassociate f and the result with their neighbours.
// Without the two, lavapipe's bits differed from the browser's SwiftShader in the conformance
// suite's causal cases with several key tiles (with them, lavapipe gives SwiftShader's bits).
fn flash_keep_4(v: vec4<f32>) -> vec4<f32> {
    return select(v, vec4<f32>(0.0), bitcast<vec4<u32>>(v) == vec4<u32>(0xffffffffu));
}

fn flash_exp2_4(x: vec4<f32>) -> vec4<f32> {
    let b = bitcast<vec4<u32>>(x);
    let xc = bitcast<vec4<f32>>(select(b, vec4<u32>(0xc2fe0000u), b - vec4<u32>(0xc2fe0001u) < vec4<u32>(0x3c820000u)));
    let k = floor(xc + vec4<f32>(0.5));
    let f = flash_keep_4(xc - k);
    let s = bitcast<vec4<f32>>(bitcast<vec4<u32>>(k + vec4<f32>(8388735.0)) << vec4<u32>(23u));
    var q = fma(vec4<f32>(0.00132646703), f, vec4<f32>(0.00967149995));
    q = fma(q, f, vec4<f32>(0.0555073358));
    q = fma(q, f, vec4<f32>(0.240222424));
    q = fma(q, f, vec4<f32>(0.693147004));
    return flash_keep_4(fma(q, f, vec4<f32>(1.0)) * s);
}

fn flash_exp2(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let xc = bitcast<f32>(select(b, 0xc2fe0000u, b - 0xc2fe0001u < 0x3c820000u));
    let k = floor(xc + 0.5);
    let f = k_keep(xc - k);
    let s = bitcast<f32>(bitcast<u32>(k + 8388735.0) << 23u);
    var q = fma(0.00132646703, f, 0.00967149995);
    q = fma(q, f, 0.0555073358);
    q = fma(q, f, 0.240222424);
    q = fma(q, f, 0.693147004);
    return k_keep(fma(q, f, 1.0) * s);
}
