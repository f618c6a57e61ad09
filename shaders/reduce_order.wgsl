// The max/min family's order, shared by reduce.wgsl and reduce_arg_pick.wgsl (rendered into both
// through their ORDER placeholder): Acc holds a value and its position along the run.
struct Acc {
    v: {{A}},
    i: u32,
}

fn is_nan(v: {{A}}) -> bool {
    {{ISNAN}}
}

// A key that orders floats exactly from their bits (an adapter may flush subnormal operands of
// a float comparison: NVIDIA's does), +0 and -0 equal; integers are their own key.
fn ord(v: {{A}}) -> {{KEY}} {
    {{ORD}}
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
    let ka = ord(a.v);
    let kb = ord(b.v);
    if (kb != ka) {
        return kb {{CMP}} ka;
    }
    return b.i < a.i;
}

