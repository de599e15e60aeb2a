"""``python slow_prepare.py SECONDS graphfeed-args...``: run graphfeed's CLI with pass 2 of the
CSC build slowed down by SECONDS per edge chunk, so a test can kill ``prepare`` while it writes.

The delay is patched in here, around the kernel that places one chunk of edges, so the product
code carries no test hook. Prints ``started`` once the patch is in place.
"""

from __future__ import annotations

import sys
import time

from graphfeed.cli.main import main
from graphfeed.graph import _kernels


def _slowed(kernel, seconds: float):
    def place_chunk(*args):
        time.sleep(seconds)
        return kernel(*args)

    return place_chunk


if __name__ == "__main__":
    delay = float(sys.argv[1])
    if delay:
        _kernels.scatter_window = _slowed(_kernels.scatter_window, delay)
    print("started", flush=True)
    sys.exit(main(sys.argv[2:]))
