"""The persistent cache of sampler tables (graphfeed.distributed.tables.TableCache): a second run
maps what the first stored instead of building, a changed input, seed or method is never served
stale tables, and a store is all or nothing."""

import json
import warnings

import numpy as np
import pytest

import _table_ranks as ranks
from graphfeed.distributed.shm import in_shared_file_mapping
from graphfeed.distributed.tables import TableCache, share_prepared
from graphfeed.distributed.world import World
from graphfeed.errors import GraphfeedError, GraphfeedWarning


@pytest.fixture(scope="module")
def graph():
    return ranks.make_graph(3000, 30000)


def _no_build(sampler):
    def boom():
        raise AssertionError("built again")

    sampler._build_tables = boom
    return sampler


def _entries(folder):
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("kind", ranks.METHODS)
def test_a_second_run_maps_the_stored_tables_instead_of_building(kind, graph, tmp_path):
    want = ranks.digest(ranks.make_sampler(kind, graph))
    first = ranks.make_sampler(kind, graph)
    assert share_prepared(first, World(), cache_dir=tmp_path) == "cached"
    assert ranks.digest(first) == want
    (stored,) = _entries(tmp_path)
    assert stored.startswith("tables-")
    second = _no_build(ranks.make_sampler(kind, graph))
    assert share_prepared(second, World(), cache_dir=tmp_path) == "cached"
    assert ranks.digest(second) == want
    inputs = [id(a) for a in second._table_inputs().values()]
    for a in second.prepare().values():  # mapped from the cache's files, read-only
        if isinstance(a, np.ndarray) and a.ndim and a.size and id(a) not in inputs:
            assert in_shared_file_mapping(a) and not a.flags.writeable
    assert _entries(tmp_path) == [stored]


def test_other_inputs_seed_or_method_get_other_tables(graph, tmp_path):
    from graphfeed.sampling import SamplingMethod
    from graphfeed.sampling.neighbor import NeighborSampler

    share_prepared(ranks.make_sampler("weighted", graph), World(), cache_dir=tmp_path)
    # one weight changed: another key, so the stored tables are not used (the build runs)
    w = np.random.default_rng(123).random(graph.num_edges)
    w[17] += 1.0
    changed = NeighborSampler(graph, [5, 3], seed=7, return_edge_ids=True,
                              method=SamplingMethod("weighted").bind({"weights": w}))
    with pytest.raises(AssertionError, match="built again"):
        share_prepared(_no_build(changed), World(), cache_dir=tmp_path)
    assert len(_entries(tmp_path)) == 1
    for other in (ranks.make_sampler("weighted", graph, seed=8), ranks.make_sampler("labor", graph)):
        share_prepared(other, World(), cache_dir=tmp_path)
    assert len(_entries(tmp_path)) == 3
    # fanouts are not part of the tables: same key
    share_prepared(_no_build(ranks.make_sampler("labor", graph, fanouts=(9, 9))), World(),
                   cache_dir=tmp_path)
    assert len(_entries(tmp_path)) == 3


def test_store_is_all_or_nothing(graph, tmp_path):
    cache = TableCache(tmp_path)
    s = ranks.make_sampler("labor", graph)
    tables = dict(s.prepare())
    inputs = s._table_inputs()
    fp = {"format": 1, "method": "m", "seed": 0, "num_nodes": 1, "num_edges": 2}
    # a crash mid-write leaves a .tmp- folder, which is never read
    (tmp_path / ".tmp-tables-abc-1").mkdir()
    assert cache.load("abc", inputs, fp) is None
    # a write that fails after some files are written: nothing appears under the key
    with pytest.raises(ValueError, match="allow_pickle"):
        cache.store("abc", {**tables, "zbad": np.array([object()])}, inputs, fp)
    assert not cache.path("abc").exists()
    assert _entries(tmp_path) == [".tmp-tables-abc-1"]
    # a writer that finishes second keeps the first one's copy
    cache.store("abc", tables, inputs, fp)
    (tmp_path / "tables-abc" / "marker").write_text("first")
    cache.store("abc", tables, inputs, fp)
    assert (tmp_path / "tables-abc" / "marker").read_text() == "first"
    got = cache.load("abc", inputs, fp)
    assert all(np.array_equal(got[k], tables[k]) for k in tables)
    # a manifest for another fingerprint is refused, a damaged folder named
    with pytest.raises(GraphfeedError, match="another sampler"):
        cache.load("abc", inputs, {**fp, "seed": 1})
    (tmp_path / "tables-abc" / "lsrc.npy").unlink()
    with pytest.raises(GraphfeedError, match=r"tables-abc: damaged \(.*lsrc.npy: .npy file not found"):
        cache.load("abc", inputs, fp)


def test_a_file_is_not_a_cache_folder(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(GraphfeedError, match="not a folder"):
        TableCache(tmp_path / "f")


def test_train_with_table_cache_builds_once(tmp_path, monkeypatch, builtin_root):
    """graphfeed train --table-cache DIR: the first run stores the tables, the next maps them."""
    from graphfeed.cli.main import build_parser
    from graphfeed.cli.train import config_from_args
    from graphfeed.sampling.neighbor import NeighborSampler
    from graphfeed.training import train

    folder = tmp_path / "tables"
    args = build_parser().parse_args(
        ["train", "--dataset", "tiny", "--data-root", str(builtin_root("tiny")), "--epochs", "1",
         "--sampler", "labor", "--fanouts", "5,5", "--hidden", "16", "--no-mlp",
         "--no-progress", "--threads", "1", "--device", "cpu", "--table-cache", str(folder)])
    cfg = config_from_args(args)
    assert cfg.table_cache == str(folder)
    first = train(cfg)
    (stored,) = [p.name for p in folder.iterdir()]
    built = []
    real = NeighborSampler._build_tables

    def counting(self):
        built.append(self.method.kind)
        return real(self)

    monkeypatch.setattr(NeighborSampler, "_build_tables", counting)
    second = train(cfg)
    assert built == [] and [p.name for p in folder.iterdir()] == [stored]
    assert second.epochs[0].loss == pytest.approx(first.epochs[0].loss)


def test_scalars_come_back_with_their_type(tmp_path):
    from graphfeed.distributed.tables import _decode, _encode

    tables = {"flag": True, "count": 3, "ratio": 0.5, "key": np.uint64(2**63 + 5),
              "arr": np.arange(4, dtype=np.int32)}
    fp = {"format": 1}
    got = _decode(_encode(tables, {}, fp), {}, fp)
    for k, v in tables.items():
        assert type(got[k]) is type(v), k
    assert got["flag"] is True and got["key"] == np.uint64(2**63 + 5)
    assert got["arr"].tolist() == [0, 1, 2, 3]
    cache = TableCache(tmp_path)  # through files as well
    cache.store("k", tables, {}, fp)
    got = cache.load("k", {}, fp)
    assert all(type(got[k]) is type(v) for k, v in tables.items())


def _damage(folder, how):
    """Rewrite every table array file of ``folder`` (as a user editing the cache would, with
    np.save): ``huge`` values, or ``half`` of their rows."""
    for f in sorted(folder.glob("*.npy")):
        if f.name == "__manifest__.npy":
            continue
        a = np.load(f)
        if a.ndim != 1:
            continue
        if how == "huge":
            big = np.iinfo(a.dtype).max if a.dtype.kind in "iu" else 1e300
            a = np.full_like(a, big)
        else:
            a = a[: len(a) // 2]
        np.save(f, a)


@pytest.mark.parametrize("how", ["huge", "half"])
@pytest.mark.parametrize("kind", ranks.METHODS)
def test_an_edited_entry_is_rebuilt_with_a_warning_never_used(kind, how, graph, tmp_path):
    """Issue 29: edited table files used to reach the kernels unchecked (a segfault). Now the
    entry is checked when loaded: a bad one is a miss, named in a warning, removed and built
    again; the next run maps the rebuilt one."""
    want = ranks.digest(ranks.make_sampler(kind, graph))
    share_prepared(ranks.make_sampler(kind, graph), World(), cache_dir=tmp_path)
    (stored,) = _entries(tmp_path)
    _damage(tmp_path / stored, how)
    second = ranks.make_sampler(kind, graph)
    with pytest.warns(GraphfeedWarning, match=rf"{stored}: damaged \(table '.*'.*treated as a miss"):
        assert share_prepared(second, World(), cache_dir=tmp_path) == "cached"
    assert ranks.digest(second) == want
    assert _entries(tmp_path) == [stored]  # rebuilt under its key, nothing left aside
    third = _no_build(ranks.make_sampler(kind, graph))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        share_prepared(third, World(), cache_dir=tmp_path)
    assert ranks.digest(third) == want


def test_a_damaged_manifest_or_scalar_is_a_miss(graph, tmp_path):
    cache = TableCache(tmp_path)
    want = ranks.digest(ranks.make_sampler("weighted", graph))
    share_prepared(ranks.make_sampler("weighted", graph), World(), cache_dir=tmp_path)
    (stored,) = _entries(tmp_path)
    folder = tmp_path / stored
    manifest = folder / "__manifest__.npy"
    good = np.load(manifest)
    bad_entries = json.loads(good.tobytes())
    bad_entries["entries"]["table"] = ["input", 3]
    for bad in (np.frombuffer(b"not json", np.uint8), np.zeros(3, np.float64),
                np.frombuffer(json.dumps(bad_entries).encode(), np.uint8),
                np.frombuffer(json.dumps({"entries": {"../x": ["array"]}}).encode(), np.uint8)):
        np.save(manifest, bad)
        s = ranks.make_sampler("weighted", graph)
        with pytest.raises(GraphfeedError, match=rf"{stored}: damaged \(.*manifest"):
            cache.load(stored[len("tables-"):], s._table_inputs(), {}, check=s.check_tables)
    np.save(manifest, good)
    np.save(folder / "all_positive.npy", np.zeros(5, bool))  # a scalar that is not one
    s = ranks.make_sampler("weighted", graph)
    with pytest.warns(GraphfeedWarning, match=r"all_positive.npy: a scalar of shape \(5,\)"):
        share_prepared(s, World(), cache_dir=tmp_path)
    assert ranks.digest(s) == want


def test_train_rebuilds_an_edited_table_cache(tmp_path, builtin_root):
    """The issue's report: train --sampler labor --table-cache C, then edit C's files and train
    again: a warning and the same run, not a segfault."""
    from graphfeed.cli.main import build_parser
    from graphfeed.cli.train import config_from_args
    from graphfeed.training import train

    folder = tmp_path / "tables"
    args = build_parser().parse_args(
        ["train", "--dataset", "tiny", "--data-root", str(builtin_root("tiny")), "--epochs", "1",
         "--sampler", "labor", "--fanouts", "5,5", "--hidden", "16", "--no-mlp",
         "--no-progress", "--threads", "1", "--device", "cpu", "--table-cache", str(folder)])
    cfg = config_from_args(args)
    first = train(cfg)
    (stored,) = [p for p in folder.iterdir()]
    _damage(stored, "huge")
    with pytest.warns(GraphfeedWarning, match="damaged"):
        second = train(cfg)
    assert second.epochs[0].loss == pytest.approx(first.epochs[0].loss)
