// sample_token (core/src/ops/sample.rs): one workgroup picks the next token from a vocabulary's
// logits exactly as sample_token_host defines it. Thread t owns the contiguous chunk
// [t·chunk, (t+1)·chunk) of the vocabulary, so per-thread partial counts in thread order are in
// index order. Floats: only subtraction, multiplication and comparisons (correctly rounded in
// Vulkan), subnormals flushed by bit tests, never an operation producing inf/NaN (WGSL leaves
// them undefined: non-finite values are recognised by their bits). The rest is integer.
struct Params {
    vocab: u32,
    n_recent: u32, // ring entries the penalty reads (0: no penalty)
    ring_slot: u32, // where the picked token is written into the ring (0xffffffff: nowhere)
    flags: u32, // 1: greedy, 2: penalty
    top_k: u32, // 0: off
    top_p: u32, // in 2^-24; >= 2^24: off
    random: u32, // the draw, a 32-bit fraction
    b: u32, // the largest weight is 2^b
    inv_pen: f32,
    pen: f32,
    lim_pos: f32,
    lim_neg: f32,
    c: f32, // log2(e) / temperature
    lim_d: f32,
    clampv: f32, // 2^100
    pad0: u32,
}

// The logits' bits (f32 data read as u32: no float load of a NaN or inf).
@group(0) @binding(0) var<storage, read> logits: array<u32>;
@group(0) @binding(1) var<storage, read_write> ring: array<u32>;
// [0, vocab): the penalised logits' bits; [vocab, 2 vocab): the weights.
@group(0) @binding(2) var<storage, read_write> scratch: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<i32>;
@group(0) @binding(4) var<uniform> p: Params;

const WGS: u32 = 256u;
const NONE: u32 = 0xffffffffu;

var<workgroup> exp_hi: array<u32, 256>;
var<workgroup> exp_lo: array<u32, 256>;
var<workgroup> hist: array<atomic<u32>, 256>;
var<workgroup> part: array<u32, 256>;
var<workgroup> red_a: atomic<u32>;
var<workgroup> red_b: atomic<u32>;
var<workgroup> red_c: atomic<u32>;
var<workgroup> red_d: atomic<u32>;
var<workgroup> sh_a: u32;
var<workgroup> sh_b: u32;
var<workgroup> sh_c: u32;
var<workgroup> sh_key: u32;
var<workgroup> sh_idx: u32;

fn flush(x: f32) -> f32 {
    if ((bitcast<u32>(x) & 0x7f800000u) == 0u) {
        return 0.0;
    }
    return x;
}

fn finite_bits(u: u32) -> bool {
    return (u & 0x7f800000u) != 0x7f800000u;
}

fn nan_bits(u: u32) -> bool {
    return (u & 0x7fffffffu) > 0x7f800000u;
}

fn order_key(u: u32) -> u32 {
    if ((u & 0x80000000u) != 0u) {
        return ~u;
    }
    return u | 0x80000000u;
}

// The order key of a finite logit (> 0), 0 for the others.
fn cand_key(u: u32) -> u32 {
    if (finite_bits(u)) {
        return order_key(u);
    }
    return 0u;
}

// Bits of a finite penalised logit (scratch holds bits: no float load of inf/NaN).
fn penalize(u: u32) -> u32 {
    if (!finite_bits(u)) {
        return u;
    }
    let x = bitcast<f32>(u);
    if (x > 0.0) {
        if (x > p.lim_pos) {
            return 0x7f800000u;
        }
        return bitcast<u32>(flush(x * p.inv_pen));
    }
    if (-x > p.lim_neg) {
        return 0xff800000u;
    }
    return bitcast<u32>(flush(x * p.pen));
}

// The integer weight of finite z below the largest finite zmax (Derived::weight).
fn weight(z: f32, zmax: f32) -> u32 {
    let d = flush(clamp(z, -p.clampv, p.clampv) - clamp(zmax, -p.clampv, p.clampv));
    if (d == 0.0) {
        return 1u << p.b;
    }
    if (-d > p.lim_d) {
        return 0u;
    }
    let s = d * p.c;
    let n = u32(-s * 65536.0);
    let q = n >> 16u;
    if (q > p.b) {
        return 0u;
    }
    let f = n & 0xffffu;
    let m = mulhilo(exp_hi[f >> 8u], exp_lo[f & 255u]);
    let frac = (m.y >> 31u) | (m.x << 1u);
    return frac >> (31u - p.b + q);
}

// Whether key k (0: not finite) at index i is in the sorted prefix ending at (sk, si).
fn in_set(k: u32, i: u32, sk: u32, si: u32) -> bool {
    return k != 0u && (k > sk || (k == sk && i <= si));
}

fn elem_weight(unit: bool, i: u32) -> u32 {
    if (unit) {
        return 1u;
    }
    return scratch[p.vocab + i];
}

// The sum of the weights of the set (sk, si).
fn set_total(unit: bool, sk: u32, si: u32, lo: u32, hi: u32, t: u32) -> u32 {
    if (t == 0u) {
        atomicStore(&red_a, 0u);
    }
    workgroupBarrier();
    var s = 0u;
    for (var i = lo; i < hi; i += 1u) {
        if (in_set(cand_key(scratch[i]), i, sk, si)) {
            s += elem_weight(unit, i);
        }
    }
    atomicAdd(&red_a, s);
    workgroupBarrier();
    if (t == 0u) {
        sh_a = atomicLoad(&red_a);
    }
    return workgroupUniformLoad(&sh_a);
}

// The first element of the set (sk, si), in order (key descending, index ascending), whose
// running weight reaches goal (>= 1, <= the set's total): into sh_key and sh_idx.
fn select_at(goal: u32, unit: bool, sk: u32, si: u32, lo: u32, hi: u32, t: u32) {
    var prefix = 0u;
    var rem = goal;
    for (var digit = 0u; digit < 4u; digit += 1u) {
        let shift = 24u - 8u * digit;
        var hmask = 0u;
        if (digit > 0u) {
            hmask = 0xffffffffu << (32u - 8u * digit);
        }
        atomicStore(&hist[t], 0u);
        workgroupBarrier();
        // Runs of one bin are added at once (the top byte is the same for most logits).
        var run_bin = NONE;
        var run = 0u;
        for (var i = lo; i < hi; i += 1u) {
            let k = cand_key(scratch[i]);
            if (in_set(k, i, sk, si) && (k & hmask) == (prefix & hmask)) {
                let w = elem_weight(unit, i);
                let bin = (k >> shift) & 255u;
                if (bin != run_bin) {
                    if (run != 0u) {
                        atomicAdd(&hist[run_bin], run);
                    }
                    run_bin = bin;
                    run = 0u;
                }
                run += w;
            }
        }
        if (run != 0u) {
            atomicAdd(&hist[run_bin], run);
        }
        workgroupBarrier();
        if (t == 0u) {
            var acc = 0u;
            var bin = 0u;
            for (var j = 256u; j > 0u; j -= 1u) {
                let h = atomicLoad(&hist[j - 1u]);
                if (h >= rem - acc) {
                    bin = j - 1u;
                    break;
                }
                acc += h;
            }
            sh_b = prefix | (bin << shift);
            sh_c = rem - acc;
        }
        prefix = workgroupUniformLoad(&sh_b);
        rem = workgroupUniformLoad(&sh_c);
    }
    // Among the elements of key `prefix`, in index order: per-thread sums, then the owner.
    var s = 0u;
    for (var i = lo; i < hi; i += 1u) {
        let k = cand_key(scratch[i]);
        if (k == prefix && in_set(k, i, sk, si)) {
            s += elem_weight(unit, i);
        }
    }
    part[t] = s;
    workgroupBarrier();
    if (t == 0u) {
        var acc = 0u;
        var owner = 0u;
        for (var j = 0u; j < WGS; j += 1u) {
            if (part[j] >= rem - acc) {
                owner = j;
                break;
            }
            acc += part[j];
        }
        sh_a = owner;
        sh_c = rem - acc;
        sh_key = prefix;
        sh_idx = NONE;
    }
    let owner = workgroupUniformLoad(&sh_a);
    if (t == owner) {
        let r = sh_c;
        var acc = 0u;
        for (var i = lo; i < hi; i += 1u) {
            let k = cand_key(scratch[i]);
            if (k == prefix && in_set(k, i, sk, si)) {
                acc += elem_weight(unit, i);
                if (acc >= r) {
                    sh_idx = i;
                    break;
                }
            }
        }
    }
    workgroupBarrier();
}

fn finish(t: u32, token: u32) {
    if (t == 0u) {
        out[0] = i32(token);
        if (p.ring_slot != NONE) {
            ring[p.ring_slot] = token;
        }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32) {
    if (t == 0u) {
{{TABLES}}
        atomicStore(&red_a, 0u);
        atomicStore(&red_b, NONE);
        atomicStore(&red_c, 0u);
        atomicStore(&red_d, 0u);
    }
    let v = p.vocab;
    let chunk = (v + WGS - 1u) / WGS;
    let lo = min(t * chunk, v);
    let hi = min(lo + chunk, v);
    for (var i = lo; i < hi; i += 1u) {
        let u = logits[i];
        scratch[i] = select(u, 0u, (u & 0x7f800000u) == 0u);
    }
    storageBarrier();
    workgroupBarrier();
    if ((p.flags & 2u) != 0u) {
        // Each distinct recent token once: every occurrence in the ring writes the same value,
        // penalised from the logit itself (not from scratch, which another occurrence may have
        // penalised already). No search of the ring for a first occurrence: that was a loop of
        // up to n_recent passes per id, O(n_recent^2 / WGS) per thread, past llvmpipe's loop
        // limiter for long rings (core/src/loop_budget.rs).
        for (var j = t; j < p.n_recent; j += WGS) {
            let id = ring[j];
            if (id < v) {
                let u = logits[id];
                scratch[id] = penalize(select(u, 0u, (u & 0x7f800000u) == 0u));
            }
        }
        storageBarrier();
        workgroupBarrier();
    }
    // The greedy answer (largest non-NaN, lowest index), the finite count and largest.
    var best_k = 0u;
    var best_i = NONE;
    var fin_k = 0u;
    var fin_n = 0u;
    for (var i = lo; i < hi; i += 1u) {
        let u = scratch[i];
        if (!nan_bits(u)) {
            let k = order_key(u);
            if (k > best_k) {
                best_k = k;
                best_i = i;
            }
        }
        let c = cand_key(u);
        if (c != 0u) {
            fin_n += 1u;
            fin_k = max(fin_k, c);
        }
    }
    atomicMax(&red_a, best_k);
    atomicMax(&red_c, fin_k);
    atomicAdd(&red_d, fin_n);
    workgroupBarrier();
    if (best_k != 0u && best_k == atomicLoad(&red_a)) {
        atomicMin(&red_b, best_i);
    }
    workgroupBarrier();
    if (t == 0u) {
        let am = atomicLoad(&red_b);
        sh_idx = select(am, 0u, am == NONE);
        sh_key = atomicLoad(&red_c);
        sh_a = atomicLoad(&red_d);
    }
    let argmax = workgroupUniformLoad(&sh_idx);
    let zmax_key = workgroupUniformLoad(&sh_key);
    let n_finite = workgroupUniformLoad(&sh_a);
    if ((p.flags & 1u) != 0u || n_finite == 0u) {
        finish(t, argmax);
        return;
    }
    // Top-k: the k-th finite logit in order bounds the set.
    var sk = 0u;
    var si = NONE;
    if (p.top_k != 0u && p.top_k < n_finite) {
        select_at(p.top_k, true, 0u, NONE, lo, hi, t);
        sk = workgroupUniformLoad(&sh_key);
        si = workgroupUniformLoad(&sh_idx);
    }
    // The weights (0 outside the set).
    var zmax_bits = ~zmax_key;
    if ((zmax_key & 0x80000000u) != 0u) {
        zmax_bits = zmax_key & 0x7fffffffu;
    }
    let zmax = bitcast<f32>(zmax_bits);
    for (var i = lo; i < hi; i += 1u) {
        let u = scratch[i];
        var w = 0u;
        if (in_set(cand_key(u), i, sk, si)) {
            w = weight(bitcast<f32>(u), zmax);
        }
        scratch[v + i] = w;
    }
    storageBarrier();
    workgroupBarrier();
    if (p.top_p < 0x1000000u) {
        let total = set_total(false, sk, si, lo, hi, t);
        // ceil(total · top_p / 2^24), at least 1.
        let m = mulhilo(total, p.top_p);
        let lo_sum = m.y + 0xffffffu;
        let carry = select(0u, 1u, lo_sum < m.y);
        let goal = max(((m.x + carry) << 8u) | (lo_sum >> 24u), 1u);
        select_at(goal, false, sk, si, lo, hi, t);
        sk = workgroupUniformLoad(&sh_key);
        si = workgroupUniformLoad(&sh_idx);
    }
    let total = set_total(false, sk, si, lo, hi, t);
    let u = mulhilo(p.random, total).x;
    select_at(u + 1u, false, sk, si, lo, hi, t);
    let token = workgroupUniformLoad(&sh_idx);
    finish(t, select(token, argmax, token == NONE));
}
