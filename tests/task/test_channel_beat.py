"""The slot channels' beat (task.slot_control.next_beat): one per process, so its
channels' keepalives share a wake-up, and a phase of its own, so processes do not
all reach the worker at the same instant."""

from __future__ import annotations

import pytest

from connect_runtime.task.slot_control import next_beat


@pytest.mark.parametrize("now", [0.0, 0.4, 2.99, 3.0, 1000.123])
def test_the_next_beat_is_the_first_instant_on_the_phase_after_now(now: float) -> None:
    beat = next_beat(now, phase=0.5, interval_s=3.0)
    assert now < beat <= now + 3.0
    assert (beat - 0.5) / 3.0 == pytest.approx(round((beat - 0.5) / 3.0))


def test_channels_of_one_process_share_beats_and_processes_do_not() -> None:
    # Channels of one process, asking at different moments, land on one grid.
    assert next_beat(10.2, phase=1.25) == next_beat(9.9, phase=1.25) == 10.25
    assert next_beat(12.1, phase=1.25) == 13.25
    # Another process (another phase) beats elsewhere.
    assert next_beat(10.2, phase=2.5) == 11.5
