"""Compile Triton kernel variants of the GPU sampler (and of the GPU cache's gather) for an
sm_90 target, without a GPU.

    python tests/sampling/triton_compile.py SPECS.json

``SPECS.json`` holds the specs that ``triton_specs.recording`` noted during real sampler runs
(``test_triton_compile.py`` records them under the interpreter and runs this script). Each spec
is turned back into arguments with the same specialisation (tensor dtypes and alignment, integer
types and values) and bound by Triton's own argument binder, as ``JITFunction.run`` binds the
arguments of a launch, then compiled to a cubin for sm_90 with Triton's bundled ``ptxas``: the
variant a GPU run would compile. Graphs past 2**31 nodes pass ``num_nodes`` as int64: each spec
with an int32 ``num_nodes`` is compiled that way too.

Runs without ``TRITON_INTERPRET``: the interpreter runs Python, so it accepts code the compiler
refuses (a function missing from an older ``triton.language``, a non-constexpr global, a
signed/unsigned mix). Prints one line per compiled variant and a final JSON line
``{"triton": version, "compiled": N}``. Exit status 0: all compiled; 1: one failed (named);
77: this triton has no CUDA backend to compile with.
"""

from __future__ import annotations

import json
import sys

TARGET = ("cuda", 90, 32)


def _arguments(kernel, args):
    """Arguments with the recorded specialisation: small CPU tensors of the dtype (offset by one
    element where the recorded address was not 16-byte aligned; CPU allocations are), and
    integers of the recorded type and value class."""
    import torch

    out = []
    for a in args:
        kind = a[0]
        if kind == "tensor":
            t = torch.zeros(64, dtype=getattr(torch, a[1]))
            out.append(t if a[2] else t[1:])
        elif kind == "bool":
            out.append(bool(a[1]))
        elif kind == "int":
            base = {"i32": 0, "i64": 1 << 32, "u64": 1 << 63}[a[1]]
            if len(a) == 2:
                out.append(base + 17)
            else:
                out.append(1 if a[2] else base + (16 if a[3] else 17))
        else:
            raise ValueError(f"unknown argument kind {kind!r}")
    return out


def _widened(specs, names_of):
    """Each spec again with ``num_nodes`` as int64 (graphs past 2**31 nodes)."""
    out = []
    for name, args, consts in specs:
        out.append((name, args, consts))
        names = names_of(name)
        if "num_nodes" in names:
            i = names.index("num_nodes")
            if args[i][:2] == ["int", "i32"]:
                wide = [list(x) for x in args]
                wide[i] = ["int", "i64"] + wide[i][2:]
                out.append((name, wide, consts))
    return out


def main(argv) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    import triton
    from triton.backends.compiler import GPUTarget

    try:
        from triton.backends.nvidia.compiler import CUDABackend  # noqa: F401
    except ImportError:
        return 77
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    from graphfeed.features import _gpu_cache_kernels as C
    from graphfeed.sampling import _triton_kernels as K

    assert not K.INTERPRETED and not C.INTERPRETED, "run without TRITON_INTERPRET"
    with open(argv[0]) as f:
        specs = [tuple(s) for s in json.load(f)]
    target = GPUTarget(*TARGET)
    backend = make_backend(target)
    # a kernel of the sampler's module, or the GPU cache's
    kernels = {name: getattr(K, name, None) or getattr(C, name) for name in {s[0] for s in specs}}
    binders = {name: create_function_from_signature(k.signature, k.params, backend)
               for name, k in kernels.items()}
    seen = set()
    compiled = 0
    for name, args, consts in _widened(specs, lambda n: list(kernels[n].arg_names)):
        kernel = kernels[name]
        bound, specialization, options = binders[name](*_arguments(kernel, args), **consts)
        key = (name, repr(specialization), repr(sorted(consts.items())))
        if key in seen:
            continue
        seen.add(key)
        options, signature, constexprs, attrs = kernel._pack_args(
            backend, dict(consts), bound, specialization, options)
        label = f"{name} {json.dumps(args)} {json.dumps(consts, sort_keys=True)}"
        try:
            triton.compile(ASTSource(kernel, signature, constexprs, attrs), target=target,
                           options=options.__dict__)
        except Exception as e:  # noqa: BLE001 - name the variant, then fail
            print(f"FAILED {label}\n{type(e).__name__}: {e}", flush=True)
            return 1
        compiled += 1
        print(f"compiled {label}", flush=True)
    print(json.dumps({"triton": triton.__version__, "compiled": compiled}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
