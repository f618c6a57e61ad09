"""numpy's dispatch protocols on ``Tensor`` (NEP 13 ``__array_ufunc__``, NEP 18
``__array_function__``), so ``np.sum(t)``, ``np.exp(t)`` or ``np.concatenate([t, u])`` work.

The rule: a numpy function or ufunc Kiln has (by numpy's name, or Kiln's own) runs on the GPU
and returns a Tensor, with numpy's arguments mapped onto Kiln's (the first ones by position,
the rest by name); a numpy-only argument left at its default (``out=None``, ``where=True``...)
is dropped, one set to anything else raises TypeError naming it. A function Kiln lacks reads
every Tensor argument back to the host (``np.asarray``) and runs numpy's own implementation,
giving what numpy gives (an ndarray): one readback, never a silent wrong answer.
"""

from __future__ import annotations

import inspect

import numpy as _np

# numpy's names that differ from Kiln's (everything else is looked up under numpy's own name).
_NAMES = {"amax": "max", "amin": "min", "concatenate": "concat", "transpose": "permute_dims",
          "absolute": "abs", "power": "pow", "true_divide": "divide", "invert": "bitwise_invert",
          "left_shift": "bitwise_left_shift", "right_shift": "bitwise_right_shift", "around": "round"}
# numpy-only keywords that change nothing at these values (numpy's _NoValue is compared by name).
_INERT = {"out": (None,), "where": (True,), "order": ("C", "K", "A"), "casting": ("same_kind",),
          "subok": (True,), "signature": (None,), "like": (None,), "copy": (None,)}
_SIG: dict = {}


def _kiln():
    from . import _kiln as k
    import kiln
    return kiln, k


def _signature(f):
    if f not in _SIG:
        try:
            _SIG[f] = inspect.signature(f)
        except (TypeError, ValueError):
            _SIG[f] = None
    return _SIG[f]


def _is_default(name, value, default):
    if type(value).__name__ == "_NoValueType" or value is inspect.Parameter.empty:
        return True
    if default is not inspect.Parameter.empty and value is default:
        return True
    return name in _INERT and any(value is v or (type(value) is type(v) and value == v) for v in _INERT[name])


def _host(v):
    """Tensors (also inside lists and tuples) read back to numpy arrays."""
    kiln, _ = _kiln()
    if isinstance(v, kiln.Tensor):
        return _np.asarray(v)
    if isinstance(v, (list, tuple)):
        return type(v)(_host(e) for e in v)
    if isinstance(v, dict):
        return {k: _host(e) for k, e in v.items()}
    return v


def _target(name):
    kiln, _ = _kiln()
    return getattr(kiln, _NAMES.get(name, name), None)


def _call_mapped(np_name, fn, params, what):
    """Calls Kiln's ``fn`` with numpy's bound ``params`` (an ordered list of (name, value,
    default)): Kiln's positional-only parameters take numpy's leading ones, the rest go by name."""
    sig = _signature(fn)
    if sig is None:
        raise TypeError(f"{what}: Kiln's {fn.__name__} has no inspectable signature")
    kparams = list(sig.parameters.values())
    n_pos = sum(p.kind == p.POSITIONAL_ONLY for p in kparams)
    var_pos = any(p.kind == p.VAR_POSITIONAL for p in kparams)
    names = {p.name for p in kparams if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    args, kwargs = [], {}
    for i, (name, value, default) in enumerate(params):
        if i < n_pos or (var_pos and name not in names):
            if i > len(args):  # a gap: a skipped positional cannot be expressed
                raise TypeError(f"{what}: argument {name!r} is not supported by kiln.{fn.__name__}")
            if not _is_default(name, value, default) or i < n_pos:
                args.append(value)
            continue
        if _is_default(name, value, default):
            continue
        if name in names:
            kwargs[name] = value
        else:
            raise TypeError(
                f"{what}: argument {name}={value!r} is not supported by kiln.{fn.__name__}; "
                f"call numpy on np.asarray(t) (a host copy) or kiln.{fn.__name__} with its own arguments")
    return fn(*args, **kwargs)


def array_function(self, func, types, args, kwargs):
    """NEP 18: numpy functions Kiln has run on the GPU, the others on a host copy."""
    name = func.__name__
    fn = _target(name)
    if fn is not None:
        sig = _signature(func)
        if sig is not None:
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError:
                bound = None
            if bound is not None:
                params = [(p.name, bound.arguments.get(p.name, p.default), p.default)
                          for p in sig.parameters.values()
                          if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
                extra = bound.arguments.get(next((p.name for p in sig.parameters.values()
                                                  if p.kind == p.VAR_KEYWORD), ""), {})
                params += [(k, v, inspect.Parameter.empty) for k, v in extra.items()]
                var = next((p.name for p in sig.parameters.values() if p.kind == p.VAR_POSITIONAL), None)
                if var is not None:
                    params[0:0] = [(var, v, inspect.Parameter.empty) for v in bound.arguments.get(var, ())]
                return _call_mapped(name, fn, params, f"numpy.{name} on a kiln.Tensor")
    return func(*_host(args), **_host(kwargs))


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """NEP 13: a ufunc Kiln has, called plainly, runs on the GPU; other methods (``reduce``,
    ``outer``...) and ufuncs Kiln lacks run numpy's on host copies."""
    fn = _target(ufunc.__name__)
    if method == "__call__" and fn is not None:
        out = kwargs.get("out")
        if out is not None and not (isinstance(out, tuple) and all(o is None for o in out)):
            raise TypeError(f"numpy.{ufunc.__name__}: out= is not supported on a kiln.Tensor "
                            f"(Kiln returns a new tensor: r = kiln.{fn.__name__}(...))")
        for k, v in kwargs.items():
            if k != "out" and not _is_default(k, v, inspect.Parameter.empty):
                raise TypeError(f"numpy.{ufunc.__name__}: {k}={v!r} is not supported on a kiln.Tensor; "
                                f"use kiln.{fn.__name__} or numpy on np.asarray(t) (a host copy)")
        return fn(*inputs)
    return getattr(ufunc, method)(*_host(inputs), **_host(kwargs))
