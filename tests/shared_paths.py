"""Where the real datasets live for the tests: ``$GRAPHFEED_SHARED_DATASETS``, else
``../shared/datasets`` beside the repository (absent on some machines: tests that need them
skip). One definition for ``conftest.py`` and for tests whose skip markers are evaluated at
import, before fixtures exist."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def shared_datasets_dir() -> Path:
    env = os.environ.get("GRAPHFEED_SHARED_DATASETS")
    return Path(env) if env else (REPO / ".." / "shared" / "datasets").resolve()
