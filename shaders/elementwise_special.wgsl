// Special values for the elementwise kernel (shaders/elementwise.wgsl): ops/elementwise/kernel.rs
// inserts into a kernel only the functions its expression calls, and those they call (each
// top-level `fn` or `var<private>` below, with the comment lines right above it, is one item).
//
// WGSL lets an implementation assume that no NaN or infinity reaches a
// float comparison, and a GPU may treat subnormal operands as zero, so every special value is
// recognised from the bits (integer operations), never from a float compare. The k_ functions
// give IEEE 754 / numpy results on ±0, ±inf, NaN and subnormal inputs; the Rust doc comments of
// UnaryOp / BinaryOp state the rules.

fn k_bits(b: u32) -> f32 {
    // A function call, not a const-expression: a NaN or infinite constant would not compile.
    return bitcast<f32>(b);
}

// v itself, through a select no compiler can decide: a barrier to floating-point contraction
// (a * b + c into a fused multiply-add) and reassociation ((1 + x) - 1 into x), which Mesa
// applies to SPIR-V without NoContraction and other compilers do not, so results would differ.
fn k_keep(v: f32) -> f32 {
    return select(v, 0.0, bitcast<u32>(v) == 0xffffffffu);
}

fn k_nan() -> f32 {
    return k_bits(0x7fc00000u);
}

fn k_inf() -> f32 {
    return k_bits(0x7f800000u);
}

fn k_is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

// x with its sign bit replaced by the sign bit of s.
fn k_with_sign(x: f32, s: f32) -> f32 {
    return bitcast<f32>((bitcast<u32>(x) & 0x7fffffffu) | (bitcast<u32>(s) & 0x80000000u));
}

fn k_log(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) == 0u) {
        return -k_inf(); // log(±0) = -inf
    }
    if (b > 0x80000000u) {
        return k_nan(); // negative (or a negative NaN)
    }
    if (b >= 0x7f800000u) {
        return x; // +inf, NaN
    }
    return k_ln_bits(b);
}

// A finite non-zero magnitude (bits without the sign) as (m, e) with m in [2^23, 2^24) and the
// value m 2^(e - 150): subnormals are normalised from the bits (a GPU may read them as 0).
fn k_unpack(a: u32) -> vec2<i32> {
    if (a >= 0x00800000u) {
        return vec2<i32>(i32((a & 0x007fffffu) | 0x00800000u), i32(a >> 23u));
    }
    let sh = countLeadingZeros(a) - 8u;
    return vec2<i32>(i32(a << sh), 1 - i32(sh));
}

// The significand m (in [2^23, 2^24)) as a float in [1, 2).
fn k_sig(m: i32) -> f32 {
    return bitcast<f32>((u32(m) & 0x007fffffu) | 0x3f800000u);
}

// m 2^-s rounded to a whole number, to nearest; a tie goes the way `below` says (the sign of
// what lies beyond m's bits: > 0 above, < 0 below, 0 none), else to even. For m < 2^24, s >= 1.
fn k_round_shift(m: u32, s: u32, below: i32) -> u32 {
    if (s > 24u) {
        return 0u; // m 2^-s < 1/2
    }
    let kept = m >> s;
    let rem = m & ((1u << s) - 1u);
    let half = 1u << (s - 1u);
    let up = rem > half || (rem == half && (below > 0 || (below == 0 && (kept & 1u) == 1u)));
    return kept + select(0u, 1u, up);
}

// sign * q * 2^k for q in [0.5, 2] (a correctly rounded significand quotient or root) built from
// the bits, so the result is the same on every device: overflow gives ±inf, and a subnormal result
// is rounded once from q's bits and `below` (the sign of the exact value minus q) instead of being
// flushed or rounded twice.
fn k_pack(sign: u32, q: f32, k: i32, below: i32) -> f32 {
    let b = bitcast<u32>(q);
    let e = i32(b >> 23u) + k;
    if (e >= 255) {
        return bitcast<f32>(sign | 0x7f800000u);
    }
    if (e >= 1) {
        return bitcast<f32>(sign | (u32(e) << 23u) | (b & 0x007fffffu));
    }
    let s = u32(min(1 - e, 31));
    return bitcast<f32>(sign | k_round_shift((b & 0x007fffffu) | 0x00800000u, s, below));
}

// a / b correctly rounded (IEEE 754 division, as a CPU gives it): WGSL lets `/` be 2.5 ULP off
// and flush subnormals, so the quotient of the significands is estimated with the builtin, put
// right with the exact remainder in integers, and the exponent and any subnormal rounding are done
// on the bits. NaN operands give the first NaN quieted (its sign kept); 0/0 and inf/inf give the
// default NaN of x86 (0xffc00000), which is what the CPUs that the other languages run on give.
fn k_div(a: f32, b: f32) -> f32 {
    let ab = bitcast<u32>(a);
    let bb = bitcast<u32>(b);
    let sign = (ab ^ bb) & 0x80000000u;
    let aa = ab & 0x7fffffffu;
    let ba = bb & 0x7fffffffu;
    if (aa > 0x7f800000u) {
        return bitcast<f32>(ab | 0x00400000u);
    }
    if (ba > 0x7f800000u) {
        return bitcast<f32>(bb | 0x00400000u);
    }
    if ((aa == 0u && ba == 0u) || (aa == 0x7f800000u && ba == 0x7f800000u)) {
        return k_bits(0xffc00000u);
    }
    if (aa == 0x7f800000u || ba == 0u) {
        return bitcast<f32>(sign | 0x7f800000u);
    }
    if (aa == 0u || ba == 0x7f800000u) {
        return bitcast<f32>(sign);
    }
    let ua = k_unpack(aa);
    let ub = k_unpack(ba);
    // Significands A (doubled when A < B, so that the quotient is in [1, 2)) and B, integers.
    let lt = ua.x < ub.x;
    let an = u32(ua.x) << select(0u, 1u, lt);
    let bn = u32(ub.x);
    // q estimates A / B 2^23 (the builtin is a few ULP off at most); r = A 2^23 - q B, the exact
    // remainder: it is small, so the wrapping u32 arithmetic gives it exactly. Integers only
    // from here, which no compiler may reassociate.
    var q = u32(clamp(f32(an) / f32(bn) * 8388608.0, 8388608.0, 16777216.0));
    var r = bitcast<i32>((an << 23u) - q * bn);
    let b2 = i32(bn);
    // One step brings q within one of the quotient however loose the estimate was (WGSL allows
    // 2.5 ULP, and the conversion truncates): r / B is a small number, estimated in floats (an
    // integer division costs dozens of instructions on a GPU; measured: gelu at 0.38 of native
    // bandwidth on the H100 with it); the loop then rounds to nearest, exactly.
    q = u32(i32(q) + i32(round(f32(r) / f32(b2))));
    r = bitcast<i32>((an << 23u) - q * bn);
    for (var i = 0; i < 2; i++) {
        // Nearest: |2r| <= B (never equal: no quotient of 24-bit significands is a midpoint).
        if (2 * r > b2) {
            q += 1u;
            r -= b2;
        } else if (2 * r < -b2) {
            q -= 1u;
            r += b2;
        }
    }
    return k_pack(sign, f32(q) * 1.1920928955078125e-7, ua.y - ub.y - select(0, 1, lt), select(select(0, -1, r < 0), 1, r > 0));
}

// a * b as IEEE 754 gives it on a CPU, on every device: the product is the builtin's where both
// operands and the product are well inside the normal range (a correctly rounded multiply); else
// it is built from the bits (subnormal operands read exactly, a subnormal product rounded once,
// not flushed), NaN operands give the first NaN quieted and inf * 0 the default NaN of x86.
fn k_mul(a: f32, b: f32) -> f32 {
    let ab = bitcast<u32>(a);
    let bb = bitcast<u32>(b);
    let ea = (ab >> 23u) & 0xffu;
    let eb = (bb >> 23u) & 0xffu;
    if (ea - 1u < 253u && eb - 1u < 253u && ea + eb - 128u < 252u) {
        return a * b; // 2^-125 <= |a b| < 2^127: normal, no overflow
    }
    let sign = (ab ^ bb) & 0x80000000u;
    let aa = ab & 0x7fffffffu;
    let ba = bb & 0x7fffffffu;
    if (aa > 0x7f800000u) {
        return bitcast<f32>(ab | 0x00400000u);
    }
    if (ba > 0x7f800000u) {
        return bitcast<f32>(bb | 0x00400000u);
    }
    if ((aa == 0u && ba == 0x7f800000u) || (aa == 0x7f800000u && ba == 0u)) {
        return k_bits(0xffc00000u);
    }
    if (aa == 0x7f800000u || ba == 0x7f800000u) {
        return bitcast<f32>(sign | 0x7f800000u);
    }
    if (aa == 0u || ba == 0u) {
        return bitcast<f32>(sign);
    }
    let ua = k_unpack(aa);
    let ub = k_unpack(ba);
    let p = k_sig(ua.x) * k_sig(ub.x); // in [1, 4), correctly rounded
    // The exact product of the significands minus p's, both 2^-46 units: small, so the low 32
    // bits of the wrapping u32 arithmetic give it exactly; its sign rounds a subnormal result.
    let pb = bitcast<u32>(p);
    let pm = ((pb & 0x007fffffu) | 0x00800000u) << select(23u, 24u, pb >= 0x40000000u);
    let d = bitcast<i32>(u32(ua.x) * u32(ub.x) - pm);
    return k_pack(sign, p, ua.y + ub.y - 254, select(select(0, -1, d < 0), 1, d > 0));
}

// sqrt correctly rounded for a positive finite non-zero magnitude (bits): x = X 2^(2k - 23)
// with X in [2^23, 2^25), sqrt(X 2^23) = S estimated with the builtin then put right in integers
// (the remainder X 2^23 - S^2 is small, so wrapping u32 arithmetic gives it exactly), scaled by
// 2^k on the bits (the result is always normal).
fn k_sqrt_pos(a: u32) -> f32 {
    let u = k_unpack(a);
    let e = u.y - 127; // x = k_sig(m) 2^e
    let odd = (e & 1) != 0;
    let xn = u32(u.x) << select(0u, 1u, odd);
    let k = (e - select(0, 1, odd)) / 2;
    var sn = u32(clamp(sqrt(f32(xn) * 1.1920928955078125e-7) * 8388608.0, 8388608.0, 16777216.0));
    var r = bitcast<i32>((xn << 23u) - sn * sn);
    // One integer Newton step (S + r / 2S) brings S within one of the root however loose the
    // builtin was (WGSL bounds sqrt only through inverseSqrt and `/`); the loop then rounds.
    sn = u32(i32(sn) + r / (2 * i32(sn)));
    r = bitcast<i32>((xn << 23u) - sn * sn);
    for (var i = 0; i < 2; i++) {
        let s2 = i32(sn);
        // (S + 1/2)^2 = S^2 + S + 1/4 and (S - 1/2)^2 = S^2 - S + 1/4, against whole r.
        if (r > s2) {
            r -= 2 * s2 + 1;
            sn += 1u;
        } else if (r <= -s2) {
            r += 2 * s2 - 1;
            sn -= 1u;
        }
    }
    return bitcast<f32>(bitcast<u32>(f32(sn) * 1.1920928955078125e-7) + (u32(k) << 23u));
}

fn k_sqrt(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) == 0u || (b >= 0x7f800000u && b < 0x80000000u)) {
        return x; // ±0 (sign kept), +inf, NaN
    }
    if (b > 0x80000000u) {
        return k_nan();
    }
    return k_sqrt_pos(b); // subnormals too
}

fn k_rsqrt(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) == 0u) {
        return k_with_sign(k_inf(), x); // 1/sqrt(±0) = ±inf
    }
    if (b > 0x80000000u) {
        return k_nan();
    }
    if (b == 0x7f800000u) {
        return 0.0;
    }
    if (b > 0x7f800000u) {
        return x;
    }
    return k_div(1.0, k_sqrt_pos(b)); // subnormals too
}

// sin or cos with the argument reduced exactly (Payne-Hanek): |x| = (4k + n + f) pi/2 with
// |f| <= 1/2 from x's 24-bit mantissa times a 96-bit window of the bits of 2/pi in integer
// arithmetic, so large arguments keep full accuracy; then minimax polynomials on [-pi/4, pi/4]
// (Cephes sinf/cosf). No builtin sin/cos: their accuracy is only bounded inside [-pi, pi].
var<private> TWO_OVER_PI: array<u32, 7> = array<u32, 7>(
    0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu);

// Bits k+1 .. k+32 of the binary fraction of 2/pi (zeros before the binary point, k >= -32).
fn k_two_over_pi_bits(k: i32) -> u32 {
    if (k < 0) {
        return select(TWO_OVER_PI[0] >> u32(-k), 0u, k <= -32);
    }
    let q = u32(k) >> 5u;
    let r = u32(k) & 31u;
    if (r == 0u) {
        return TWO_OVER_PI[q];
    }
    return (TWO_OVER_PI[q] << r) | (TWO_OVER_PI[q + 1u] >> (32u - r));
}

// High 32 bits of the 64-bit product a * b.
fn k_mul_hi(a: u32, b: u32) -> u32 {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = ((a0 * b0) >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u);
}

// Both factors are reduced exactly (k_sin_cos), so cos keeps a small relative error next to the
// poles and the quotient does too; |x| < 2^-12 gives x / 1 = x (±0 and subnormals kept).
fn k_tan(x: f32) -> f32 {
    return k_div(k_sin_cos(x, false), k_sin_cos(x, true));
}

fn k_sin_cos(x: f32, cosine: bool) -> f32 {
    let b = bitcast<u32>(x);
    let a = b & 0x7fffffffu;
    if (a >= 0x7f800000u) {
        return k_nan(); // sin, cos of ±inf and NaN
    }
    if (a < 0x39800000u) {
        return select(x, 1.0, cosine); // |x| < 2^-12: sin x = x (±0, subnormals kept), cos x = 1
    }
    var r = bitcast<f32>(a);
    var n = 0u;
    if (a > 0x3f490fdbu) {
        // |x| = m 2^e with m the 24-bit integer mantissa. Bits of 2/pi before position e - 1
        // give multiples of 4 quarter turns and drop out; the 96 from there on are enough.
        let m = (a & 0x7fffffu) | 0x800000u;
        let k = i32(a >> 23u) - 152;
        let w2 = k_two_over_pi_bits(k);
        let w1 = k_two_over_pi_bits(k + 32);
        let w0 = k_two_over_pi_bits(k + 64);
        // m * (w2 w1 w0) mod 2^96, with the binary point at bit 94.
        let r0 = m * w0;
        let lo1 = m * w1;
        let r1 = lo1 + k_mul_hi(m, w0);
        let r2 = m * w2 + k_mul_hi(m, w1) + select(0u, 1u, r1 < lo1);
        let t = r2 + 0x20000000u; // round to the nearest quarter turn
        n = t >> 30u;
        let hi = i32(t & 0x3fffffffu) - 0x20000000;
        let f = f32(hi) * 9.313225746154785e-10 + f32(r1) * 2.168404344971009e-19 + f32(r0) * 5.048709793414476e-29;
        r = f * 1.5707963267948966;
    }
    let z = r * r;
    let s = r + r * z * (-0.16666654611 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
    let c = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
    // cos t = sin(t + pi/2): one more quarter turn.
    let q = (n + select(0u, 1u, cosine)) & 3u;
    var v = select(c, s, (q & 1u) == 0u);
    v = select(v, -v, q >= 2u);
    if (!cosine) {
        v = bitcast<f32>(bitcast<u32>(v) ^ (b & 0x80000000u)); // sin(-x) = -sin(x)
    }
    return v;
}

fn k_tanh(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let a = b & 0x7fffffffu;
    if (a < 0x39800000u || a > 0x7f800000u) {
        return x; // |x| < 2^-12: tanh x = x (±0, subnormals kept); NaN
    }
    let ax = bitcast<f32>(a);
    var t = 1.0; // tanh(9.1) rounds to 1 in f32; tanh(±inf) = ±1
    if (ax < 0.25) {
        let z = ax * ax; // Taylor series to x^9 (relative error < 1e-8 here)
        t = ax + ax * z * (-0.3333333333 + z * (0.1333333333 + z * (-0.05396825397 + z * 0.02186948854)));
    } else if (ax < 9.1) {
        // exp of a non-positive argument never overflows, unlike (e^2x - 1) / (e^2x + 1).
        let e = k_exp(-2.0 * ax);
        t = k_div(1.0 - e, 1.0 + e);
    }
    return k_with_sign(t, x);
}

// erf without a division (the reciprocal of Abramowitz & Stegun's 7.1.26 cost gelu half its
// speed once division went builtin-free): |x| <= 0.921875 gives x P(x^2), below 4 it is
// 1 - e^Q(|x|) with Q fitted to log erfc, from 4 on it is ±1 (erf rounds to 1 in f32 from 3.92).
// P (degree 5) and Q (degree 8): least squares on Chebyshev nodes against the f64 erf, errors
// 1.6e-8 and 7e-10 (in erfc); in f32 the whole is within 1.1e-7 of erf (7.1.26: 1.4e-7). Odd by
// construction: computed on |x|, the sign put back from the bits.
fn k_erf(x: f32) -> f32 {
    let a = abs(x);
    var r = 1.0;
    if (a <= 0.921875) {
        let s = a * a;
        r = a * (1.1283791065216064 + s * (-0.3761250376701355 + s * (0.11281904578208923 + s * (-0.026769496500492096 + s * (0.004997011739760637 + s * (-0.0006008737254887819))))));
    } else if (a < 4.0) {
        r = 1.0 - k_exp(0.0003025418263860047 + a * (-1.1301640272140503 + a * (-0.6319416165351868 + a * (-0.10997404903173447 + a * (0.026362380012869835 + a * (-0.004739417694509029 + a * (0.0005926017183810472 + a * (-4.557118518278003e-05 + a * (1.6131018583109835e-06)))))))));
    }
    return k_with_sign(r, x);
}

fn k_sigmoid(x: f32) -> f32 {
    if (k_is_nan(x)) {
        return x;
    }
    return k_div(1.0, 1.0 + k_exp(k_flip_sign(x)));
}

// max(x, 0) with numpy's rules: NaN stays NaN, x <= 0 (-0 included) gives +0.
fn k_relu(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    return select(x, 0.0, b >= 0x80000000u && b <= 0xff800000u);
}

// floor(x) from the bits, exact on every device (the builtin on a GPU that flushes subnormals
// gives floor(-1e-45) = -0, not -1): NaN, ±inf and whole numbers stay as they are (±0 included),
// 0 < |x| < 1 gives +0 or -1, otherwise the fraction bits are cleared (truncation toward zero)
// and a negative value with a fraction goes one down (exact: 1 <= |t| < 2^23). +0 or -1 is
// made by a multiply, not `select(0u, 0xbf800000u, neg)`: lavapipe compiled that select to give
// 0x80000000 (-0) for x = 0.5.
fn k_floor(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let e = i32((b >> 23u) & 0xffu) - 127;
    let neg = b >= 0x80000000u;
    var r = b;
    if (e < 0 && (b & 0x7fffffffu) != 0u) {
        r = (b >> 31u) * 0xbf800000u;
    } else if (e >= 0 && e < 23) {
        let frac = 0x007fffffu >> u32(e);
        if ((b & frac) != 0u) {
            r = b & ~frac;
            if (neg) {
                r = bitcast<u32>(bitcast<f32>(r) - 1.0);
            }
        }
    }
    return bitcast<f32>(r);
}

// x Phi(x)-shaped activations: NaN stays NaN, the limit at -inf is -0 (the formulas would give
// -inf * 0 = NaN there), +inf stays +inf.
fn k_act_special(x: f32) -> bool {
    return k_is_nan(x) || bitcast<u32>(x) == 0xff800000u;
}

// x Phi(x) for |x| < 2^-60 is x / 2 (Phi(x) - 1/2 is below 2^-61): halved from the bits, as
// 0.5 * x on a device that flushes subnormals would not be.
fn k_act_tiny(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) < 0x21800000u;
}

fn k_act_value(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    if (k_act_tiny(x)) {
        if ((b & 0x7fffffffu) == 0u) {
            return x;
        }
        let u = k_unpack(b & 0x7fffffffu);
        return k_pack(b & 0x80000000u, k_sig(u.x), u.y - 128, 0);
    }
    return select(x, k_bits(0x80000000u), b == 0xff800000u);
}

fn k_gelu(x: f32) -> f32 {
    if (k_act_special(x) || k_act_tiny(x)) {
        return k_act_value(x);
    }
    return 0.5 * x * (1.0 + k_erf(x * 0.70710678118654752));
}

fn k_gelu_tanh(x: f32) -> f32 {
    if (k_act_special(x) || k_act_tiny(x)) {
        return k_act_value(x);
    }
    return 0.5 * x * (1.0 + k_tanh(0.79788456080286536 * (x + 0.044715 * x * x * x)));
}

fn k_silu(x: f32) -> f32 {
    if (k_act_special(x)) {
        return k_act_value(x);
    }
    return k_div(x, 1.0 + k_exp(k_flip_sign(x)));
}

// x's place in the order of the reals, from its bits: a monotone map to i32 with -0 and +0 both
// 0, subnormals kept apart from 0 (a float compare may read them as 0 on a GPU that flushes).
// Only for non-NaN x.
fn k_ord(x: f32) -> i32 {
    let b = bitcast<i32>(x);
    return select(b, -(b & 0x7fffffff), b < 0);
}

fn k_either_nan(a: f32, b: f32) -> bool {
    return k_is_nan(a) || k_is_nan(b);
}

// IEEE comparisons: false if either is NaN (so != is true), -0 == +0.
fn k_eq(a: f32, b: f32) -> bool {
    return !k_either_nan(a, b) && k_ord(a) == k_ord(b);
}

fn k_lt(a: f32, b: f32) -> bool {
    return !k_either_nan(a, b) && k_ord(a) < k_ord(b);
}

fn k_le(a: f32, b: f32) -> bool {
    return !k_either_nan(a, b) && k_ord(a) <= k_ord(b);
}

// numpy's maximum / minimum: NaN if either is NaN; on a tie (-0 vs +0) the second operand.
fn k_max(a: f32, b: f32) -> f32 {
    if (k_is_nan(a)) {
        return a;
    }
    return select(b, a, !k_is_nan(b) && k_ord(a) > k_ord(b));
}

fn k_min(a: f32, b: f32) -> f32 {
    if (k_is_nan(a)) {
        return a;
    }
    return select(b, a, !k_is_nan(b) && k_ord(a) < k_ord(b));
}

// x^n by repeated squaring for a whole n with |n| <= 32 (exact where the result is: (-2)^3 = -8).
fn k_pow_small(x: f32, n: u32) -> f32 {
    var base = x;
    var e = n;
    var r = 1.0;
    while (e != 0u) {
        if ((e & 1u) != 0u) {
            r = k_mul(r, base); // subnormal products rounded, not flushed
        }
        base = k_mul(base, base);
        e = e >> 1u;
    }
    return r;
}

// pow with C99 / IEEE 754 / the Array API's special cases (numpy's float power).
fn k_pow(x: f32, y: f32) -> f32 {
    let bx = bitcast<u32>(x);
    let ax = bx & 0x7fffffffu;
    let by = bitcast<u32>(y);
    let ay = by & 0x7fffffffu;
    if (ay == 0u || bx == 0x3f800000u) {
        return 1.0; // x^±0 = 1 and 1^y = 1, NaN included
    }
    if (ax > 0x7f800000u || ay > 0x7f800000u) {
        return k_nan();
    }
    let x_neg = bx >= 0x80000000u;
    let y_neg = by >= 0x80000000u;
    let yf = bitcast<f32>(ay);
    // Whole (|y| >= 2^23 always is; below 1 only 0 is, handled above) and odd (|y| < 2^24).
    let y_int = ay < 0x7f800000u && ay >= 0x3f800000u && (ay >= 0x4b000000u || fract(yf) == 0.0);
    let y_odd = y_int && ay < 0x4b800000u && fract(yf * 0.5) != 0.0;
    if (ax == 0u) {
        // ±0^y: ±inf or +inf for y < 0, ±0 or +0 for y > 0 (the sign only for odd y)
        let mag = select(0.0, k_inf(), y_neg);
        return select(mag, k_with_sign(mag, x), y_odd);
    }
    if (ay == 0x7f800000u) {
        if (bx == 0xbf800000u) {
            return 1.0; // (-1)^±inf = 1
        }
        return select(0.0, k_inf(), (ax > 0x3f800000u) != y_neg); // |x| > 1 with +inf, |x| < 1 with -inf
    }
    if (ax == 0x7f800000u) {
        let mag = select(k_inf(), 0.0, y_neg);
        return select(mag, -mag, x_neg && y_odd);
    }
    if (x_neg && !y_int) {
        return k_nan(); // negative base, fractional exponent
    }
    let base = bitcast<f32>(ax);
    var m: f32;
    if (ax < 0x00800000u) {
        // Subnormal |x| = ax 2^-149, from the integer bits (a GPU may read x itself as 0).
        m = k_exp(y * k_ln_bits(ax));
    } else if (y_int && ay <= 0x42000000u) {
        m = k_pow_small(select(base, k_div(1.0, base), y_neg), u32(yf));
    } else {
        m = k_exp(y * k_ln(base));
    }
    return select(m, k_flip_sign(m), x_neg && y_odd);
}

// Integer x^y with wrap-around (numpy's integer power); for a negative exponent, which numpy
// refuses: 1^y = 1, (-1)^y = ±1, anything else 0 (the integer part of 1 / x^|y|).
fn k_pow_i32(x: i32, y: i32) -> i32 {
    if (y < 0) {
        return select(select(0, 1, x == 1), select(1, -1, (y & 1) != 0), x == -1);
    }
    var base = x;
    var e = u32(y);
    var r = 1;
    while (e != 0u) {
        if ((e & 1u) != 0u) {
            r = r * base;
        }
        base = base * base;
        e = e >> 1u;
    }
    return r;
}

fn k_pow_u32(x: u32, y: u32) -> u32 {
    var base = x;
    var e = y;
    var r = 1u;
    while (e != 0u) {
        if ((e & 1u) != 0u) {
            r = r * base;
        }
        base = base * base;
        e = e >> 1u;
    }
    return r;
}

// Floor division (numpy's //): rounds toward -inf; x // 0 = 0; i32::MIN // -1 = i32::MIN.
fn k_floor_div_i32(a: i32, b: i32) -> i32 {
    if (b == 0) {
        return 0;
    }
    let q = a / b; // WGSL: truncates; i32::MIN / -1 = i32::MIN
    let r = a % b;
    return select(q, q - 1, r != 0 && ((r < 0) != (b < 0)));
}

fn k_floor_div_u32(a: u32, b: u32) -> u32 {
    return select(a / b, 0u, b == 0u);
}

// 2^n for a whole n in [-126, 127], from the bits.
fn k_pow2(n: i32) -> f32 {
    return bitcast<f32>(u32(n + 127) << 23u);
}

// 2^k y for a whole k in [-252, 254], in two exact power-of-two steps (ldexp's result is
// unspecified out of range).
fn k_scale(y: f32, k: i32) -> f32 {
    let h = k / 2;
    return y * k_pow2(h) * k_pow2(k - h);
}

// expm1(r) for |r| <= ln 2 / 2 by its Taylor series to degree 8 (relative error < 1e-9 there,
// and exact near 0: no 1 + ... - 1 cancellation).
fn k_expm1_poly(r: f32) -> f32 {
    return r + r * r * (0.5 + r * (0.16666666666666666 + r * (0.041666666666666664 + r * (0.008333333333333333 + r * (0.001388888888888889 + r * (1.984126984126984e-4 + r * 2.48015873015873e-5))))));
}

// e^x = 2^k (1 + p) for finite |x| < 104, as (k, p): k = round(x / ln 2) and p = expm1 of
// x - k ln 2 (Cody-Waite: ln 2 in two parts, the first with 16 bits, so k ln2_hi is exact).
// The error stays a few ULP at every magnitude (the builtin exp's grows with |x|).
fn k_exp_split(x: f32) -> vec2<f32> {
    let k = floor(x * 1.4426950408889634 + 0.5);
    let r = (x - k * 0.693145751953125) - k * 1.428606765330187e-6;
    return vec2<f32>(k, k_expm1_poly(r));
}

// 2^x, builtin-free as k_exp: 2^x = 2^k 2^f with k = round(x) and f = x - k exact, |f| <= 1/2.
fn k_exp2(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let a = b & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return x;
    }
    if (b < 0x80000000u && a >= 0x43000000u) {
        return k_inf(); // x >= 128
    }
    if (b >= 0x80000000u && a > 0x43160000u) {
        return 0.0; // x < -150
    }
    let k = floor(x + 0.5);
    return k_pack(0u, 1.0 + k_expm1_poly(k_keep(k_keep(x - k) * 0.6931471805599453)), i32(k), 0);
}

// e^x with the special values from the bits: +inf past ln(f32::MAX), +0 below the smallest
// subnormal's log; a subnormal result is rounded from the bits (k_pack), not flushed.
fn k_exp(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let a = b & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return x;
    }
    if (b < 0x80000000u && a > 0x42b17217u) {
        return k_inf(); // x > 88.7228317: past f32::MAX (+inf included)
    }
    if (b >= 0x80000000u && a > 0x42cff1b5u) {
        return 0.0; // x < -103.972: below half the smallest subnormal (-inf included)
    }
    let s = k_exp_split(x);
    return k_pack(0u, 1.0 + s.y, i32(s.x), 0);
}

// e^x - 1, accurate near 0 (log1p's partner): expm1(±0) = ±0, expm1(-inf) = -1, +inf -> +inf.
fn k_expm1(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let a = b & 0x7fffffffu;
    if (a > 0x7f800000u || a < 0x33000000u) {
        return x; // NaN; |x| < 2^-25: expm1 x = x (±0 and subnormals kept)
    }
    let neg = b >= 0x80000000u;
    if (!neg && a > 0x42b17217u) {
        return k_inf();
    }
    if (neg && a >= 0x418c0000u) {
        return -1.0; // x <= -17.5 (-inf included): e^x is below half an ULP of 1
    }
    if (a < 0x3eb17218u) {
        return k_expm1_poly(x); // |x| < ln 2 / 2
    }
    let s = k_exp_split(x);
    let k = i32(s.x);
    if (k > 24) {
        return k_scale(1.0 + s.y, k) - 1.0;
    }
    let t = k_pow2(k);
    return (t - 1.0) + t * s.y; // 2^k - 1 is exact for |k| <= 24
}

// ln(1 + f) + c + dk ln 2 for f in [sqrt(2)/2 - 1, sqrt(2) - 1] (musl's logf / log1pf kernel:
// s = f / (2 + f), a minimax polynomial in s^2, ln 2 in two parts).
fn k_log_kernel(f: f32, c: f32, dk: f32) -> f32 {
    let s = k_div(f, 2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (0.40000972152 + w * 0.24279078841);
    let t2 = z * (0.66666662693 + w * 0.28498786688);
    let hfsq = 0.5 * f * f;
    // k_keep fixes the order of the sum where callers pass constant c or dk (0): compilers fold
    // and reorder it differently otherwise.
    let r = k_keep(s * (hfsq + t1 + t2) + (dk * 9.0580006145e-06 + c));
    return k_keep(k_keep(r - hfsq) + f + dk * 6.9313812256e-01);
}

// x = 2^k (1 + f) with 1 + f in [sqrt(2)/2, sqrt(2)), as (k, f), for a positive normal x.
fn k_log_split(x: f32) -> vec2<f32> {
    let ix = bitcast<u32>(x) + (0x3f800000u - 0x3f3504f3u);
    let k = i32(ix >> 23u) - 127;
    let f = bitcast<f32>((ix & 0x007fffffu) + 0x3f3504f3u) - 1.0;
    return vec2<f32>(f32(k), f);
}

// ln(x) for a positive finite non-zero x given as bits (subnormals normalised from the bits).
fn k_ln_bits(b: u32) -> f32 {
    let u = k_unpack(b);
    let s = k_log_split(k_sig(u.x));
    return k_log_kernel(s.y, 0.0, s.x + f32(u.y - 127));
}

// ln(x) for a positive normal finite x, to about 1 ULP (the builtin log is only bounded to
// 2^-21 absolute near 1).
fn k_ln(x: f32) -> f32 {
    let s = k_log_split(x);
    return k_log_kernel(s.y, 0.0, s.x);
}

// log(1 + x), accurate near 0 (musl's log1pf): log1p(±0) = ±0, log1p(-1) = -inf,
// log1p(x < -1) = NaN, +inf -> +inf.
fn k_log1p(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let a = b & 0x7fffffffu;
    if (a > 0x7f800000u || b == 0x7f800000u || a < 0x33800000u) {
        return x; // NaN, +inf; |x| < 2^-24: log1p x = x (±0 and subnormals kept)
    }
    if (b == 0xbf800000u) {
        return -k_inf();
    }
    if (b > 0xbf800000u) {
        return k_nan(); // x < -1
    }
    if (b < 0x3ed413d0u || (b >= 0x80000000u && b <= 0xbe95f619u)) {
        return k_log_kernel(x, 0.0, 0.0); // sqrt(2)/2 <= 1 + x < sqrt(2)
    }
    let u = k_keep(1.0 + x); // not folded into (1 + x) - 1 = x below
    let s = k_log_split(u);
    // The rounding error of 1 + x, as a correction to log(u).
    var c = 0.0;
    if (s.x < 25.0) {
        c = k_div(select(x - (u - 1.0), 1.0 - (u - x), s.x >= 2.0), u);
    }
    return k_log_kernel(s.y, c, s.x);
}

// log2 and log10 with the special values of log, exact for powers of two in log2, and read
// from the bits for subnormal x (x = b 2^-149).
fn k_log_base(x: f32, ten: bool) -> f32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) == 0u) {
        return -k_inf();
    }
    if (b > 0x80000000u) {
        return k_nan();
    }
    if (b >= 0x7f800000u) {
        return x;
    }
    var v = x;
    var off = 0.0;
    if (b < 0x00800000u) {
        v = f32(b);
        off = -149.0;
    }
    let s = k_log_split(v);
    let k = s.x + off;
    let l = k_log_kernel(s.y, 0.0, 0.0);
    if (ten) {
        return k * 7.9034151668e-07 + l * 0.43429448190325176 + k * 3.0102920532e-01;
    }
    return l * 1.4426950408889634 + k;
}

fn k_sinh(x: f32) -> f32 {
    let a = bitcast<u32>(x) & 0x7fffffffu;
    if (a >= 0x7f800000u || a < 0x39800000u) {
        return x; // ±inf, NaN; |x| < 2^-12: sinh x = x (±0 and subnormals kept)
    }
    if (a > 0x42b2d4fcu) {
        return k_with_sign(k_inf(), x);
    }
    let ax = bitcast<f32>(a);
    var r: f32;
    if (a > 0x42b17217u) {
        let s = k_exp_split(ax);
        r = k_scale(1.0 + s.y, i32(s.x) - 1); // e^|x| / 2 without overflowing e^|x|
    } else {
        let t = k_expm1(ax);
        r = select(0.5 * (t + k_div(t, t + 1.0)), 0.5 * (2.0 * t - k_div(t * t, t + 1.0)), ax < 1.0);
    }
    return k_with_sign(r, x);
}

fn k_cosh(x: f32) -> f32 {
    let a = bitcast<u32>(x) & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return x;
    }
    if (a > 0x42b2d4fcu) {
        return k_inf(); // ±inf too
    }
    if (a < 0x39800000u) {
        return 1.0;
    }
    let ax = bitcast<f32>(a);
    if (a > 0x42b17217u) {
        let s = k_exp_split(ax);
        return k_scale(1.0 + s.y, i32(s.x) - 1);
    }
    if (a < 0x3f317218u) {
        let t = k_expm1(ax); // |x| < ln 2
        return 1.0 + k_div(t * t, 2.0 * (1.0 + t));
    }
    let t = k_exp(ax);
    return 0.5 * t + k_div(0.5, t);
}

// asinh (musl's asinhf): asinh(±0) = ±0, ±inf -> ±inf.
fn k_asinh(x: f32) -> f32 {
    let a = bitcast<u32>(x) & 0x7fffffffu;
    if (a >= 0x7f800000u || a < 0x39800000u) {
        return x;
    }
    let ax = bitcast<f32>(a);
    var r: f32;
    if (a >= 0x45800000u) {
        r = k_ln(ax) + 0.6931471805599453; // |x| >= 2^12
    } else if (a >= 0x40000000u) {
        r = k_ln(2.0 * ax + k_div(1.0, k_sqrt(ax * ax + 1.0) + ax));
    } else {
        r = k_log1p(ax + k_div(ax * ax, k_sqrt(ax * ax + 1.0) + 1.0));
    }
    return k_with_sign(r, x);
}

// acosh (musl's acoshf): x < 1 -> NaN, acosh(1) = +0, +inf -> +inf.
fn k_acosh(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) > 0x7f800000u || b == 0x7f800000u) {
        return x; // NaN, +inf
    }
    if (b < 0x3f800000u || b >= 0x80000000u) {
        return k_nan(); // x < 1 (-0 and -inf included)
    }
    if (b < 0x40000000u) {
        let t = x - 1.0;
        return k_log1p(t + k_sqrt(2.0 * t + t * t));
    }
    if (b < 0x45800000u) {
        return k_ln(2.0 * x - k_div(1.0, x + k_sqrt(x * x - 1.0)));
    }
    return k_ln(x) + 0.6931471805599453;
}

// atanh (musl's atanhf): |x| > 1 -> NaN, ±1 -> ±inf, ±0 -> ±0.
fn k_atanh(x: f32) -> f32 {
    let a = bitcast<u32>(x) & 0x7fffffffu;
    if (a > 0x3f800000u) {
        return k_nan(); // NaN too
    }
    if (a == 0x3f800000u) {
        return k_with_sign(k_inf(), x);
    }
    if (a < 0x39800000u) {
        return x;
    }
    let y = bitcast<f32>(a);
    var r: f32;
    if (a < 0x3f000000u) {
        r = 0.5 * k_log1p(2.0 * y + k_div(2.0 * y * y, 1.0 - y));
    } else {
        r = 0.5 * k_log1p(2.0 * k_div(y, 1.0 - y));
    }
    return k_with_sign(r, x);
}

// atan (fdlibm's atanf: four reduction intervals with atan at their centres in two parts, then
// an odd minimax polynomial): atan(±0) = ±0, atan(±inf) = ±pi/2.
fn k_atan(x: f32) -> f32 {
    let a = bitcast<u32>(x) & 0x7fffffffu;
    if (a > 0x7f800000u || a < 0x39800000u) {
        return x;
    }
    if (a >= 0x4c800000u) {
        return k_with_sign(1.5707963705062866, x); // |x| >= 2^26 (inf included)
    }
    var t = bitcast<f32>(a);
    var id = -1;
    if (a >= 0x3ee00000u) {
        if (a < 0x3f980000u) {
            if (a < 0x3f300000u) {
                id = 0;
                t = k_div(2.0 * t - 1.0, 2.0 + t);
            } else {
                id = 1;
                t = k_div(t - 1.0, t + 1.0);
            }
        } else if (a < 0x401c0000u) {
            id = 2;
            t = k_div(t - 1.5, 1.0 + 1.5 * t);
        } else {
            id = 3;
            t = k_div(-1.0, t);
        }
    }
    let z = t * t;
    let w = z * z;
    let s1 = z * (3.3333328366e-01 + w * (1.4253635705e-01 + w * 6.1687607318e-02));
    let s2 = w * (-1.9999158382e-01 + w * -1.0648017377e-01);
    if (id < 0) {
        return k_with_sign(t - t * (s1 + s2), x);
    }
    var hi = 4.6364760399e-01;
    var lo = 5.0121582440e-09;
    if (id == 1) {
        hi = 7.8539812565e-01;
        lo = 3.7748947079e-08;
    } else if (id == 2) {
        hi = 9.8279368877e-01;
        lo = 3.4473217170e-08;
    } else if (id == 3) {
        hi = 1.5707962513e+00;
        lo = 7.5497894159e-08;
    }
    return k_with_sign(hi - ((t * (s1 + s2) - lo) - t), x);
}

// The rational approximation of (asin(sqrt z) - sqrt z) / sqrt z^3 that asinf and acosf share
// (musl).
fn k_asin_r(z: f32) -> f32 {
    let p = z * (1.6666586697e-01 + z * (-4.2743422091e-02 + z * -8.6563630030e-03));
    let q = 1.0 + z * -7.0662963390e-01;
    return k_div(p, q);
}

// asin (musl's asinf): |x| > 1 -> NaN, asin(±0) = ±0, asin(±1) = ±pi/2.
fn k_asin(x: f32) -> f32 {
    let a = bitcast<u32>(x) & 0x7fffffffu;
    if (a > 0x3f800000u) {
        return k_nan(); // NaN too
    }
    if (a == 0x3f800000u) {
        return k_with_sign(1.5707963705062866, x);
    }
    if (a < 0x39800000u) {
        return x;
    }
    if (a < 0x3f000000u) {
        return x + x * k_asin_r(x * x);
    }
    let z = (1.0 - bitcast<f32>(a)) * 0.5;
    let s = k_sqrt(z);
    let r = 1.5707962513 - ((2.0 * (s + s * k_asin_r(z))) - 7.5497894159e-08);
    return k_with_sign(r, x);
}

// acos (musl's acosf): |x| > 1 -> NaN, acos(1) = +0, acos(-1) = pi.
fn k_acos(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let a = b & 0x7fffffffu;
    if (a > 0x3f800000u) {
        return k_nan();
    }
    if (b == 0x3f800000u) {
        return 0.0;
    }
    if (b == 0xbf800000u) {
        return 3.1415927410125732;
    }
    if (a <= 0x32800000u) {
        return 1.5707963705062866; // |x| <= 2^-26 (subnormals and ±0 too)
    }
    if (a < 0x3f000000u) {
        return 1.5707962513 - (x - (7.5497894159e-08 - x * k_asin_r(x * x)));
    }
    if (b >= 0x80000000u) {
        let z = (1.0 + x) * 0.5;
        let s = k_sqrt(z);
        let w = k_asin_r(z) * s - 7.5497894159e-08;
        return 2.0 * (1.5707962513 - (s + w));
    }
    let z = (1.0 - x) * 0.5;
    let s = k_sqrt(z);
    let df = bitcast<f32>(bitcast<u32>(s) & 0xfffff000u);
    let c = k_div(z - df * df, s + df);
    let w = k_asin_r(z) * s + c;
    return 2.0 * (df + w);
}

// x whole-number rounded by clearing the fraction bits (exact, from the bits): toward zero, and
// for `mode` 1 to nearest with ties to even. ±0, ±inf, NaN and whole numbers stay as they are.
fn k_round_bits(x: f32, mode: u32) -> f32 {
    let b = bitcast<u32>(x);
    let e = i32((b >> 23u) & 0xffu) - 127;
    if (e >= 23) {
        return x;
    }
    let sign = b & 0x80000000u;
    if (e < 0) {
        // |x| < 1: ±0, or ±1 when rounding to nearest and |x| > 1/2.
        let one = mode == 1u && e == -1 && (b & 0x7fffffffu) > 0x3f000000u;
        return bitcast<f32>(sign | select(0u, 0x3f800000u, one));
    }
    let frac = 0x007fffffu >> u32(e);
    let f = b & frac;
    var r = b & ~frac;
    if (mode == 1u) {
        let half = (frac + 1u) >> 1u;
        let unit = frac + 1u;
        if (f > half || (f == half && (r & unit) != 0u)) {
            r = r + unit; // carries into the exponent where it must
        }
    }
    return bitcast<f32>(r);
}

fn k_trunc(x: f32) -> f32 {
    return k_round_bits(x, 0u);
}

fn k_round(x: f32) -> f32 {
    return k_round_bits(x, 1u);
}

// ceil(x) = -floor(-x): ceil(-0.5) = -0.
fn k_ceil(x: f32) -> f32 {
    return k_flip_sign(k_floor(k_flip_sign(x)));
}

// -x by the sign bit alone (a float negate may flush a subnormal).
fn k_flip_sign(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) ^ 0x80000000u);
}

// numpy's sign: NaN -> NaN, ±0 -> +0, else ±1.
fn k_sign(x: f32) -> f32 {
    let a = bitcast<u32>(x) & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return x;
    }
    return select(k_with_sign(1.0, x), 0.0, a == 0u);
}

fn k_sign_i32(x: i32) -> i32 {
    return select(select(0, 1, x > 0), -1, x < 0);
}

// atan2 (fdlibm's atan2f): every special case of C99 and the Array API standard from the bits;
// operands that are both tiny are scaled from the bits first (a GPU may read subnormals as 0).
fn k_atan2(y: f32, x: f32) -> f32 {
    let by = bitcast<u32>(y);
    let bx = bitcast<u32>(x);
    let ay = by & 0x7fffffffu;
    let ax = bx & 0x7fffffffu;
    if (ax > 0x7f800000u || ay > 0x7f800000u) {
        return k_nan();
    }
    let pi = 3.1415927410125732;
    let pio2 = 1.5707963705062866;
    let x_neg = bx >= 0x80000000u;
    if (ay == 0u) {
        return select(y, k_with_sign(pi, y), x_neg); // ±0 or ±pi
    }
    if (ax == 0u) {
        return k_with_sign(pio2, y);
    }
    if (ax == 0x7f800000u) {
        if (ay == 0x7f800000u) {
            return k_with_sign(select(0.7853981852531433, 2.356194496154785, x_neg), y);
        }
        return k_with_sign(select(0.0, pi, x_neg), y);
    }
    if (ay == 0x7f800000u || ay > ax + (26u << 23u)) {
        return k_with_sign(pio2, y); // |y / x| > 2^26
    }
    var z = 0.0;
    if (!x_neg || ax <= ay + (26u << 23u)) {
        var fy = bitcast<f32>(ay);
        var fx = bitcast<f32>(ax);
        if (min(ax, ay) < 0x00800000u) {
            // Both below 2^-100: times 2^64, subnormals from their integer bits (b 2^-149).
            fy = select(fy * 1.8446744073709552e19, f32(ay) * 2.5849394142282115e-26, ay < 0x00800000u);
            fx = select(fx * 1.8446744073709552e19, f32(ax) * 2.5849394142282115e-26, ax < 0x00800000u);
        }
        z = k_atan(k_div(fy, fx));
    }
    if (x_neg) {
        z = pi - (z - -8.7422776573e-08);
    }
    return k_with_sign(z, y);
}

// hypot without overflow or underflow in between: ±inf with anything (NaN too) is +inf.
fn k_hypot(x: f32, y: f32) -> f32 {
    let ax = bitcast<u32>(x) & 0x7fffffffu;
    let ay = bitcast<u32>(y) & 0x7fffffffu;
    if (ax == 0x7f800000u || ay == 0x7f800000u) {
        return k_inf();
    }
    if (ax > 0x7f800000u || ay > 0x7f800000u) {
        return k_nan();
    }
    let hi = max(ax, ay);
    let lo = min(ax, ay);
    if (lo == 0u || hi > lo + (25u << 23u)) {
        return bitcast<f32>(hi); // the smaller is below half an ULP of the larger's square root sum
    }
    // Scaled so that the squares neither overflow nor underflow (2^-80 down, 2^64 up).
    var fh = bitcast<f32>(hi);
    var fl = bitcast<f32>(lo);
    if (hi >= 0x58800000u) {
        fh = fh * 8.271806125530277e-25;
        fl = fl * 8.271806125530277e-25;
        let v = k_sqrt(fh * fh + fl * fl);
        if (v > 281474959933440.0) {
            return k_inf(); // past f32::MAX / 2^80
        }
        return v * 1.2089258196146292e24;
    }
    if (hi < 0x26800000u) {
        // Subnormals from their integer bits (b 2^-149): a GPU may read them as 0.
        fh = select(fh * 1.8446744073709552e19, f32(hi) * 2.5849394142282115e-26, hi < 0x00800000u);
        fl = select(fl * 1.8446744073709552e19, f32(lo) * 2.5849394142282115e-26, lo < 0x00800000u);
        return k_sqrt(fh * fh + fl * fl) * 5.421010862427522e-20;
    }
    return k_sqrt(fh * fh + fl * fl);
}

// numpy's logaddexp, log(e^a + e^b): NaN with a NaN, +inf with a +inf, the other operand
// against -inf; otherwise max + log1p(e^-|a - b|).
fn k_logaddexp(a: f32, b: f32) -> f32 {
    let ba = bitcast<u32>(a);
    let bb = bitcast<u32>(b);
    if (k_either_nan(a, b)) {
        return k_nan();
    }
    if (ba == 0x7f800000u || bb == 0x7f800000u) {
        return k_inf();
    }
    // Against -inf the other operand, -0 made +0 (it is -0 + log1p(0)).
    if (ba == 0xff800000u) {
        return select(b, 0.0, bb == 0x80000000u);
    }
    if (bb == 0xff800000u) {
        return select(a, 0.0, ba == 0x80000000u);
    }
    let hi = select(b, a, k_ord(a) >= k_ord(b));
    let lo = select(a, b, k_ord(a) >= k_ord(b));
    let d = lo - hi; // <= 0, -inf when it overflows
    if (bitcast<u32>(d) == 0xff800000u) {
        return hi;
    }
    return hi + k_log1p(k_exp(d));
}

// The next f32 after x toward y, from the bits: NaN with a NaN, y when x == y (so
// nextafter(0, -0) = -0), the smallest subnormal of y's sign from ±0.
fn k_nextafter(x: f32, y: f32) -> f32 {
    if (k_either_nan(x, y)) {
        return k_nan();
    }
    let bx = bitcast<u32>(x);
    if (k_ord(x) == k_ord(y)) {
        return y;
    }
    if ((bx & 0x7fffffffu) == 0u) {
        return bitcast<f32>((bitcast<u32>(y) & 0x80000000u) | 1u);
    }
    let away = (k_ord(y) > k_ord(x)) == (bx < 0x80000000u);
    return bitcast<f32>(select(bx - 1u, bx + 1u, away));
}

// The f16 bits of x, an f16 value held in f32 (exact: integer operations only).
fn k_f16_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    let s = (b >> 16u) & 0x8000u;
    let a = b & 0x7fffffffu;
    if (a >= 0x7f800000u) {
        return s | 0x7c00u | select(0u, 0x200u, a > 0x7f800000u);
    }
    if (a < 0x33800000u) {
        return s;
    }
    if (a < 0x38800000u) {
        return s | (((a & 0x7fffffu) | 0x800000u) >> (126u - (a >> 23u))); // an f16 subnormal
    }
    return s | ((a - 0x38000000u) >> 13u);
}

fn k_from_f16_bits(h: u32) -> f32 {
    let s = (h & 0x8000u) << 16u;
    let a = h & 0x7fffu;
    if (a >= 0x7c00u) {
        return bitcast<f32>(s | 0x7f800000u | ((a & 0x3ffu) << 13u));
    }
    if (a < 0x400u) {
        return bitcast<f32>(s | bitcast<u32>(f32(a) * 5.960464477539063e-8)); // a 2^-24, normal in f32
    }
    return bitcast<f32>(s | ((a << 13u) + 0x38000000u));
}

// nextafter in f16's steps for f16 values held in f32.
fn k_nextafter_f16(x: f32, y: f32) -> f32 {
    if (k_either_nan(x, y)) {
        return k_nan();
    }
    if (k_ord(x) == k_ord(y)) {
        return y;
    }
    let hx = k_f16_bits(x);
    if ((hx & 0x7fffu) == 0u) {
        return k_from_f16_bits((k_f16_bits(y) & 0x8000u) | 1u);
    }
    let away = (k_ord(y) > k_ord(x)) == (hx < 0x8000u);
    return k_from_f16_bits(select(hx - 1u, hx + 1u, away));
}

// fmod(|x|, |y|) exactly, as the bits of a non-negative f32, for finite x and finite non-zero
// y given as magnitude bits (musl's fmodf in integers: shift and subtract, one step per binade
// between x and y, subnormals from their bits).
fn k_fmod_bits(ax: u32, ay: u32) -> u32 {
    if (ax < ay) {
        return ax;
    }
    var ex = i32(ax >> 23u);
    var ey = i32(ay >> 23u);
    var mx = (ax & 0x7fffffu) | 0x800000u;
    var my = (ay & 0x7fffffu) | 0x800000u;
    if (ex == 0) {
        let sh = i32(countLeadingZeros(ax)) - 8;
        mx = ax << u32(sh);
        ex = 1 - sh;
    }
    if (ey == 0) {
        let sh = i32(countLeadingZeros(ay)) - 8;
        my = ay << u32(sh);
        ey = 1 - sh;
    }
    loop {
        if (mx >= my) {
            mx = mx - my;
        }
        if (mx == 0u) {
            return 0u;
        }
        if (ex <= ey) {
            break;
        }
        mx = mx << 1u;
        ex = ex - 1;
    }
    let sh = i32(countLeadingZeros(mx)) - 8;
    mx = mx << u32(sh);
    ex = ex - sh;
    if (ex > 0) {
        return (mx - 0x800000u) | (u32(ex) << 23u);
    }
    return mx >> u32(1 - ex);
}

// numpy's remainder (npy_divmod): the sign of the divisor. NaN for a NaN, an infinite x or a
// zero y; a zero result takes y's sign; finite x against ±inf gives x or y by the signs.
fn k_remainder(x: f32, y: f32) -> f32 {
    let bx = bitcast<u32>(x);
    let by = bitcast<u32>(y);
    let ax = bx & 0x7fffffffu;
    let ay = by & 0x7fffffffu;
    if (ax >= 0x7f800000u || ay > 0x7f800000u || ay == 0u) {
        return k_nan();
    }
    var m = ax;
    if (ay != 0x7f800000u) {
        m = k_fmod_bits(ax, ay);
    }
    if (m == 0u) {
        return bitcast<f32>(by & 0x80000000u);
    }
    let r = bitcast<f32>(m | (bx & 0x80000000u));
    if ((bx ^ by) >= 0x80000000u) {
        return r + y;
    }
    return r;
}

// numpy's floor_divide for floats (npy_divmod in f32): x // ±0 = x / ±0; otherwise
// (x - fmod(x, y)) / y, one less where the remainder's sign differs from y's, rounded to the
// nearest whole number (a zero quotient keeps the sign of x / y).
fn k_floor_divide(x: f32, y: f32) -> f32 {
    let bx = bitcast<u32>(x);
    let by = bitcast<u32>(y);
    let ax = bx & 0x7fffffffu;
    let ay = by & 0x7fffffffu;
    let zero_sign = (bx ^ by) & 0x80000000u;
    if (ay == 0u) {
        return select(k_with_sign(k_inf(), k_bits(zero_sign)), k_nan(), ax == 0u || ax > 0x7f800000u); // x / ±0
    }
    if (ax >= 0x7f800000u || ay > 0x7f800000u) {
        return k_nan();
    }
    var m = ax;
    if (ay != 0x7f800000u) {
        m = k_fmod_bits(ax, ay);
    }
    let mod_ = bitcast<f32>(m | (bx & 0x80000000u));
    var d = 0.0;
    if (ay != 0x7f800000u) {
        // x - mod_ (same sign, |mod_| <= |x|, the difference exact): below 2^-125 on the bits,
        // where a device that flushes subnormals (the H100) would make 1e-40 // 1e-40 zero.
        var num = x - mod_;
        if (ax < 0x01000000u) {
            num = bitcast<f32>((ax - m) | (bx & 0x80000000u));
        }
        d = k_div(num, y);
    }
    if (m != 0u && (bx ^ by) >= 0x80000000u) {
        d = d - 1.0;
    }
    if ((bitcast<u32>(d) & 0x7fffffffu) == 0u) {
        return k_bits(zero_sign);
    }
    var q = floor(d);
    if (d - q > 0.5) {
        q = q + 1.0;
    }
    return q;
}

// numpy's integer remainder: the sign of the divisor, x % 0 = 0 (i32::MIN % -1 = 0).
fn k_remainder_i32(a: i32, b: i32) -> i32 {
    if (b == 0 || b == -1) {
        return 0;
    }
    let r = a % b;
    return select(r, r + b, r != 0 && ((r < 0) != (b < 0)));
}

fn k_remainder_u32(a: u32, b: u32) -> u32 {
    return select(a % b, 0u, b == 0u);
}
