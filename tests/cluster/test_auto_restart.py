"""Automatic restarts: growing delays with jitter, a limit, a reset after a stable run."""

from __future__ import annotations

import pytest
from support.clock import FakeClock

from connect_runtime.cluster.auto_restart import UNLIMITED, AutoRestarts, RestartPolicy
from connect_runtime.config.connector_config import ConnectorConfig

POLICY = RestartPolicy(enabled=True, max_attempts=3, backoff_initial_ms=1000,
                       backoff_max_ms=3000, reset_after_ms=60_000)


def restarts(draws: list[float]) -> tuple[FakeClock, AutoRestarts]:
    clock = FakeClock()
    return clock, AutoRestarts(clock=clock, draw=lambda: draws.pop(0))


def test_delays_double_up_to_the_maximum_with_jitter_in_the_upper_half() -> None:
    policy = RestartPolicy(enabled=True, backoff_initial_ms=1000, backoff_max_ms=5000)
    assert [policy.delay_s(n, 0.0) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 2.5, 2.5]
    assert [policy.delay_s(n, 0.999) for n in (1, 2, 3)] == pytest.approx([1.0, 2.0, 4.0],
                                                                          rel=1e-3)
    # Whatever the draws, a delay never shrinks from one attempt to the next.
    assert policy.delay_s(2, 0.0) >= policy.delay_s(1, 0.999)
    assert policy.delay_s(10_000, 0.5) == 3.75  # a huge attempt number does not overflow


def test_a_failing_task_is_restarted_after_growing_delays_until_the_limit() -> None:
    clock, auto = restarts([0.0, 0.0, 0.0])
    plans = []
    for _ in range(3):
        plan = auto.failed("c", 0, 1, POLICY)
        assert plan is not None and not plan.gave_up
        plans.append(plan)
        assert auto.due() == []  # not yet
        clock.now += plan.delay_s
        assert auto.due() == [("c", 0, 1)]
        assert auto.due() == []  # once
        auto.running("c", 0, 1)
        clock.now += 1  # fails again soon: no reset
    assert [p.delay_s for p in plans] == [0.5, 1.0, 1.5]
    assert "restarts this task automatically in 1.0s (attempt 2 of 3; " \
           "errors.restart.policy=on-failure)" in plans[1].note
    given_up = auto.failed("c", 0, 1, POLICY)
    assert given_up is not None and given_up.gave_up and auto.due() == []
    assert "gave up restarting this task automatically after 3 consecutive" in given_up.note
    assert auto.counts() == {("c", 0): (3, 3)}


def test_a_stable_run_resets_the_count_and_a_new_generation_starts_over() -> None:
    clock, auto = restarts([0.0] * 4)
    auto.failed("c", 0, 1, POLICY)
    auto.failed("c", 0, 1, POLICY)
    auto.running("c", 0, 1)
    clock.now += 60  # reset.after.ms
    plan = auto.failed("c", 0, 1, POLICY)
    assert plan is not None and plan.attempt == 1
    plan = auto.failed("c", 0, 2, POLICY)  # a new generation of the task
    assert plan is not None and plan.attempt == 1


def test_off_by_default_and_unlimited_on_request() -> None:
    _, auto = restarts([0.0] * 50)
    assert auto.failed("c", 0, 1, RestartPolicy()) is None
    unlimited = RestartPolicy(enabled=True, max_attempts=UNLIMITED)
    plans = [auto.failed("c", 0, 1, unlimited) for _ in range(40)]
    assert all(p is not None and not p.gave_up for p in plans)
    assert plans[-1] is not None and "attempt 40 no limit" in plans[-1].note


def test_a_rest_restart_or_a_deleted_connector_cancels_the_pending_one() -> None:
    clock, auto = restarts([0.0, 0.0])
    auto.failed("c", 0, 1, POLICY)
    auto.cancel("c", 0)
    auto.failed("d", 0, 1, POLICY)
    auto.forget("d")
    clock.now += 100
    assert auto.due() == []


def test_the_policy_comes_from_the_connector_config_with_its_defaults() -> None:
    base = {"name": "c", "connector.class": "SequenceSourceConnector"}
    assert RestartPolicy.from_values(ConnectorConfig(base).values) == RestartPolicy()
    policy = RestartPolicy.from_values(ConnectorConfig({
        **base, "errors.restart.policy": "on-failure", "errors.restart.max.attempts": "-1",
        "errors.restart.backoff.initial.ms": "200"}).values)
    assert policy.enabled and policy.max_attempts == UNLIMITED
    assert policy.backoff_initial_ms == 200
