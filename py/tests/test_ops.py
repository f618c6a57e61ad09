"""matmul, reductions, normalisation, conv/pool, movement, nn, attention and random against numpy."""

import kiln
import numpy as np
import pytest
from conftest import FLOATS, HAS_F16, check, f64, rand

# ------------------------------------------------------------------------------------- matmul

MATMUL = [
    ((3, 4), (4, 5)),
    ((1, 1), (1, 1)),
    ((7,), (7,)),
    ((7,), (7, 3)),
    ((2, 5), (5,)),
    ((2, 3, 4), (4, 6)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((33, 17), (17, 65)),
    ((0, 4), (4, 3)),
    ((3, 0), (0, 2)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shapes", MATMUL)
def test_matmul(rng, shapes, dtype):
    a, b = rand(rng, shapes[0], dtype), rand(rng, shapes[1], dtype)
    want = np.matmul(f64(a), f64(b))
    k = shapes[0][-1]
    scale = max(1, k) * (5 if dtype == "float32" else 1)
    check(kiln.matmul(kiln.asarray(a), kiln.asarray(b)), want, dtype, scale=scale)
    check(kiln.asarray(a) @ kiln.asarray(b), want, dtype, scale=scale)
    check(a @ kiln.asarray(b), want, dtype, scale=scale)


def test_matmul_int_and_errors(rng):
    a, b = rand(rng, (3, 4), "int32"), rand(rng, (4, 2), "int32")
    check(kiln.matmul(a, b), a.astype(np.int64) @ b, "int32")
    with pytest.raises(ValueError) as e:
        kiln.matmul(kiln.ones((2, 3)), kiln.ones((4, 2)))
    assert e.value.code == 3
    with pytest.raises(TypeError):
        kiln.matmul(kiln.ones((2, 3)), kiln.ones((3, 2), dtype="int32"))


# ------------------------------------------------------------------------------------- reduce

AXES = [None, 0, -1, 1, (0, 2), (-1, -3), (), (0, 1, 2)]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "var"])
def test_reduce_f32(rng, name, axis, keepdims):
    a = rand(rng, (3, 4, 5), "float32")
    ref = getattr(np, name)
    want = ref(f64(a), axis=axis, keepdims=keepdims)
    check(getattr(kiln, name)(kiln.asarray(a), axis=axis, keepdims=keepdims), want, "float32", scale=10)
    if name != "var":
        check(getattr(kiln.asarray(a), name)(axis=axis, keepdims=keepdims), want, "float32", scale=10)


@pytest.mark.parametrize("dtype", ["int32", "uint32"] + (["float16"] if HAS_F16 else []))
@pytest.mark.parametrize("name", ["sum", "max", "min"])
def test_reduce_other_dtypes(rng, name, dtype):
    a = rand(rng, (6, 130), dtype)
    for axis in (None, 0, -1):
        want = getattr(np, name)(f64(a), axis=axis)
        check(getattr(kiln, name)(a, axis=axis), want, dtype, scale=10)


def test_reduce_large_and_ddof(rng):
    a = rand(rng, (3, 1000), "float32")
    check(kiln.sum(a, axis=1), f64(a).sum(axis=1), "float32", rtol=1e-4, atol=1e-3)
    check(kiln.var(a, axis=-1, ddof=1), f64(a).var(axis=-1, ddof=1), "float32", rtol=1e-4, atol=1e-4)
    check(kiln.var(a, correction=1), f64(a).var(ddof=1), "float32", rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError):
        kiln.var(a, correction=1, ddof=1)


def test_reduce_empty_and_errors():
    z = kiln.zeros((0, 3))
    check(kiln.sum(z, axis=0), np.zeros(3), "float32")
    check(kiln.sum(z), np.asarray(0.0), "float32")
    assert kiln.sum(z, axis=1).shape == (0,)
    assert kiln.sum(z, axis=0, keepdims=True).shape == (1, 3)
    for bad in (2, -3, (0, 0)):
        with pytest.raises(ValueError) as e:
            kiln.sum(z, axis=bad)
        assert isinstance(e.value, kiln.KilnError)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin(rng, name, axis, keepdims):
    a = rng.permutation(4 * 37).astype(np.float32).reshape(4, 37)  # distinct values: no ties
    want = getattr(np, name)(a, axis=axis, keepdims=keepdims)
    got = getattr(kiln, name)(kiln.asarray(a), axis=axis, keepdims=keepdims)
    check(got, want, "int32")
    check(getattr(kiln.asarray(a), name)(axis=axis, keepdims=keepdims), want, "int32")


# ------------------------------------------------------------------------------------- norm

def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,axis", [((5,), 0), ((3, 7), -1), ((3, 7), 0), ((2, 3, 300), -1), ((2, 4, 3), 1), ((0, 4), -1)])
def test_softmax_log_softmax(rng, shape, axis, dtype):
    a = rand(rng, shape, dtype, -4, 4)
    x = f64(a)
    s = _softmax(x, axis) if x.size else x
    check(kiln.softmax(kiln.asarray(a), axis=axis), s, dtype, scale=5)
    ls = (x - x.max(axis=axis, keepdims=True) - np.log(np.exp(x - x.max(axis=axis, keepdims=True)).sum(axis=axis, keepdims=True))) if x.size else x
    check(kiln.log_softmax(kiln.asarray(a), axis=axis), ls, dtype, scale=5)


def test_softmax_default_axis_and_errors(rng):
    a = rand(rng, (3, 4), "float32")
    check(kiln.softmax(a), _softmax(f64(a), -1), "float32", scale=5)
    with pytest.raises(ValueError):
        kiln.softmax(a, axis=2)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(7,), (3, 16), (2, 3, 129)])
def test_layer_norm_rms_norm(rng, shape, dtype):
    a = rand(rng, shape, dtype)
    n = shape[-1]
    w, b = rand(rng, (n,), dtype), rand(rng, (n,), dtype)
    x = f64(a)
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    ln = (x - mu) / np.sqrt(var + 1e-5)
    check(kiln.layer_norm(a, w, b), ln * f64(w) + f64(b), dtype, scale=20)
    check(kiln.layer_norm(a), ln, dtype, scale=20)
    check(kiln.layer_norm(a, w, None, eps=1e-3), (x - mu) / np.sqrt(var + 1e-3) * f64(w), dtype, scale=20)
    rms = x / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-6)
    check(kiln.rms_norm(a, w), rms * f64(w), dtype, scale=20)
    check(kiln.rms_norm(a, eps=1e-2), x / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-2), dtype, scale=20)


def test_norm_shape_errors():
    with pytest.raises(ValueError) as e:
        kiln.layer_norm(kiln.ones((2, 4)), kiln.ones(3))
    assert isinstance(e.value, kiln.KilnError)
    with pytest.raises(TypeError):
        kiln.layer_norm(kiln.ones((2, 4), dtype="int32"))


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (1, 4, 3, 3)])
def test_batch_norm(rng, shape):
    c = shape[1]
    a = rand(rng, shape, "float32")
    mean, var = rand(rng, (c,)), rand(rng, (c,), low=0.5, high=2)
    w, b = rand(rng, (c,)), rand(rng, (c,))
    bc = (1, c) + (1,) * (len(shape) - 2)
    x = f64(a)
    want = (x - f64(mean).reshape(bc)) / np.sqrt(f64(var).reshape(bc) + 1e-5) * f64(w).reshape(bc) + f64(b).reshape(bc)
    check(kiln.batch_norm(a, mean, var, w, b), want, "float32", scale=10)
    want0 = (x - f64(mean).reshape(bc)) / np.sqrt(f64(var).reshape(bc) + 1e-3)
    check(kiln.batch_norm(a, mean, var, eps=1e-3), want0, "float32", scale=10)


# ------------------------------------------------------------------------------------- conv / pool

def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def conv2d_ref(x, w, b, stride, padding, dilation, groups):
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, w[g * og:(g + 1) * og, :, i, j])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


CONV = [
    # x shape, w shape, stride, padding, dilation, groups, bias
    ((1, 1, 5, 5), (1, 1, 3, 3), 1, 0, 1, 1, False),
    ((2, 3, 8, 7), (4, 3, 3, 3), 1, 1, 1, 1, True),
    ((1, 4, 9, 9), (6, 2, 3, 2), (2, 1), (1, 0), 1, 2, True),
    ((2, 2, 11, 10), (3, 2, 3, 3), 2, 2, 2, 1, False),
    ((1, 4, 6, 6), (4, 1, 3, 3), 1, 1, 1, 4, True),
    ((1, 3, 1, 1), (5, 3, 1, 1), 1, 0, 1, 1, True),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", CONV)
def test_conv2d(rng, case, dtype):
    xs, ws, stride, padding, dilation, groups, bias = case
    x, w = rand(rng, xs, dtype), rand(rng, ws, dtype)
    b = rand(rng, (ws[0],), dtype) if bias else None
    want = conv2d_ref(f64(x), f64(w), None if b is None else f64(b), stride, padding, dilation, groups)
    got = kiln.conv2d(kiln.asarray(x), kiln.asarray(w), bias=None if b is None else kiln.asarray(b),
                      stride=stride, padding=padding, dilation=dilation, groups=groups)
    check(got, want, dtype, scale=20)


def test_conv2d_errors():
    with pytest.raises(ValueError) as e:
        kiln.conv2d(kiln.ones((1, 3, 5, 5)), kiln.ones((2, 4, 3, 3)))
    assert isinstance(e.value, kiln.KilnError)
    with pytest.raises(ValueError):
        kiln.conv2d(kiln.ones((1, 3, 5, 5)), kiln.ones((2, 3, 3, 3)), stride=(1, 2, 3))


def pool_ref(x, k, s, p, kind):
    (kh, kw), (sh, sw), (ph, pw) = _pair(k), _pair(s), _pair(p)
    n, c, h, w = x.shape
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw]
            out[:, :, i, j] = win.max(axis=(2, 3)) if kind == "max" else win.sum(axis=(2, 3)) / (kh * kw)
    return out


@pytest.mark.parametrize("case", [((1, 1, 4, 4), 2, None, 0), ((2, 3, 7, 9), 3, 2, 1), ((1, 2, 5, 6), (2, 3), (1, 2), (1, 1))])
def test_pools(rng, case):
    shape, k, s, p = case
    x = rand(rng, shape, "float32")
    s_ = k if s is None else s
    check(kiln.max_pool2d(kiln.asarray(x), k, stride=s, padding=p), pool_ref(f64(x), k, s_, p, "max"), "float32")
    check(kiln.avg_pool2d(kiln.asarray(x), k, stride=s, padding=p), pool_ref(f64(x), k, s_, p, "avg"), "float32", scale=5)


# ------------------------------------------------------------------------------------- movement

def test_reshape_permute_transpose(rng):
    a = rand(rng, (2, 3, 4), "int32")
    t = kiln.asarray(a)
    check(kiln.reshape(t, (4, -1)), a.reshape(4, -1), "int32")
    check(kiln.reshape(t, (4, 6), copy=True), a.reshape(4, 6), "int32")
    for axes in [(0, 1, 2), (2, 0, 1), (1, 2, 0), (-1, 0, 1)]:
        check(kiln.permute_dims(t, axes), np.transpose(a, axes), "int32")
        check(kiln.permute(t, axes), np.transpose(a, axes), "int32")
        check(kiln.transpose(t, axes), np.transpose(a, axes), "int32")
    check(kiln.transpose(t), a.T, "int32")
    check(kiln.transpose(t, 0, 2), np.swapaxes(a, 0, 2), "int32")
    check(kiln.swapaxes(t, -1, -2), np.swapaxes(a, -1, -2), "int32")
    check(kiln.matrix_transpose(t), np.swapaxes(a, -1, -2), "int32")
    with pytest.raises(ValueError):
        kiln.permute_dims(t, (0, 1))
    with pytest.raises(ValueError):
        kiln.permute_dims(t, (0, 0, 1))
    e = kiln.zeros((0, 3))
    assert kiln.permute_dims(e, (1, 0)).shape == (3, 0)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(rng, axis):
    parts = []
    for n in (1, 3, 0, 2):
        shape = [2, 3, 4]
        shape[axis] = n
        parts.append(rand(rng, tuple(shape), "float32"))
    check(kiln.concat([kiln.asarray(p) for p in parts], axis=axis), np.concatenate(parts, axis=axis), "float32")
    check(kiln.concatenate(parts, axis=axis), np.concatenate(parts, axis=axis), "float32")
    with pytest.raises(ValueError):
        kiln.concat([kiln.ones((2, 3)), kiln.ones((3, 3))], axis=1)
    with pytest.raises(TypeError):
        kiln.concat([kiln.ones((2, 3)), kiln.ones((2, 3), dtype="int32")])


def test_slice(rng):
    a = rand(rng, (5, 9), "float32")
    t = kiln.asarray(a)
    check(kiln.slice(t, 1, 2, 7, 2), a[:, 2:7:2], "float32")
    check(kiln.slice(t, 0, -3), a[-3:], "float32")
    check(kiln.slice(t, -1, None, 4), a[:, :4], "float32")
    check(kiln.slice(t, 1, 100, 200), a[:, 100:200], "float32")
    check(kiln.slice(t, 0, 1, 5, 3), a[1:5:3], "float32")
    with pytest.raises(ValueError):
        kiln.slice(t, 0, 0, 3, 0)


@pytest.mark.parametrize("idx_dtype", ["int32", "uint32"])
def test_take_index_select_gather(rng, idx_dtype):
    a = rand(rng, (4, 5, 3), "float32")
    t = kiln.asarray(a)
    idx = np.array([4, 0, 2, 2], dtype=idx_dtype)
    check(kiln.take(t, idx, axis=1), np.take(a, idx, axis=1), "float32")
    check(kiln.take(t, kiln.asarray(idx), axis=-2), np.take(a, idx, axis=-2), "float32")
    check(kiln.take(t, idx), np.take(a, idx), "float32")
    check(kiln.index_select(t, 0, idx[1:]), np.take(a, idx[1:], axis=0), "float32")
    g = rng.integers(0, 4, size=(2, 5, 3)).astype(idx_dtype)
    want = np.take_along_axis(a, g.astype(np.int64), axis=0)
    check(kiln.gather(t, 0, g), want, "float32")
    check(kiln.take_along_axis(t, g, axis=0), want, "float32")
    with pytest.raises(TypeError):
        kiln.take(t, np.array([0.0, 1.0], np.float32), axis=0)


def test_negative_indices_count_from_the_end(rng):
    """Issue 28: take_along_axis read -1 as 0. numpy's answers for indices in [-n, n); outside
    it numpy raises IndexError and Kiln reads 0 (docs/ops-api.md)."""
    a = rand(rng, (4, 5, 3), "float32")
    t = kiln.asarray(a)
    g = rng.integers(-4, 4, size=(2, 5, 3)).astype(np.int32)
    g[0, 0, 0], g[1, 0, 0] = -1, -4
    check(kiln.take_along_axis(t, g, axis=0), np.take_along_axis(a, g, axis=0), "float32")
    check(kiln.gather(t, -1, g[:, :, :2] % 3 - 3), np.take_along_axis(a[:2], g[:, :, :2] % 3 - 3, axis=-1), "float32")
    idx = np.array([-1, -5, 0, 4], np.int32)
    check(kiln.take(t, idx, axis=1), np.take(a, idx, axis=1), "float32")
    bad = np.array([[-5], [4]], np.int32)  # n = 4 along axis 0: both outside [-4, 4)
    got = kiln.take_along_axis(kiln.asarray(a[:2, :1, 0]), bad, axis=0).numpy()
    assert (got == 0).all()
    with pytest.raises(IndexError):
        np.take_along_axis(a[:2, :1, 0], bad, axis=0)


# ------------------------------------------------------------------------------------- nn

def test_embedding(rng):
    w = rand(rng, (10, 6), "float32")
    ids = rng.integers(0, 10, size=(3, 4)).astype(np.int32)
    check(kiln.embedding(w, ids), w[ids], "float32")
    check(kiln.embedding(kiln.asarray(w), kiln.asarray(ids.astype(np.uint32))), w[ids], "float32")


def rope_ref(x, pos_offset, base):
    seq, d = x.shape[-2], x.shape[-1]
    half = d // 2
    inv = base ** (-2 * np.arange(half) / d)
    ang = (pos_offset + np.arange(seq))[:, None] * inv[None, :]
    cos, sin = np.cos(ang), np.sin(ang)
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,off,base", [((5, 8), 0, 10000.0), ((2, 3, 7, 16), 11, 500.0)])
def test_rope(rng, shape, off, base, dtype):
    x = rand(rng, shape, dtype)
    check(kiln.rope(kiln.asarray(x), pos_offset=off, base=base), rope_ref(f64(x), off, base), dtype, scale=10)


def attention_ref(q, k, v, causal, scale):
    d = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) * (scale if scale is not None else 1 / np.sqrt(d))
    if causal:
        lq, lk = s.shape[-2], s.shape[-1]
        mask = np.arange(lk)[None, :] > np.arange(lq)[:, None]
        s = np.where(mask, -np.inf, s)
    return _softmax(s, -1) @ v


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [((4, 8), (6, 8), (6, 5)), ((2, 3, 7, 16), (2, 3, 7, 16), (2, 3, 7, 16)), ((1, 1, 4), (1, 9, 4), (1, 9, 3))])
@pytest.mark.parametrize("causal", [False, True])
def test_attention(rng, shape, causal, dtype):
    q, k, v = (rand(rng, s, dtype) for s in shape)
    want = attention_ref(f64(q), f64(k), f64(v), causal, None)
    check(kiln.attention(kiln.asarray(q), kiln.asarray(k), kiln.asarray(v), causal=causal), want, dtype, scale=20)
    want = attention_ref(f64(q), f64(k), f64(v), causal, 0.3)
    check(kiln.attention(q, k, v, causal=causal, scale=0.3), want, dtype, scale=20)


# ------------------------------------------------------------------------------------- random

@pytest.mark.parametrize("dtype", FLOATS)
def test_random(dtype):
    u = kiln.random.uniform((100, 100), seed=7, low=-2, high=3, dtype=dtype).numpy()
    assert u.dtype == np.dtype(dtype) and u.shape == (100, 100)
    assert u.min() >= -2 and u.max() <= 3
    assert abs(u.astype(np.float64).mean() - 0.5) < 0.05
    assert abs(u.astype(np.float64).std() - 5 / np.sqrt(12)) < 0.05
    n = kiln.random.normal(20000, seed=3, mean=1.0, std=2.0, dtype=dtype).numpy().astype(np.float64)
    assert abs(n.mean() - 1.0) < 0.06 and abs(n.std() - 2.0) < 0.06
    # Counter based: the same seed gives the same numbers; another seed other numbers.
    a = kiln.random.normal((64,), seed=11).numpy()
    assert a.tobytes() == kiln.random.normal((64,), seed=11).numpy().tobytes()
    assert a.tobytes() != kiln.random.normal((64,), seed=12).numpy().tobytes()
    assert kiln.random.uniform((3,)).numpy().tobytes() != kiln.random.uniform((3,)).numpy().tobytes()
    assert kiln.random.uniform(0, seed=1).shape == (0,)
    assert np.array_equal(kiln.random_uniform((4,), 5).numpy(), kiln.random.uniform((4,), seed=5).numpy())
    with pytest.raises(TypeError):
        kiln.random.uniform((3,), seed=1, dtype="int32")


# ------------------------------------------------------------------------------------- quant


@pytest.mark.parametrize("fmt", ["q4_0", "q4_1", "q8_0"])
def test_quant_ops(rng, fmt):
    n, k = 9, 64
    w = rand(rng, (n, k), "float32")
    q = kiln.quantize(w, fmt)
    assert q.dtype == np.uint32
    nbytes = n * k // 32 * {"q4_0": 18, "q4_1": 20, "q8_0": 34}[fmt]
    assert q.shape == ((nbytes + 3) // 4,)
    # The same bytes uploaded as a GGUF slice give the same tensor.
    raw = q.numpy().tobytes()[:nbytes]
    q2 = kiln.quant_from_bytes(raw, fmt.upper(), n, k)
    assert q2.numpy().tobytes() == q.numpy().tobytes()
    deq = kiln.dequantize(q, fmt, n, k).numpy()
    assert deq.dtype == np.float32 and deq.shape == (n, k)
    step = {"q4_0": 2 / 8, "q4_1": 2 / 15, "q8_0": 2 / 127}[fmt] * np.abs(w).max()
    assert np.abs(deq - w).max() <= step
    x = rand(rng, (3, k), "float32")
    check(kiln.quant_matmul(x, q, fmt, n), f64(x) @ f64(deq).T, "float32", scale=10)
    ids = np.array([[0, 8, -1], [9, 3, 3]], np.int32)
    want = np.stack([deq[i] if 0 <= i < n else np.zeros(k, np.float32) for i in ids.reshape(-1)]).reshape(2, 3, k)
    check(kiln.quant_embedding(q, fmt, k, ids), want, "float32", rtol=0, atol=0)


def test_quant_errors():
    with pytest.raises(kiln.InvalidArgumentError, match="q4_0, q4_1, q8_0"):
        kiln.quantize(np.zeros((1, 32), np.float32), "q8_k")
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.quant_from_bytes(b"\0" * 17, "q4_0", 1, 32)
    q = kiln.quantize(np.zeros((2, 32), np.float32), "q8_0")
    with pytest.raises(kiln.ShapeError):
        kiln.quant_matmul(np.zeros((1, 32), np.float32), q, "q8_0", 3)
