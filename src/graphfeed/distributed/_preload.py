"""Imported once by the fork server that ``launch`` starts its ranks from.

Ranks forked from a server that already imported torch, PyG, numba and graphfeed's kernels share
those pages copy-on-write instead of each holding a private ~250 MB copy. ``gc.freeze()`` moves
every object created so far out of the cyclic collector's reach, so collections in the ranks do
not write to (and so un-share) them. The server starts no threads and never touches CUDA: ranks
initialise CUDA themselves after the fork, which is safe (unlike forking a CUDA-using process).
"""

import gc
import importlib

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
    "graphfeed.loader.nodes",
    "graphfeed.features.registry",
    "graphfeed.distributed.sharing",
):
    try:
        importlib.import_module(_name)
    except ImportError:
        pass


# No kernel is run here: the first numba call starts an LLVM thread, and a fork server must
# stay single-threaded (OpenBLAS's idle pool, started by numpy, is fork-aware).
gc.collect()
gc.freeze()
