
// The rotation of pair i at position `pos` (rope.wgsl and rope_kv_cache.wgsl: both must turn
// by exactly the same angles): (cos, sin) of pos * base^(-i / half), with
// log2_base = log2(base) and inv_half = 1 / half, the angle reduced to [-pi, pi] first
// (GPU sin/cos are only accurate near zero).
const TWO_PI_HI: f32 = 6.28125;                 // exactly representable, 8 significant bits
const TWO_PI_LO: f32 = 0.0019353071795864769;   // 2*pi - TWO_PI_HI
const INV_TWO_PI: f32 = 0.15915494309189535;

fn rope_cos_sin(pos: f32, i: u32, inv_half: f32, log2_base: f32) -> vec2<f32> {
    return rope_turn(pos * rope_freq(i, inv_half, log2_base));
}

// base^(-i / half): pair i's turn per position.
fn rope_freq(i: u32, inv_half: f32, log2_base: f32) -> f32 {
    return k_exp2(-f32(i) * inv_half * log2_base);
}

// (cos, sin) of the angle `angle`, reduced to [-pi, pi] first.
fn rope_turn(angle: f32) -> vec2<f32> {
    var a = angle;
    let k = round(a * INV_TWO_PI);
    a = (a - k * TWO_PI_HI) - k * TWO_PI_LO;
    return vec2<f32>(k_sin_cos(a, true), k_sin_cos(a, false));
}
