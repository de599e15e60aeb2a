"""``prepare graphbolt`` bounds what it reads before it formats or allocates it (issue 42): a
1 kB YAML alias bomb (or a merge-key bomb, a self-referring alias, deep nesting, a huge integer,
a huge file) is refused in one line within milliseconds of CPU, wherever it sits; node counts
are checked against memory before any per-node array exists; torch feature files in bfloat16
are imported as bfloat16, sparse and broadcast tensors densified when they fit, else refused."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest
import torch

yaml = pytest.importorskip("yaml")

from graphfeed.datasets.format import Dataset  # noqa: E402
from graphfeed.datasets.importers import graphbolt as gb  # noqa: E402
from graphfeed.datasets.importers.graphbolt import (prepare_graphbolt,  # noqa: E402
                                                    read_graphbolt_metadata)
from graphfeed.errors import DatasetError  # noqa: E402

from ds_helpers import assert_one_line_error, run_cli  # noqa: E402
from test_graphbolt_importer import N, homogeneous, typed  # noqa: E402


def bomb(levels: int, width: int = 9) -> str:
    """A flow-style YAML value of ``width ** levels`` strings in about ``30 * levels`` bytes."""
    s = '&a0 ["lol"' + ',"lol"' * (width - 1) + "]"
    for i in range(1, levels):
        s = f"&a{i} [{s}" + f", *a{i - 1}" * (width - 1) + "]"
    return s


GRAPH = "{nodes: [{num: 3}], edges: [{format: csv, path: e.csv}]}"
PLACES = {
    "dataset_name": lambda b: f"dataset_name: {b}\ngraph: {GRAPH}\n",
    "num": lambda b: f"graph: {{nodes: [{{num: {b}}}], edges: [{{format: csv, path: e.csv}}]}}\n",
    "path": lambda b: f"graph: {{nodes: [{{num: 3}}], edges: [{{format: csv, path: {b}}}]}}\n",
    "format": lambda b: f"graph: {{nodes: [{{num: 3}}], edges: [{{format: {b}, path: e.csv}}]}}\n",
    "whole": lambda b: b + "\n",
}


def write(root, text: str):
    root.mkdir(parents=True, exist_ok=True)
    (root / "e.csv").write_text("0,1\n1,2\n")
    (root / "metadata.yaml").write_text(text)
    return root


def refused_quickly(src, *fragments) -> str:
    """The metadata of ``src`` is refused with ``fragments`` in at most 1 s of this thread's CPU
    (CPU time, so a loaded machine does not fail it; before the bound it took minutes)."""
    t0 = time.thread_time()
    with pytest.raises(DatasetError) as e:
        read_graphbolt_metadata(src)
    assert time.thread_time() - t0 < 1.0
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 400, msg
    for f in fragments:
        assert f in msg, msg
    return msg


@pytest.mark.parametrize("place", sorted(PLACES))
def test_an_alias_bomb_is_refused_at_once_wherever_it_sits(tmp_path, place):
    # 9**8 = 43M items from 250 bytes: formatting or walking it took seconds and gigabytes
    src = write(tmp_path / "gb", PLACES[place](bomb(8)))
    assert (src / "metadata.yaml").stat().st_size < 1024
    refused_quickly(src, "metadata.yaml", f"more than {gb.MAX_YAML_VALUES} values", "alias")


def test_the_cli_refuses_a_1kb_bomb_in_one_line_under_a_memory_limit(tmp_path):
    src = write(tmp_path / "gb", PLACES["whole"](bomb(9)))
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30)); "
            "from graphfeed.cli.main import main; sys.exit(main(sys.argv[1:]))")
    r = subprocess.run([sys.executable, "-c", code, "prepare", "graphbolt", str(src),
                        str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "more than" in lines[0] and "alias" in lines[0], r.stderr[-2000:]
    assert not (tmp_path / "out").exists()


def test_a_merge_key_bomb_is_refused_before_it_is_flattened(tmp_path):
    # each level merges the previous mapping 9 times: PyYAML's flattening copies the key lists
    lines = ["m0: &m0 {" + ", ".join(f"k{i}: 1" for i in range(9)) + "}"]
    for i in range(1, 9):
        lines.append(f"m{i}: &m{i} {{<<: [" + ", ".join([f"*m{i - 1}"] * 9) + "]}")
    src = write(tmp_path / "gb", "dataset_name: {" + ", ".join(lines) + "}\ngraph: " + GRAPH
                + "\n")
    refused_quickly(src, f"more than {gb.MAX_YAML_VALUES} values")


@pytest.mark.parametrize("text,fragment", [
    ("dataset_name: &a [*a]\ngraph: " + GRAPH + "\n", "refers to a value that holds it"),
    ("dataset_name: " + "[" * 200 + "]" * 200 + "\ngraph: " + GRAPH + "\n", "nested deeper"),
    ("dataset_name: " + "[" * 5000 + "]" * 5000 + "\ngraph: " + GRAPH + "\n", "nested deeper"),
    ("dataset_name: " + "[" * 400000 + "\n", "nested deeper than 32 levels (line 1)"),
    ("dataset_name:\n" + "- " * 400000 + "x\n", "nested deeper than 32 levels (line 2)"),
    ("graph: {nodes: [{num: 0x" + "f" * 5000 + "}], edges: [{format: csv, path: e.csv}]}\n",
     "a value of 5002 characters"),
    ("graph: {nodes: [{num: 3}], edges: [{format: csv, path: " + "p" * 10000 + "}]}\n",
     "a value of 10000 characters"),
    ("graph: {nodes: [{num: " + "9" * 39 + "}], edges: [{format: csv, path: e.csv}]}\n",
     "num must be an integer >= 0 and < 2**63"),
    ("dataset_name: 2024-13-45\ngraph: " + GRAPH + "\n", "not valid YAML"),
])
def test_other_unbounded_yaml_is_one_line(tmp_path, text, fragment):
    refused_quickly(write(tmp_path / "gb", text), fragment)


def test_a_huge_metadata_file_is_not_read_whole(tmp_path):
    src = write(tmp_path / "gb", "# " + "x" * (gb.MAX_METADATA_BYTES + 10) + "\n")
    refused_quickly(src, "larger than 1 MiB")


@pytest.mark.parametrize("where,value", [
    (("dataset_name",), "BOMB"),
    (("tasks", 0, "name"), "BOMB"),
    (("tasks", 0, "train_set", 0, "type"), "BOMB"),
    (("feature_data", 0, "type"), "BOMB"),
    (("graph", "nodes", 0, "num"), "BOMB"),
])
def test_a_large_value_under_the_budget_is_described_not_printed(tmp_path, capsys, where,
                                                                 value):
    # 9**5 = 59049 items: under the budget, so the checks see it; the message says what it is
    src = tmp_path / "gb"
    made = homogeneous(src)
    meta = made["meta"]
    node = meta
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = "__BOMB__"
    text = yaml.safe_dump(meta, sort_keys=False).replace("__BOMB__", bomb(5))
    (src / "metadata.yaml").write_text(text)
    t0 = time.thread_time()
    rc, _, err = run_cli(["prepare", "graphbolt", src, tmp_path / "out", "--task", "0",
                          "--no-progress"], capsys)
    assert time.thread_time() - t0 < 5.0
    assert_one_line_error(rc, err, "a list of 9 items")
    assert len(err) < 400 and "lol" not in err


def test_node_counts_are_checked_against_memory_before_allocating(tmp_path, capsys):
    src = tmp_path / "gb"
    made = homogeneous(src)
    meta = made["meta"]
    for num, fragment in ((10 ** 15, "preparing 1,000,000,000,000,000 nodes"),
                          (2 ** 62, "per-node arrays"), (2 ** 63, "< 2**63")):
        meta["graph"]["nodes"][0]["num"] = num
        (src / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
        rc, _, err = run_cli(["prepare", "graphbolt", src, tmp_path / "out", "--task", "0",
                              "--no-progress"], capsys)
        assert_one_line_error(rc, err, "graph.nodes", fragment)
    typed_src = tmp_path / "typed"
    tmeta = typed(typed_src)["meta"]
    for n in tmeta["graph"]["nodes"]:
        n["num"] = 2 ** 62  # each fits int64, the sum does not
    (typed_src / "metadata.yaml").write_text(yaml.safe_dump(tmeta, sort_keys=False))
    with pytest.raises(DatasetError, match="graph.nodes: 9223372036854775808 nodes in all"):
        prepare_graphbolt(typed_src, tmp_path / "out", task=0)
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- torch files
def _set_torch(src, path_name: str, tensor):
    torch.save(tensor, src / path_name)


def test_a_bfloat16_feature_is_imported_as_bfloat16(tmp_path, capsys):
    src = tmp_path / "gb"
    made = homogeneous(src)
    x = torch.rand(N, 3).bfloat16()
    _set_torch(src, "node-feat-1.pt", x)
    # beside a float32 feature the one dtype of the streamed build must be chosen
    rc, _, err = run_cli(["prepare", "graphbolt", src, tmp_path / "mixed", "--task", "0",
                          "--no-progress"], capsys)
    assert_one_line_error(rc, err, "'feat_1' is bfloat16", "'feat_0'", "--feature-dtype")
    prepare_graphbolt(src, tmp_path / "both", task=0, feature_dtype="bfloat16")
    ds = Dataset.open(tmp_path / "both")
    assert ds.metadata.node_features["feat_1"].dtype == "bfloat16"
    assert torch.equal(ds.features["feat_1"].read(torch.arange(N)), x)
    # alone, it stays bfloat16 without being asked
    meta = made["meta"]
    del meta["feature_data"][0]
    (src / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    prepare_graphbolt(src, tmp_path / "alone", task="node_classification")
    ds = Dataset.open(tmp_path / "alone")
    assert ds.metadata.node_features["feat_1"].dtype == "bfloat16"
    assert torch.equal(ds.features["feat_1"].read(torch.arange(N)), x)
    # the link writer and the typed writers hold it as bfloat16 too
    del meta["feature_data"][1]  # the edge weights do not come with a link task
    (src / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    prepare_graphbolt(src, tmp_path / "link", task="link_prediction")
    assert torch.equal(Dataset.open(tmp_path / "link").features["feat_1"].read(torch.arange(N)),
                       x)
    t = tmp_path / "typed"
    typed(t)
    y = torch.rand(80, 6).bfloat16()
    _set_torch(t, "item-feat.pt", y)
    for task in (0, 1):
        prepare_graphbolt(t, tmp_path / f"typed{task}", task=task)
        ds = Dataset.open(tmp_path / f"typed{task}")
        assert torch.equal(ds.type_features["item"]["feat"].read(torch.arange(80)), y)


def test_bfloat16_edge_weights_widen_exactly_and_ids_refuse_it(tmp_path):
    src = tmp_path / "gb"
    made = homogeneous(src)
    w = torch.rand(1500).bfloat16() + 0.5
    _set_torch(src, "w.pt", w)
    meta = made["meta"]
    meta["feature_data"][2] = {"domain": "edge", "name": "weight", "format": "torch",
                               "path": "w.pt"}
    (src / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    prepare_graphbolt(src, tmp_path / "out", task=0)
    e = made["edges"]
    order = np.argsort(e[:, 1], kind="stable")
    assert np.array_equal(Dataset.open(tmp_path / "out").graph.weights,
                          w.float().numpy()[order])
    _set_torch(src, "seeds.pt", torch.arange(100).bfloat16())
    meta["tasks"][0]["train_set"][0]["data"][0] = {"name": "seeds", "format": "torch",
                                                   "path": "seeds.pt"}
    (src / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    with pytest.raises(DatasetError, match=r"seeds.pt: a bfloat16 tensor; only features"):
        prepare_graphbolt(src, tmp_path / "out2", task=0)


@pytest.mark.parametrize("make", [
    lambda z: z.to_sparse(),
    lambda z: z.to_sparse_csr(),
    lambda z: z[:1].expand(N, 3),
], ids=["coo", "csr", "expanded"])
def test_sparse_and_broadcast_tensors_are_densified(tmp_path, make):
    src = tmp_path / "gb"
    homogeneous(src)
    z = torch.rand(N, 3)
    z[z < 0.5] = 0
    t = make(z)
    _set_torch(src, "node-feat-1.pt", t)
    prepare_graphbolt(src, tmp_path / "out", task=0)
    got = Dataset.open(tmp_path / "out").features["feat_1"].read(torch.arange(N))
    assert torch.equal(got, t.to_dense() if t.layout != torch.strided else t.contiguous())


@pytest.mark.parametrize("make,fragment", [
    (lambda: torch.sparse_coo_tensor(torch.tensor([[0], [0]]), torch.tensor([1.0]),
                                     (10 ** 8, 10 ** 6)), "a sparse (sparse_coo) tensor"),
    (lambda: torch.zeros(1, 1).expand(10 ** 10, 3000), "a broadcast (expanded) tensor"),
])
def test_a_tensor_too_large_once_dense_is_refused_naming_the_file(tmp_path, capsys, make,
                                                                  fragment):
    src = tmp_path / "gb"
    homogeneous(src)
    _set_torch(src, "node-feat-1.pt", make())
    rc, _, err = run_cli(["prepare", "graphbolt", src, tmp_path / "out", "--task", "0",
                          "--no-progress"], capsys)
    assert_one_line_error(rc, err, "node-feat-1.pt", fragment, "made dense would need",
                          "save it dense in numpy format")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fmt", ["coo", "csr"])
def test_a_sparse_tensor_with_indices_outside_its_shape_is_refused(tmp_path, capsys, fmt):
    # unchecked, densifying it segfaulted (csr) or dropped a value silently (coo)
    src = tmp_path / "gb"
    homogeneous(src)
    if fmt == "coo":
        t = torch.sparse_coo_tensor(torch.tensor([[0, 10 ** 6], [0, 1]]), torch.tensor([1., 2.]),
                                    (N, 3), check_invariants=False)
    else:
        t = torch.sparse_csr_tensor(torch.tensor([0, 2] + [2] * (N - 1)),
                                    torch.tensor([0, 10 ** 6]), torch.tensor([1., 2.]), (N, 3),
                                    check_invariants=False)
    _set_torch(src, "node-feat-1.pt", t)
    rc, _, err = run_cli(["prepare", "graphbolt", src, tmp_path / "out", "--task", "0",
                          "--no-progress"], capsys)
    assert_one_line_error(rc, err, "node-feat-1.pt", "not a tensor file")


@pytest.mark.parametrize("which", ["train", "validation"])
def test_2d_node_seeds_are_refused_as_what_they_are(tmp_path, capsys, which):
    # a node classification set with (50, 2) seeds was taken for link prediction and refused
    # as "link labels must be one 0 or 1 per pair"
    src = tmp_path / "gb"
    meta = homogeneous(src)["meta"]
    del meta["feature_data"][2]  # edge features do not come with the link task below
    (src / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    np.save(src / f"nc-{which}-seeds.npy", np.arange(100).reshape(50, 2))
    np.save(src / f"nc-{which}-labels.npy", np.arange(50) % 10)
    rc, _, err = run_cli(["prepare", "graphbolt", src, tmp_path / "out", "--task", "0",
                          "--no-progress"], capsys)
    assert_one_line_error(rc, err, f"tasks[0].{which}_set[0]",
                          "seeds must be 1-D node ids, got shape (50, 2)")
    # pairs with 0/1 labels in every set stay a link prediction task
    rc, _, err = run_cli(["prepare", "graphbolt", src, tmp_path / "link", "--task", "1",
                          "--no-progress"], capsys)
    assert rc == 0, err


@pytest.mark.parametrize("flag", [["--feature-dtype", "float16"], ["--drop-self-loops"]])
def test_options_a_typed_graph_cannot_honour_are_refused(tmp_path, capsys, flag):
    # --feature-dtype float16 on a typed graph was stored float32 without a word
    typed(tmp_path / "gb")
    rc, _, err = run_cli(["prepare", "graphbolt", tmp_path / "gb", tmp_path / "out", "--task",
                          "0", "--no-progress", *flag], capsys)
    assert_one_line_error(rc, err, flag[0], "does not apply to a typed graph")
    assert not (tmp_path / "out").exists()
