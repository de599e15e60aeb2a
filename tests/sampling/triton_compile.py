"""Compile every Triton kernel of the GPU sampler for an sm_90 target, without a GPU.

Run by ``test_triton_sampler.py::test_kernels_compile_for_a_gpu`` in a child process without
``TRITON_INTERPRET``: the interpreter runs Python, so it accepts code the compiler refuses (a
non-constexpr global, a signed/unsigned mix). Compiling to a cubin needs triton's bundled
``ptxas`` but no driver. Exit status 0: all compiled; 77: no CUDA backend to compile with.
"""

from __future__ import annotations

import sys


def main() -> int:
    import triton
    from triton.backends.compiler import GPUTarget

    try:
        from triton.backends.nvidia.compiler import CUDABackend  # noqa: F401
    except ImportError:
        return 77
    from graphfeed.sampling import _triton_kernels as K

    assert not K.INTERPRETED, "run without TRITON_INTERPRET"

    def source(fn, pointers, consts, indices="*i32"):
        sig = {}
        for name in fn.arg_names:
            if name in consts:
                sig[name] = "constexpr"
            elif name == "indices":
                sig[name] = indices
            else:
                sig[name] = "*i64" if name in pointers else "i32"
        return triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=consts)

    sample_ptrs = {"starts", "degs", "counts", "offsets", "rows", "eids", "eslot", "keys", "vals"}
    jobs = [
        source(K.count_kernel, {"dst", "indptr", "counts", "starts", "degs", "offsets", "keys",
                                "vals", "err"}, {"REPLACE": False, "INSERT": True, "BLOCK": 1024}),
        source(K.count_kernel, {"dst", "indptr", "counts", "starts", "degs", "offsets", "keys",
                                "vals", "err"}, {"REPLACE": True, "INSERT": False, "BLOCK": 1024}),
        source(K.sample_kernel, sample_ptrs,
               {"REPLACE": False, "WANT_EIDS": True, "KPAD": 16, "LANES": 64}),
        source(K.sample_kernel, sample_ptrs,
               {"REPLACE": True, "WANT_EIDS": False, "KPAD": 16, "LANES": 64}, indices="*i64"),
        source(K.sample_kernel, sample_ptrs,
               {"REPLACE": False, "WANT_EIDS": False, "KPAD": 1024, "LANES": 1}),
        source(K.sample_all_kernel, sample_ptrs, {"WANT_EIDS": True, "BLOCK": 1024}),
        source(K.flag_kernel, {"offsets", "eslot", "vals", "flags"}, {"BLOCK": 1024}),
        source(K.final_kernel, {"offsets", "dst", "rows", "eslot", "vals", "flags", "rank",
                                "src_nodes", "sizes"}, {"BLOCK": 1024}),
    ]
    for src in jobs:
        triton.compile(src, target=GPUTarget("cuda", 90, 32))
        print("compiled", src.name, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
