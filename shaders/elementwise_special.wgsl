// Special values for the elementwise kernel (shaders/elementwise.wgsl): ops/elementwise.rs
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

fn k_exp(x: f32) -> f32 {
    if (k_is_nan(x)) {
        return x;
    }
    if (x > 88.8) {
        return k_inf(); // e^88.73 is past f32::MAX
    }
    if (x < -104.0) {
        return 0.0; // below half the smallest subnormal
    }
    return exp(x);
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
    if (b < 0x00800000u) {
        // Subnormal x = b * 2^-149, from the integer bits (a GPU may read x itself as 0).
        return log(f32(b)) - 103.27892990343185;
    }
    return log(x);
}

fn k_sqrt(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) == 0u || (b >= 0x7f800000u && b < 0x80000000u)) {
        return x; // ±0 (sign kept), +inf, NaN
    }
    if (b > 0x80000000u) {
        return k_nan();
    }
    if (b < 0x00800000u) {
        return sqrt(f32(b) * 2.0) * 2.6469779601696886e-23; // sqrt(b 2^-149) = sqrt(2b) 2^-75
    }
    return sqrt(x);
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
    if (b < 0x00800000u) {
        return 3.777893186295716e22 / sqrt(f32(b) * 2.0); // 2^75 / sqrt(2b)
    }
    return 1.0 / sqrt(x);
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
        let e = exp(-2.0 * ax);
        t = (1.0 - e) / (1.0 + e);
    }
    return k_with_sign(t, x);
}

fn k_erf(x: f32) -> f32 {
    // Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7); WGSL has no erf.
    let t = 1.0 / (1.0 + 0.3275911 * abs(x));
    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * k_exp(-x * x);
    return k_with_sign(y, x);
}

fn k_sigmoid(x: f32) -> f32 {
    if (k_is_nan(x)) {
        return x;
    }
    return 1.0 / (1.0 + k_exp(-x));
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

fn k_act_value(x: f32) -> f32 {
    return select(x, k_bits(0x80000000u), bitcast<u32>(x) == 0xff800000u);
}

fn k_gelu(x: f32) -> f32 {
    if (k_act_special(x)) {
        return k_act_value(x);
    }
    return 0.5 * x * (1.0 + k_erf(x * 0.70710678118654752));
}

fn k_gelu_tanh(x: f32) -> f32 {
    if (k_act_special(x)) {
        return k_act_value(x);
    }
    return 0.5 * x * (1.0 + k_tanh(0.79788456080286536 * (x + 0.044715 * x * x * x)));
}

fn k_silu(x: f32) -> f32 {
    if (k_act_special(x)) {
        return k_act_value(x);
    }
    return x / (1.0 + k_exp(-x));
}

fn k_div(a: f32, b: f32) -> f32 {
    // WGSL bounds the error of a / b only for |b| <= 2^126 (a GPU may multiply by 1/b, which
    // is subnormal past that and may flush to 0): a larger divisor is scaled into range.
    return select(a / b, (a * 0.25) / (b * 0.25), (bitcast<u32>(b) & 0x7fffffffu) > 0x7e800000u);
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
            r = r * base;
        }
        base = base * base;
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
        m = exp2(y * (log2(f32(ax)) - 149.0));
    } else if (y_int && ay <= 0x42000000u) {
        m = k_pow_small(select(base, 1.0 / base, y_neg), u32(yf));
    } else {
        m = pow(base, y);
    }
    return select(m, -m, x_neg && y_odd);
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
