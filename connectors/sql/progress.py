"""Pure decisions about where a batch of rows may end and what each row's offset is.

The rule behind all of it: **a record's offset is the resume point that would be
correct if the transaction ended right after that record.**

* incrementing and timestamp+incrementing: each row has a unique position
  (``inc``, or ``(E, inc)``), so a row's own position is its resume point. The
  checks here fail the task when positions are not strictly increasing (a
  column that is not unique, or compares differently than configured), since
  resuming past such a row would skip its twin.
* timestamp: several rows may share one E value (a *group*). Resuming reads
  ``E > t``, so the offset ``t`` may only be a timestamp whose whole group has
  been emitted. :func:`plan_timestamp_batch` therefore gives each row of an
  unfinished group the offset *before* the group, and only the group's last
  row the group's timestamp. A result cut by ``LIMIT`` may have cut its last
  group: those rows are left out and the group is read whole by its own query
  (``queries.timestamp_group``), whose rows get offsets by the same rule
  (:func:`group_offsets`).

So a commit anywhere re-reads at most one group (at-least-once), and with
``transaction.boundary=connector`` the task commits only where a group ends:
no group is ever split across transactions, and a restart never resumes
inside one. That is exactly once.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass

from connect_runtime import DataException

Timestamp = datetime.datetime


@dataclass(frozen=True)
class TimestampPlan:
    """What to do with one timestamp-mode result.

    ``emit`` rows (a prefix of the result) form whole groups, with ``offsets[i]``
    the resume point after row i. ``cut_group`` is the timestamp of a group the
    LIMIT may have cut (its rows in this result are not emitted), or None.
    """

    emit: int
    offsets: tuple[Timestamp | None, ...]
    cut_group: Timestamp | None


def plan_timestamp_batch(keys: Sequence[Timestamp], full: bool,
                         start: Timestamp | None) -> TimestampPlan:
    """Plan a result of ``WHERE E > start ... ORDER BY E LIMIT n`` (``keys`` = the E values).

    ``full``: the result has n rows, so rows of its last timestamp may remain
    unread. Otherwise the result held every row below the upper bound, so every
    group in it is whole.
    """
    _check_non_decreasing(keys, start)
    cut = keys[-1] if full and keys else None
    emit = len(keys) if cut is None else keys.index(cut)
    offsets: list[Timestamp | None] = []
    done = start
    for i in range(emit):
        if i + 1 == emit or keys[i + 1] != keys[i]:
            done = keys[i]  # the last row of its group: the group is whole
        offsets.append(done)
    return TimestampPlan(emit, tuple(offsets), cut)


def group_offsets(count: int, finished: bool, group: Timestamp,
                  before: Timestamp | None) -> list[Timestamp | None]:
    """Offsets of ``count`` rows streamed from one group: ``before`` until the group's
    last row (when ``finished``), which gets ``group``."""
    offsets = [before] * count
    if finished and count:
        offsets[-1] = group
    return offsets


def _check_non_decreasing(keys: Sequence[Timestamp], start: Timestamp | None) -> None:
    previous = start
    for key in keys:
        if previous is not None and key < previous:
            raise DataException(f"Rows came back out of timestamp order ({key} after "
                                f"{previous}); the database does not order them as compared")
        previous = key


def check_incrementing(values: Sequence[int | None], last: int | None, what: str,
                       column: str) -> int:
    """Check a result of ``WHERE inc >= last ORDER BY inc``; returns how many leading rows
    to skip (the row at ``last`` itself, already emitted).

    Raises DataException naming ``what`` and ``column`` for a null, a repeated
    value, or a value not above the previous one.
    """
    skip = 1 if values and last is not None and values[0] == last else 0
    previous = last
    for value in values[skip:]:
        if value is None:
            raise DataException(f"{what}: incrementing column {column!r} is null in a row; "
                                "it must be NOT NULL")
        if previous is not None and value <= previous:
            raise DataException(
                f"{what}: incrementing column {column!r} is not strictly increasing: value "
                f"{value} came after {previous}. Rows sharing a value, or getting lower ones "
                "later, would be skipped on resume; use a unique, only-growing column (or "
                "mode=timestamp+incrementing for updated rows).")
        previous = value
    return skip


def check_positions(positions: Sequence[tuple[Timestamp, int | None]],
                    start: tuple[Timestamp | None, int | None], what: str,
                    column: str) -> None:
    """timestamp+incrementing: ``(E, inc)`` must strictly increase from ``start``."""
    previous = start
    for ts, inc in positions:
        if inc is None:
            raise DataException(f"{what}: incrementing column {column!r} is null in a row; "
                                "it must be NOT NULL")
        last_ts, last_inc = previous
        if last_ts is not None and (ts < last_ts or (ts == last_ts and last_inc is not None
                                                     and inc <= last_inc)):
            raise DataException(
                f"{what}: two rows share timestamp {ts} and {column!r} = {inc} (or came back "
                f"out of order after ({last_ts}, {last_inc})); the incrementing column must "
                "be unique.")
        previous = (ts, inc)
