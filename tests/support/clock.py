"""A clock the test moves by hand, for code that takes a clock or a sleep.

``FakeClock`` stands in for ``time.monotonic``, ``time.time`` and ``time.sleep``
alike: calling it (or ``monotonic()``, ``time()``) reads ``now``; ``advance`` and
``sleep`` move it, and ``sleep`` also records what was asked for. The unit is
whatever the code under test reads (seconds mostly, milliseconds for some).
"""

from __future__ import annotations


class FakeClock:
    """A manually advanced clock: ``now`` changes only when the test moves it."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.sleeps: list[float] = []  # every sleep asked for, rounded to 1 ms

    def __call__(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        """A sleep that returns at once, having moved the clock by ``seconds``."""
        self.sleeps.append(round(seconds, 3))
        self.now += seconds
