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
_NAMES = {"amax": "max", "amin": "min", "concatenate": "concat",
          "absolute": "abs", "power": "pow", "true_divide": "divide", "invert": "bitwise_invert",
          "left_shift": "bitwise_left_shift", "right_shift": "bitwise_right_shift", "around": "round"}
# numpy-only keywords that change nothing at these values (numpy's _NoValue is compared by name).
_INERT = {"out": (None,), "where": (True,), "order": ("C", "K", "A"), "casting": ("same_kind",),
          "subok": (True,), "signature": (None,), "like": (None,), "copy": (None,)}
_SIG: dict = {}


def _kiln():
    import kiln  # the package, which imports this module: resolved at call time

    return kiln


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
    kiln = _kiln()
    if isinstance(v, kiln.Tensor):
        return _np.asarray(v)
    if isinstance(v, (list, tuple)):
        return type(v)(_host(e) for e in v)
    if isinstance(v, dict):
        return {k: _host(e) for k, e in v.items()}
    return v


def _target(name):
    kiln = _kiln()
    return getattr(kiln, _NAMES.get(name, name), None)


class _Spread(list):
    """numpy's arguments gathered for Kiln's ``*args`` (passed spread, one by one)."""


def _call_mapped(fn, params, what):
    """Calls Kiln's ``fn`` with numpy's bound ``params`` (an ordered list of (name, value,
    default)). Each numpy parameter goes to Kiln's of the same name, else to Kiln's parameter at
    its position (``np.where(c, x, y)`` -> ``kiln.where(condition, x1, x2)``); a numpy-only one
    left at its default is dropped, any other raises TypeError naming it."""
    sig = _signature(fn)
    if sig is None:
        raise TypeError(f"{what}: Kiln's {fn.__name__} has no inspectable signature")
    kparams = list(sig.parameters.values())
    by_name = {p.name: p for p in kparams if p.kind != p.VAR_KEYWORD}
    positional = [p for p in kparams if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    live = [(i, n, v) for i, (n, v, d) in enumerate(params) if i == 0 or not _is_default(n, v, d)]
    # Names first, then positions for numpy's parameters whose names Kiln does not use.
    chosen = {n: v for _, n, v in live if n in by_name}
    for i, name, value in live:
        if name in by_name:
            continue
        var = positional[-1] if positional and positional[-1].kind == inspect.Parameter.VAR_POSITIONAL else None
        if var is not None and i >= len(positional) - 1 and name not in by_name:
            chosen.setdefault(var.name, _Spread()).append(value)  # np.meshgrid(x, y) -> meshgrid(*arrays)
            continue
        target = positional[i] if i < len(positional) else None
        if target is None or target.name in chosen:
            raise TypeError(
                f"{what}: argument {name}={value!r} is not supported by kiln.{fn.__name__}; "
                f"call numpy on np.asarray(t) (a host copy) or kiln.{fn.__name__} with its own arguments")
        chosen[target.name] = value
    args, kwargs = [], {}
    for p in kparams:
        if p.name not in chosen:
            if p.kind == p.POSITIONAL_ONLY and p.default is p.empty:
                raise TypeError(f"{what}: kiln.{fn.__name__} needs its argument {p.name!r}")
            continue
        v = chosen[p.name]
        if p.kind == p.VAR_POSITIONAL:
            args.extend(v if isinstance(v, _Spread) else (v,))
        elif p.kind == p.POSITIONAL_ONLY or (p.kind == p.POSITIONAL_OR_KEYWORD and len(args) == positional.index(p)):
            args.append(v)
        else:
            kwargs[p.name] = v
    return fn(*args, **kwargs)


def array_function(self, func, types, args, kwargs):
    """NEP 18: numpy functions Kiln has run on the GPU, the others on a host copy."""
    name = func.__name__
    # Only numpy's own namespace: np.linalg.norm or np.fft.fft are not Kiln's namesakes.
    fn = _target(name) if getattr(func, "__module__", None) == "numpy" else None
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
                return _call_mapped(fn, params, f"numpy.{name} on a kiln.Tensor")
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
