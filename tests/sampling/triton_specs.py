"""Which compiled variants ("specialisations") of the Triton kernels a sampler launches, recorded
from real runs.

A Triton kernel is compiled once per specialisation of its arguments: the constexprs, each
tensor's dtype and whether its address is 16-byte aligned, and each integer's type (int32,
int64, uint64 by value) plus, unless the kernel lists it in ``do_not_specialize``, whether it
equals 1 (then it becomes a constexpr) or is a multiple of 16. :func:`recording` replaces the
kernels of :mod:`graphfeed.sampling._triton_kernels` with proxies that note the
:func:`spec` of every launch, interpreted or compiled, and still launch it.

A spec is JSON (a list): ``[kernel name, [arg, ...], {constexpr: value}]`` with each positional
argument as ``["tensor", dtype, aligned]``, ``["int", type]`` (not specialised on its value),
``["int", type, is_one, multiple_of_16]`` or ``["bool", value]``. ``triton_compile.py`` turns a
spec back into arguments with the same specialisation and compiles it through Triton's own
argument binder, so the variant compiled is the one a GPU run would compile.
"""

from __future__ import annotations

import contextlib
import json

KERNELS = ("count_kernel", "sample_kernel", "sample_all_kernel", "flag_kernel", "final_kernel")


def _int_type(v: int) -> str:
    if -(1 << 31) <= v < (1 << 31):
        return "i32"
    if -(1 << 63) <= v < (1 << 63):
        return "i64"
    return "u64"


def not_specialised(kernel) -> set:
    """The parameter names ``kernel`` keeps out of value specialisation (``do_not_specialize``),
    for a compiled ``JITFunction`` and for the interpreter's stand-in alike."""
    names = getattr(kernel, "do_not_specialize", None)
    if names is None:
        names = getattr(kernel, "kwargs", {}).get("do_not_specialize") or ()
    arg_names = list(getattr(kernel, "arg_names", ()))
    return {arg_names[n] if isinstance(n, int) else n for n in names}


def spec(kernel, args, constexprs) -> tuple:
    """The hashable specialisation of one launch (see the module docstring)."""
    import torch

    names = list(kernel.arg_names)
    fixed = not_specialised(kernel)
    out = []
    for name, a in zip(names, args):
        if isinstance(a, torch.Tensor):
            out.append(("tensor", str(a.dtype).removeprefix("torch."), a.data_ptr() % 16 == 0))
        elif isinstance(a, bool):
            out.append(("bool", a))
        elif isinstance(a, int):
            if name in fixed:
                out.append(("int", _int_type(a)))
            else:
                out.append(("int", _int_type(a), a == 1, a % 16 == 0))
        else:
            raise AssertionError(f"{kernel.__name__}: argument {name} of type {type(a).__name__}")
    return (kernel.__name__, tuple(out), tuple(sorted(constexprs.items())))


def to_json(specs) -> str:
    rows = [json.dumps([k, [list(a) for a in args], dict(c)], sort_keys=True)
            for k, args, c in specs]
    return "[" + ",\n".join(sorted(rows)) + "]"


class _Proxy:
    def __init__(self, kernel, log: set):
        self._kernel, self._log = kernel, log

    def __getitem__(self, grid):
        launch = self._kernel[grid]

        def run(*args, **constexprs):
            self._log.add(spec(self._kernel, args, constexprs))
            return launch(*args, **constexprs)

        return run

    def __getattr__(self, name):
        return getattr(self._kernel, name)


@contextlib.contextmanager
def recording(log: set, module=None, names=KERNELS):
    """Within the block, every launch of the sampler's kernels (or of ``names`` in ``module``)
    adds its spec to ``log``."""
    if module is None:
        from graphfeed.sampling import _triton_kernels as module
    K = module
    saved = {name: getattr(K, name) for name in names}
    try:
        for name, kernel in saved.items():
            setattr(K, name, _Proxy(kernel, log))
        yield log
    finally:
        for name, kernel in saved.items():
            setattr(K, name, kernel)
