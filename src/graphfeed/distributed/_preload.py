"""Imported once by the fork server that ``launch`` starts its ranks from.

Ranks forked from a server that already imported torch, PyG, numba and graphfeed's kernels share
those pages copy-on-write instead of each holding a private ~250 MB copy. ``gc.freeze()`` moves
every object created so far out of the cyclic collector's reach, so collections in the ranks do
not write to (and so un-share) them. The server starts no threads and never touches CUDA: ranks
initialise CUDA themselves after the fork, which is safe (unlike forking a CUDA-using process).

The server never initialises the CUDA driver: a driver initialised before ``fork`` is unusable in
the children ("CUDA error: initialization error" at the rank's first CUDA call). Third-party
imports that ask ``torch.cuda.is_available()`` are made to ask NVML instead
(``PYTORCH_NVML_BASED_CUDA_CHECK=1``, this process only), and after each import the server checks
the driver (:func:`graphfeed._cuda.driver_initialized`, which itself initialises nothing). If an
import initialised it anyway, ``CUDA_TAINTED_BY`` names that import and the remaining imports are
skipped; ranks forked from this server refuse CUDA with that name in the message
(:func:`graphfeed.distributed.world.init`).
"""

import gc
import importlib
import os

os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"

from graphfeed import _cuda  # noqa: E402 - after the variable above; imports no torch

#: The import after which the CUDA driver was found initialised in the fork server, if any.
CUDA_TAINTED_BY = None

for _name in (
    "numpy",
    "torch",
    "torch.distributed",
    "torch.nn.parallel",
    "numba",
    "torch_geometric.nn",  # optional extra
    "graphfeed.sampling.neighbor",
    "graphfeed.loader.dataloader",
    "graphfeed.features.disk",
    "numba.np.arrayobj",
    "numba.typed",
    "graphfeed.training",
    "graphfeed.models",
    "graphfeed.datasets.format",
    "graphfeed.datasets.synthetic",
    "graphfeed.placement.apply",
    "graphfeed.placement.plan",
    "graphfeed.features.registry",
    "graphfeed.distributed.sharing",
):
    try:
        importlib.import_module(_name)
    except ImportError:
        pass
    if _cuda.driver_initialized():
        CUDA_TAINTED_BY = _name
        break


# No kernel is run here: the first numba call starts an LLVM thread, and a fork server must
# stay single-threaded (OpenBLAS's idle pool, started by numpy, is fork-aware).
gc.collect()
gc.freeze()
