// The max/min family's order, shared by reduce.wgsl and reduce_arg_pick.wgsl (rendered into both
// through their ORDER placeholder): Acc holds a value and its position along the run.
struct Acc {
    v: {{A}},
    i: u32,
}

fn is_nan(v: {{A}}) -> bool {
    {{ISNAN}}
}

// Whether b replaces a in the max/min family: NaN wins (numpy propagates it), then the larger
// (smaller) value, then the lower position (first occurrence).
fn takes(a: Acc, b: Acc) -> bool {
    let an = is_nan(a.v);
    let bn = is_nan(b.v);
    if (an || bn) {
        if (an && bn) {
            return b.i < a.i;
        }
        return bn;
    }
    if (b.v != a.v) {
        return b.v {{CMP}} a.v;
    }
    return b.i < a.i;
}

