"""What the subcommands share for their output: one-line errors and writes to stdout that a
closed pipe cannot turn into a traceback."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator


def silence_stdout() -> None:
    """Point stdout at /dev/null (after its reader went away), so no later flush can raise."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (embedded, captured)
        pass


@contextlib.contextmanager
def one_line_errors(command: str, out_path=None) -> Iterator[None]:
    """Turn what bad input or a bad disk raises into a ``GraphfeedError`` (one line, exit 2 in
    ``graphfeed.cli.main``): OSError (read-only or full disk), MemoryError, RecursionError."""
    from ..errors import GraphfeedError

    try:
        yield
    except (GraphfeedError, FileExistsError, FileNotFoundError, BrokenPipeError):
        raise
    except OSError as e:
        where = e.filename or out_path or ""
        raise GraphfeedError(f"{where}: {e.strerror or e}" if where else str(e)) from None
    except MemoryError:
        raise GraphfeedError(f"{command}: out of memory (an input far larger than expected?)") from None
    except RecursionError:
        raise GraphfeedError(f"{command}: input nested too deeply") from None


def write_stdout(command: str, text: str) -> int:
    """Write ``text`` to stdout and flush; a closed pipe (``| head``) is one line on stderr and
    status 2, never a traceback or an 'Exception ignored' at exit."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()  # later flushes (at interpreter exit) must not fail again
        print(f"graphfeed {command}: error: output closed early (broken pipe)", file=sys.stderr)
        return 2
    return 0
