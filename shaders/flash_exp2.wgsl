// 2^x for the flash kernels' online softmax (rendered into flash_attention.wgsl and
// flash_attention_blocked.wgsl as FLASH_EXP2), where x is a score minus its row's running maximum
// or the old maximum minus the new one: x <= 0, -inf (masked keys), or NaN (inf - inf, NaN in q or
// k). The shared k_exp2 (elementwise_special.wgsl) serves every x to a few ULP, with branches for
// overflow, NaN and subnormal results; over this range a cheaper form keeps what the tests and the
// conformance suite need, with the same builtin-free property (only floor, fma, select and bit
// operations: the same bits on every backend):
//  - x below -127 (-inf included) is clamped to -127, whose 2^k has the bits of +0: results under
//    2^-126 are 0 on every device (no subnormal result, so nothing for an adapter to flush);
//    NaN fails the comparison and stays NaN through the arithmetic;
//  - 2^x = 2^k 2^f with k = floor(x), f = x - k in [0, 1) (exact); 2^k is built from the bits of
//    k + 2^23 + 127 (its low mantissa bits hold k + 127 in [0, 127]) shifted into the exponent;
//  - 2^f = 1 + f q(f), q of degree 4 fitted for relative error (1.4e-7 measured in f32 over
//    [0, 1), about 2 ULP; the tests' bound on the output is 1e-4 relative); 2^0 = 1 exactly, so
//    a row whose maximum did not grow is rescaled by exactly 1.
fn flash_exp2_4(x: vec4<f32>) -> vec4<f32> {
    let xc = select(x, vec4<f32>(-127.0), x < vec4<f32>(-127.0));
    let k = floor(xc);
    let f = xc - k;
    let s = bitcast<vec4<f32>>(bitcast<vec4<u32>>(k + vec4<f32>(8388735.0)) << vec4<u32>(23u));
    var q = fma(vec4<f32>(0.0018670914), f, vec4<f32>(0.00901711173));
    q = fma(q, f, vec4<f32>(0.0557998568));
    q = fma(q, f, vec4<f32>(0.240164459));
    q = fma(q, f, vec4<f32>(0.693151295));
    return fma(q, f, vec4<f32>(1.0)) * s;
}

fn flash_exp2(x: f32) -> f32 {
    let xc = select(x, -127.0, x < -127.0);
    let k = floor(xc);
    let f = xc - k;
    let s = bitcast<f32>(bitcast<u32>(k + 8388735.0) << 23u);
    var q = fma(0.0018670914, f, 0.00901711173);
    q = fma(q, f, 0.0557998568);
    q = fma(q, f, 0.240164459);
    q = fma(q, f, 0.693151295);
    return fma(q, f, 1.0) * s;
}
