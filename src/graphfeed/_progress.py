"""A small dependency-free progress bar on stderr (tqdm is not a dependency)."""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO


class Progress:
    """``with Progress(total, "epoch 1") as bar: bar.update(1, loss=0.3)``.

    Redraws at most ``min_interval`` seconds apart; on a non-terminal stream it prints only the
    final line, so logs stay readable. ``unit`` names what is counted (batches/s, MB/s, ...).
    """

    def __init__(
        self,
        total: Optional[int],
        desc: str = "",
        *,
        unit: str = "it",
        stream: Optional[TextIO] = None,
        enabled: bool = True,
        min_interval: float = 0.2,
        width: int = 24,
    ):
        self.total = total
        self.desc = desc
        self.unit = unit
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.interactive = enabled and getattr(self.stream, "isatty", lambda: False)()
        self.min_interval = min_interval
        self.width = width
        self.n = 0
        self.postfix: dict = {}
        self.start = time.perf_counter()
        self._last = 0.0

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    @property
    def rate(self) -> float:
        e = self.elapsed
        return self.n / e if e > 0 else 0.0

    def update(self, n: int = 1, **postfix) -> None:
        self.n += n
        if postfix:
            self.postfix.update(postfix)
        if self.interactive:
            now = time.perf_counter()
            if now - self._last >= self.min_interval:
                self._last = now
                self._draw(end="\r")

    def line(self) -> str:
        rate = f"{self.rate:.1f} {self.unit}/s"
        if self.total:
            frac = min(1.0, self.n / self.total)
            filled = int(frac * self.width)
            bar = "#" * filled + "." * (self.width - filled)
            count = f"{self.n}/{self.total}"
            body = f"[{bar}] {count}"
        else:
            body = f"{self.n}"
        extra = " ".join(f"{k}={v}" for k, v in self.postfix.items())
        return f"{self.desc} {body} {self.elapsed:.1f}s {rate} {extra}".rstrip()

    def _draw(self, end: str) -> None:
        self.stream.write("\x1b[2K" + self.line() + end if self.interactive else self.line() + end)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.interactive:
            self._draw(end="\n")
        self.enabled = False
