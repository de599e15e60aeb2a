"""Progress bars: ``tqdm`` (``tqdm.auto``: a widget in notebooks, a bar in terminals), on stderr,
shown only when stderr is a terminal so logs and ``--json`` output stay clean."""

from __future__ import annotations

import sys


def bar(total: int, desc: str, *, enabled: bool = True, unit: str = "batch"):
    """A context-managed ``tqdm`` bar; ``enabled=False`` (or stderr not a terminal) disables it."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False,
                dynamic_ncols=True, disable=None if enabled else True)
