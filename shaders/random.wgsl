// Counter-based random numbers: Philox-4x32-10 (Salmon et al., SC'11; Random123's
// philox4x32_R with R = 10) keyed by the 64-bit seed, counter = (t, 0, 0, 0) for thread t.
// Thread t writes elements 4t .. 4t+3 from the four words of one Philox block. The bits come
// from u32 integer arithmetic only, so every device (and reference/random.rs) sees the same
// bits; only the float mapping below runs in floating point.
//   uniform: u = (w >> 8) * 2^-24 in [0, 1);  v = min((span * u) + low, cap), two separately
//            rounded f32 operations (the product passes through an integer xor with a uniform
//            zero, so no compiler can contract it into an fma: fma is fused on some GPUs
//            and not on others, and the bits must match everywhere)
//   normal:  Box-Muller on word pairs (w0, w1), (w2, w3):
//            u1 = ((w0 >> 8) + 1) * 2^-24 in (0, 1], th = 2pi * ((w1 >> 8) * 2^-24 - 1/2)
//            r = sqrt(-2 ln u1); elements r cos th, r sin th; v = mean + std * z
{{ENABLE}}
struct Params {
    n: u32,
    key0: u32,
    key1: u32,
    zero: u32, // always 0: an opaque value the compiler cannot fold
    a: f32,    // low (uniform) or mean (normal)
    b: f32,    // high - low (uniform) or std (normal)
    cap: f32,  // largest value of the output dtype below high (uniform)
    pad2: u32,
}

@group(0) @binding(0) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(1) var<uniform> p: Params;

fn philox(counter: vec4<u32>, key: vec2<u32>) -> vec4<u32> {
    var c = counter;
    var k = key;
    for (var r = 0u; r < 10u; r++) {
        let p0 = mulhilo(0xD2511F53u, c.x);
        let p1 = mulhilo(0xCD9E8D57u, c.z);
        c = vec4<u32>(p1.x ^ c.y ^ k.x, p1.y, p0.x ^ c.w ^ k.y, p0.y);
        k = k + vec2<u32>(0x9E3779B9u, 0xBB67AE85u);
    }
    return c;
}

fn unit(w: u32) -> f32 {
    return ldexp(f32(w >> 8u), -24);
}

fn uniform_value(w: u32) -> f32 {
    let t = bitcast<f32>(bitcast<u32>(p.b * unit(w)) ^ p.zero);
    return min(t + p.a, p.cap);
}

fn normal_pair(w0: u32, w1: u32) -> vec2<f32> {
    let u1 = ldexp(f32((w0 >> 8u) + 1u), -24);
    let th = 6.2831853071795865 * (unit(w1) - 0.5);
    let r = k_sqrt(-2.0 * k_ln(u1));
    return vec2<f32>(p.a + p.b * (r * k_sin_cos(th, true)), p.a + p.b * (r * k_sin_cos(th, false)));
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * 64u;
    if (t > (p.n - 1u) / 4u) {
        return;
    }
    let e = t * 4u;
    let w = philox(vec4<u32>(t, 0u, 0u, 0u), vec2<u32>(p.key0, p.key1));
{{BODY}}
    for (var j = 0u; j < 4u; j++) {
        if (e + j < p.n) {
            out[e + j] = {{T}}(v[j]);
        }
    }
}
