import pytest

from graphfeed.distributed import World
from graphfeed.errors import GraphfeedError


def test_defaults_to_one_process():
    w = World.from_env({})
    assert (w.rank, w.world_size, w.local_rank, w.local_world_size, w.group_rank) == (0, 1, 0, 1, 0)
    assert w.is_main and w.is_local_main and not w.is_distributed
    assert w.master_addr is None and w.master_port is None


def test_reads_torchrun_variables():
    env = {
        "RANK": "5",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "4",
        "GROUP_RANK": "1",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
    }
    w = World.from_env(env)
    assert (w.rank, w.world_size, w.local_rank, w.local_world_size, w.group_rank) == (5, 8, 1, 4, 1)
    assert not w.is_main and not w.is_local_main and w.is_distributed
    assert (w.master_addr, w.master_port, w.num_machines) == ("10.0.0.1", 29500, 2)


def test_local_values_default_from_global_ones():
    w = World.from_env({"RANK": "2", "WORLD_SIZE": "3"})
    assert (w.local_rank, w.local_world_size, w.group_rank) == (2, 3, 0)
    assert not w.is_local_main


@pytest.mark.parametrize(
    "env",
    [
        {"RANK": "3", "WORLD_SIZE": "2"},
        {"WORLD_SIZE": "0"},
        {"RANK": "x", "WORLD_SIZE": "2"},
        {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "3"},
    ],
)
def test_rejects_inconsistent_environments(env):
    with pytest.raises(GraphfeedError):
        World.from_env(env)


def test_world_is_a_frozen_value():
    w = World()
    with pytest.raises(Exception):
        w.rank = 1  # type: ignore[misc]
    assert World(rank=1, world_size=2) == World(rank=1, world_size=2)


def test_init_is_a_noop_for_one_process():
    from graphfeed.distributed import init, is_initialized

    assert init(World()) == World()
    assert not is_initialized()
