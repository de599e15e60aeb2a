"""``graphfeed train --log FILE`` for every task: node classification, ``--task link``,
heterogeneous datasets, typed link prediction and ``--partitions`` each write one JSON line per
epoch with the same keys, and end with the same final line (``trainer/report.py``). A task that
ignored ``--log`` (once all but the node trainer did) fails here."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import pytest

from graphfeed.cli.main import main
from graphfeed.trainer.result import EpochStats

pytestmark = [pytest.mark.timeout(300)]

EPOCHS = 2
#: the task -> (built-in dataset, its arguments, the main validation metric)
TASKS = {
    "node": ("tiny", ["--dataset", "tiny", "--no-mlp"], "accuracy"),
    "link": ("link", ["--dataset", "link", "--task", "link", "--eval-negatives", "20"], "mrr"),
    "hetero": ("hetero", ["--dataset", "hetero", "--no-mlp"], "accuracy"),
    "hetero-link": ("hetero-link", ["--dataset", "hetero-link", "--task", "link",
                                    "--eval-negatives", "20"], "mrr"),
    "partitions": ("tiny", ["--no-mlp"], "accuracy"),  # + --partitions PATH (one part)
}
FINAL = re.compile(r"^\S+: best valid (\S+) \d\.\d{4} at epoch \d+; test there: \S+ \d\.\d{4}")


@pytest.fixture(scope="module")
def one_part(builtin_root, tmp_path_factory):
    """The built-in tiny dataset as one part (``--partitions`` then trains in this process)."""
    from graphfeed.datasets.synthetic import load_builtin
    from graphfeed.partition import partition_dataset

    ds = load_builtin("tiny", builtin_root("tiny"))
    return str(partition_dataset(ds, tmp_path_factory.mktemp("parts") / "tiny-1", 1,
                                 method="random").path)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_task_writes_one_json_line_per_epoch_with_the_same_keys(task, builtin_root,
                                                                      one_part, tmp_path,
                                                                      capsys):
    name, args, main_metric = TASKS[task]
    if task == "partitions":
        args = args + ["--partitions", one_part]
    log = tmp_path / "epochs.jsonl"
    rc = main(["train", *args, "--data-root", builtin_root(name), "--epochs", str(EPOCHS),
               "--fanouts", "5,5", "--hidden", "16", "--batch-size", "512", "--no-progress",
               "--log", str(log)])
    out = capsys.readouterr().out
    assert rc == 0
    assert log.is_file(), f"--log ignored by the {task} trainer"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == EPOCHS
    keys = {f.name for f in dataclasses.fields(EpochStats)}
    for epoch, rec in enumerate(lines):
        assert set(rec) == keys, task
        assert rec["epoch"] == epoch
        assert math.isfinite(rec["loss"]) and rec["seconds"] > 0 and rec["seeds_per_s"] > 0
        assert rec["rss_bytes"] > 0 and rec["peak_rss_bytes"] > 0
        for split in ("valid", "test"):
            assert rec[split][main_metric] is not None, (task, split, rec[split])
    final = out.strip().splitlines()[-1]
    m = FINAL.match(final)
    assert m and m.group(1) == main_metric, final


def test_a_partitioned_run_refuses_an_unwritable_log_before_training(one_part, tmp_path, capsys):
    rc = main(["train", "--partitions", one_part, "--epochs", "1", "--no-progress",
               "--log", str(tmp_path / "missing" / "epochs.jsonl")])
    err = capsys.readouterr().err
    assert rc != 0 and "--log" in err and "does not exist" in err, err
