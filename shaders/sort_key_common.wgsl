
// numpy's order on floats as an unsigned integer, from the bits (no float arithmetic, so a
// GPU that flushes subnormals still orders them): -inf < ... < -0 == +0 < ... < inf < NaN, every
// NaN alike. Shared by sort_keys.wgsl and search.wgsl (appended: `enable` comes first), so that
// searchsorted finds values where the sort put them.
fn float_key(b: u32) -> u32 {
    let mag = b & 0x7fffffffu;
    if (mag > 0x7f800000u) {
        return 0xffffffffu;
    }
    if (mag == 0u) {
        return 0x80000000u;
    }
    if ((b >> 31u) == 1u) {
        return ~b;
    }
    return b | 0x80000000u;
}
