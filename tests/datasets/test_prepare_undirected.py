"""Issue 29 (9): ``prepare --undirected`` of an input that already holds both directions (the
README's own Cora recipe) doubled every edge. A reverse the input holds already is not added
again: a symmetric input is stored as given, each directed edge once, and the summary says so
in one line."""

from __future__ import annotations

import numpy as np
import pytest

from graphfeed.datasets.format import Dataset
from graphfeed.datasets.importers import prepare
from graphfeed.datasets._readers import EdgeSource

from ds_helpers import run_cli
from shared_paths import shared_datasets_dir

CORA_TEXT = shared_datasets_dir() / "cora" / "text"


def _pairs(ds):
    indptr = np.asarray(ds.graph.indptr)
    dst = np.repeat(np.arange(ds.num_nodes), np.diff(indptr))
    return sorted(zip(np.asarray(ds.graph.indices).tolist(), dst.tolist()))


def _prep(tmp_path, name, src, dst, n=6, **kw):
    ef = tmp_path / f"{name}.csv"
    ef.write_text("".join(f"{s},{d}\n" for s, d in zip(src, dst)))
    rep = prepare(tmp_path / name, edges=EdgeSource(ef), labels=np.arange(n) % 2,
                  splits={"train": np.arange(3)}, **kw)
    return rep, Dataset.open(tmp_path / name)


def test_symmetric_input_is_stored_once(tmp_path):
    src, dst = [0, 1, 1, 2, 3, 3], [1, 0, 2, 1, 3, 4]  # 0-1 and 1-2 both ways, a self loop, 3->4 one way
    rep, ds = _prep(tmp_path, "a", src, dst, undirected=True, memory_budget=16)  # several windows
    assert _pairs(ds) == sorted([(0, 1), (1, 0), (1, 2), (2, 1), (3, 3), (3, 4), (4, 3)])
    assert rep.reverses_present == 4 and "4 input edges already had their reverse" in rep.summary()
    assert ds.metadata.graph.undirected
    # fully symmetric: stored as given; repeated input edges are kept (no --dedupe) ...
    src, dst = [0, 1, 1, 2, 0], [1, 0, 2, 1, 1]
    rep, ds = _prep(tmp_path, "b", src, dst, undirected=True)
    assert _pairs(ds) == sorted(zip(src, dst))
    assert "already holds both directions" in rep.summary()
    # ... and dropped with it
    rep, ds = _prep(tmp_path, "c", src, dst, undirected=True, dedupe=True)
    assert _pairs(ds) == sorted([(0, 1), (1, 0), (1, 2), (2, 1)])
    # a one-way input still gets every reverse; nothing to say
    rep, ds = _prep(tmp_path, "d", [0, 1], [1, 2], undirected=True)
    assert _pairs(ds) == sorted([(0, 1), (1, 0), (1, 2), (2, 1)])
    assert rep.reverses_present == 0 and "--undirected" not in rep.summary()


@pytest.mark.skipif(not CORA_TEXT.is_dir(), reason="shared Cora files not present")
def test_readme_cora_recipe_stores_each_edge_once(tmp_path, capsys):
    rc, out, err = run_cli(["prepare", "cora-text", CORA_TEXT, tmp_path / "cora", "--undirected",
                            "--no-progress"], capsys)
    assert rc == 0, err
    ds = Dataset.open(tmp_path / "cora")
    assert ds.num_edges == 10556 and ds.metadata.graph.undirected
    assert len(set(_pairs(ds))) == 10556
    lines = [ln for ln in out.splitlines() if ln.startswith("--undirected")]
    assert len(lines) == 1 and "already holds both directions" in lines[0]
