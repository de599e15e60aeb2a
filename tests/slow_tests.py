"""Reads ``pytest --durations=0`` output on stdin and prints the node ids of the tests that took
more than ``LIMIT_S`` seconds (setup, call and teardown together), for ``tests/slow_tests.txt``."""

import collections
import re
import sys

LIMIT_S = 1.0


def main() -> None:
    total = collections.Counter()
    for line in sys.stdin:
        m = re.match(r"\s*([\d.]+)s (setup|call|teardown)\s+(\S+)", line)
        if m:
            total[m.group(3)] += float(m.group(1))
    with open(__file__.replace(".py", ".txt")) as f:
        print("".join(line for line in f if line.startswith("#")), end="")
    print("\n".join(sorted(k for k, v in total.items() if v > LIMIT_S)))


if __name__ == "__main__":
    main()
