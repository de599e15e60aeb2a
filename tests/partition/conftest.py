import pytest

from graphfeed.distributed.shm import list_segments


@pytest.fixture
def no_leftover_segments():
    """Fails the test if it leaves a graphfeed segment in /dev/shm."""
    before = set(list_segments())
    yield
    left = set(list_segments()) - before
    assert not left, f"segments left behind: {sorted(map(str, left))}"
