"""Issue 29: bad input to ``graphfeed partition`` / a bad partition book gives one error line,
never a traceback."""

from __future__ import annotations

import pytest

from graphfeed.errors import GraphfeedError
from graphfeed.partition import assign_parts


def test_cli_refuses_a_negative_seed(tiny_dataset, tmp_path, capsys):
    from graphfeed.cli.main import main

    out = tmp_path / "p"
    with pytest.raises(SystemExit) as e:
        main(["partition", str(tiny_dataset.path), str(out), "--parts", "2", "--method",
              "random", "--seed=-1"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--seed" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("seed", [-1, 1.5, "3"])
def test_assign_parts_refuses_a_bad_seed(tiny_dataset, seed):
    with pytest.raises(GraphfeedError, match="seed"):
        assign_parts(tiny_dataset, 2, "random", seed=seed)
