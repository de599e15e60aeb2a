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
the driver (:func:`graphfeed._cuda.driver_initialized`, which itself initialises nothing).

Some third-party imports initialise the driver whatever that variable says. On a machine with a
CUDA driver each import is therefore first tried in a forked child (this server is still
single-threaded and CUDA-free, so that fork is safe); a module whose import leaves the child's
driver initialised is not imported here (``SKIPPED_FOR_CUDA`` names it) and the ranks import it
themselves, after the fork. Where there is no driver nothing is probed. As a last guard, if the
driver is found initialised here anyway, ``CUDA_TAINTED_BY`` names the import after which it
was and the remaining imports are skipped; ranks forked from this server then refuse CUDA with
that name in the message (:func:`graphfeed.cuda_alloc.start_cuda`,
:func:`graphfeed.distributed.world.check_gpus_for_ranks`).
"""

import gc
import importlib
import os

os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"

import sys  # noqa: E402

from graphfeed import _cuda  # noqa: E402 - after the variable above; imports no torch

#: probe imports only where a CUDA driver can be loaded (on a CPU-only machine none can start it)
_probe = _cuda._driver() is not None

#: The import after which the CUDA driver was found initialised in the fork server, if any.
CUDA_TAINTED_BY = None
#: Modules not preloaded because importing them initialised the CUDA driver in a probe.
SKIPPED_FOR_CUDA: list = []
#: packages imported without a probe: their imports never start the driver (torch asks NVML,
#: see above; graphfeed's listed modules import nothing else, which a test checks), and they are
#: most of the preload's import time, which a probe would double
_CORE = frozenset({"numpy", "torch", "numba", "graphfeed"})
#: exit codes of the probe child
_CLEAN, _STARTS_CUDA, _FAILS = 0, 3, 4


def _starts_cuda(name: str) -> bool:
    """Whether importing ``name`` initialises the CUDA driver, tried in a forked child (one that
    fails to import counts as clean: the import here then raises ImportError as usual)."""
    pid = os.fork()
    if pid == 0:  # the child: import, report, and leave without running any exit handler
        code = _FAILS
        try:
            importlib.import_module(name)
            code = _STARTS_CUDA if _cuda.driver_initialized() else _CLEAN
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == _STARTS_CUDA


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
    "graphfeed.datasets.format",
    "graphfeed.datasets.synthetic",
    "graphfeed.placement.apply",
    "graphfeed.placement.plan",
    "graphfeed.features.registry",
    "graphfeed.distributed.sharing",
    # the caller's modules (launch(preload=...)), e.g. the training application
    *filter(None, os.environ.get("GRAPHFEED_PRELOAD", "").split(",")),
):
    if _name in sys.modules or _name.split(".")[0] in _CORE:
        pass
    elif _probe and _starts_cuda(_name):
        SKIPPED_FOR_CUDA.append(_name)
        continue
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
