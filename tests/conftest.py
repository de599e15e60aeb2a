"""Shared fixtures. Built-in datasets are generated once per test session into a temp folder
(GRAPHFEED_HOME), so tests never touch the user's cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from load_scale import ENV as SLOWNESS_ENV
from load_scale import current_factor
from shared_paths import shared_datasets_dir

REPO = Path(__file__).resolve().parents[1]

# Without a GPU the Triton kernels run in Triton's CPU interpreter. Triton decides when it is
# imported (and PyG imports it), so this is set before any test module loads.
if "TRITON_INTERPRET" not in os.environ:
    from graphfeed import _cuda

    if not _cuda.cuda_available():
        os.environ["TRITON_INTERPRET"] = "1"


@pytest.fixture(scope="session", autouse=True)
def _graphfeed_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("graphfeed_home")
    old = os.environ.get("GRAPHFEED_HOME")
    os.environ["GRAPHFEED_HOME"] = str(home)
    yield home
    if old is None:
        os.environ.pop("GRAPHFEED_HOME", None)
    else:
        os.environ["GRAPHFEED_HOME"] = old


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    d = shared_datasets_dir()
    if not d.is_dir():
        pytest.skip(f"real datasets folder {d} is absent")
    return d


@pytest.fixture(scope="session")
def tiny_dataset(_graphfeed_home):
    from graphfeed.datasets.synthetic import load_builtin

    return load_builtin("tiny")


@pytest.fixture(scope="session")
def builtin_root(tmp_path_factory):
    """``builtin_root(name)``: a data root holding built-in dataset ``name``, generated once per
    session (pass it as ``data_root``)."""
    from graphfeed.datasets.synthetic import load_builtin

    roots: dict = {}

    def get(name: str) -> str:
        if name not in roots:
            root = tmp_path_factory.mktemp(f"builtin-{name}")
            load_builtin(name, root)
            roots[name] = str(root)
        return roots[name]

    return get


@pytest.fixture(scope="session")
def cora_link(shared_datasets, tmp_path_factory) -> Path:
    """Cora (undirected) with a seeded 85/5/10 edge split, prepared once per session."""
    from graphfeed.datasets.format import Dataset
    from graphfeed.datasets.importers.link import split_dataset
    from graphfeed.datasets.importers.shared import prepare_cora_text

    cora_text = shared_datasets / "cora" / "text"
    if not cora_text.is_dir():
        pytest.skip(f"{cora_text} is absent")
    root = tmp_path_factory.mktemp("cora-link")
    prepare_cora_text(cora_text, root / "cora", undirected=True)
    return Path(split_dataset(Dataset.open(root / "cora"), root / "cora-link", seed=0))


@pytest.fixture
def no_gpu(monkeypatch):
    """Simulate a machine without a GPU, also on one that has one: every graphfeed question
    "is there a GPU?" goes through ``graphfeed._cuda.device_count``, and child processes (CLI
    runs in a subprocess) see no device either (``CUDA_VISIBLE_DEVICES`` empty)."""
    from graphfeed import _cuda

    monkeypatch.setattr(_cuda, "device_count", lambda: 0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture
def cpu_only(no_gpu):
    """For test folders whose behaviour checks (bit-identical runs, accuracy floors, fuzzing)
    must not depend on the machine: the same CPU run everywhere. GPU training is checked by
    the ``cuda`` tests and ``benchmarks/gpu_check.sh``."""


def _slow_ids() -> set:
    """The node ids of ``tests/slow_tests.txt`` (measured; ``make test-quick`` leaves them out)."""
    path = Path(__file__).with_name("slow_tests.txt")
    return {line.strip() for line in path.read_text().splitlines()
            if line.strip() and not line.startswith("#")}


def pytest_collection_modifyitems(config, items):
    """Tests listed in ``slow_tests.txt`` are marked ``slow``. Tests marked ``cuda`` run only
    where a CUDA device is visible. Asked through NVML (graphfeed._cuda), so collecting the
    tests does not initialise CUDA in this process."""
    slow = _slow_ids()
    for it in items:
        if it.nodeid in slow:
            it.add_marker(pytest.mark.slow)
    cuda_items = [it for it in items if it.get_closest_marker("cuda")]
    if not cuda_items:
        return
    from graphfeed import _cuda

    if _cuda.cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for it in cuda_items:
        it.add_marker(skip)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_set_timer(item, settings):
    """Every pytest-timeout limit (the ini's 300 s, a ``timeout`` marker) times how much slower
    the machine runs than a quiet one when the test starts (``tests/load_scale.py``): the
    limits are a quiet machine's, and a test beside other work is not a hung one. The factor
    is exported for the test's inner deadlines and its child processes. Where
    pytest-timeout is missing this hook is never called."""
    import pytest_timeout

    f = current_factor()
    os.environ[SLOWNESS_ENV] = f"{f:.3f}"
    item.user_properties.append(("time_limit_factor", round(f, 3)))
    return pytest_timeout.pytest_timeout_set_timer(
        item=item, settings=settings._replace(timeout=settings.timeout * f))
