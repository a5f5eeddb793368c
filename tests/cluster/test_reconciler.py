"""The reconcile state has one owner: the reconcile thread (connect_runtime.cluster.reconciler).

The herder runs for real here, its Kafka stores and Spark runner replaced by
in-memory ones (``tests/support/memory_herder.py``): what is tested is which thread
touches what, not Kafka or Spark. REST restarts, Spark's job-failure callbacks
and reconfigurations race each other from their own threads, many times; every
touch of the reconcile state from a thread other than the reconciler's raises
:class:`OwnershipError`, which fails the thread that made it and so the test.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from support.memory_herder import RecordingRunner, leading_herder

from connect_runtime.api.connector import SourceConnector
from connect_runtime.api.record import SourceRecord
from connect_runtime.api.task import SourceTask
from connect_runtime.cluster.herder import DistributedHerder
from connect_runtime.errors import ConflictException, NotFoundException, OwnershipError

ROUNDS = 150


class IdleTask(SourceTask):
    def start(self, config: dict[str, str]) -> None:
        pass

    def poll(self) -> list[SourceRecord] | None:
        return None

    def stop(self) -> None:
        pass


class CountingSource(SourceConnector):
    """One task config per ``tasks.max``: every change of it is a new generation."""

    def start(self, config: dict[str, str]) -> None:
        self.config = dict(config)

    def task_class(self) -> type[SourceTask]:
        return IdleTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{"task.index": str(i)} for i in range(max_tasks)]

    def stop(self) -> None:
        pass


@pytest.fixture
def herder() -> Iterator[DistributedHerder]:
    herder = leading_herder({
        "task.shutdown.graceful.timeout.ms": "100"})
    herder._reconciler.start()
    yield herder
    herder._reconciler.stop(timeout_s=10)


def connector_config(tasks: int) -> dict[str, str]:
    return {"connector.class": f"{__name__}.CountingSource", "tasks.max": str(tasks)}


def running_job(herder: DistributedHerder) -> tuple[int, int]:
    """The generation of the job submitted last for connector "c" and its task count."""
    runner: RecordingRunner = herder.runner  # type: ignore[assignment]
    job = runner.job("c")
    assert job is not None and not job.done.is_set()
    return job.generation, len(job.specs)


def test_the_reconcile_state_refuses_any_other_thread(herder: DistributedHerder) -> None:
    with pytest.raises(OwnershipError, match="only the reconcile thread may"):
        herder._reconciler._state  # noqa: B018 (the read is the test)
    # What Spark's callback thread did before the split, directly: refused.
    with pytest.raises(OwnershipError):
        herder._reconciler._job_failed("c", 1, "boom")
    herder._reconciler.reconcile_now()  # the owner itself is not disturbed


def test_restarts_job_failures_and_reconfigurations_race_without_breaking_ownership(
        herder: DistributedHerder, caplog: pytest.LogCaptureFixture) -> None:
    herder.create_connector("c", connector_config(2))
    herder._reconciler.reconcile_now()  # starts the instance, writes task configs
    herder._reconciler.reconcile_now()  # submits them
    assert running_job(herder) == (herder.config_store.snapshot().config_generation("c"), 2)

    runner: RecordingRunner = herder.runner  # type: ignore[assignment]
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def race(act: Callable[[int], None]) -> Callable[[], None]:
        def run() -> None:
            start.wait()
            for i in range(ROUNDS):
                try:
                    act(i)
                except (ConflictException, NotFoundException):
                    pass  # what a client may be told mid-reconfiguration: retry
                except BaseException as e:  # an OwnershipError among them
                    errors.append(e)
                    return
        return run

    def fail_the_job(_: int) -> None:  # Spark's callback thread
        job = runner.job("c")
        if job is not None:
            herder.on_job_failed("c", job.generation, "Job aborted: slot gave up")
        time.sleep(0.001)

    acts = [
        lambda i: herder.restart_task("c", i % 3),
        lambda i: herder.restart_connector("c", include_tasks=i % 2 == 0, only_failed=False),
        fail_the_job,
        lambda i: herder.put_connector_config("c", connector_config(1 + i % 3)),
    ]
    threads = [threading.Thread(target=race(act), name=f"race-{n}") for n, act in enumerate(acts)]
    with caplog.at_level(logging.WARNING):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    # The reconcile thread never failed a message or a pass (a failure logs its trace).
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
    assert herder._reconciler.alive
    assert len(runner.history) > 10  # the race did resubmit, many times

    # Settled: one more restart of everything, and the newest generation runs.
    herder.put_connector_config("c", connector_config(3))
    deadline = time.monotonic() + 30
    while True:
        herder.restart_connector("c", include_tasks=True, only_failed=False)
        herder._reconciler.reconcile_now()
        herder._reconciler.reconcile_now()
        snapshot = herder.config_store.snapshot()
        job = runner.job("c")
        if job is not None and (job.generation, len(job.specs)) == (
                snapshot.config_generation("c"), 3):
            break
        assert time.monotonic() < deadline, (job, snapshot.config_generation("c"))
    assert running_job(herder) == (snapshot.config_generation("c"), 3)
    # Submissions never went back to an older generation.
    generations = [generation for name, generation in runner.history if name == "c"]
    assert generations == sorted(generations)


def give_up_the_job(herder: DistributedHerder, config: dict[str, str]) -> tuple[int, int]:
    """Create connector "c", submit its job, then have Spark give the job up;
    returns the job's generation and task count."""
    herder.create_connector("c", config)
    herder._reconciler.reconcile_now()
    herder._reconciler.reconcile_now()
    generation, tasks = running_job(herder)
    runner: RecordingRunner = herder.runner  # type: ignore[assignment]
    job = runner.job("c")
    assert job is not None
    job.done.set()  # what Spark's end of the job looks like to the runner
    herder.on_job_failed("c", generation, "Job aborted: Task 1 in stage 0.0 failed 4 times")
    return generation, tasks


def test_a_failed_spark_job_is_resubmitted_under_errors_restart_policy(
        herder: DistributedHerder, caplog: pytest.LogCaptureFixture) -> None:
    # Spark gives up on a connector's job when a slot used up spark.task.maxFailures
    # (each executor lost counts one: found by the partition suite's fault 5). The
    # tasks are FAILED; under errors.restart.policy they must not stay so.
    with caplog.at_level(logging.INFO):
        generation, tasks = give_up_the_job(herder, {
            **connector_config(2), "errors.restart.policy": "on-failure",
            "errors.restart.backoff.initial.ms": "0"})
        # The failure, then passes: the restarts are due at once, the first resubmits.
        herder._reconciler.reconcile_now()
        herder._reconciler.reconcile_now()
    planned = [r.getMessage() for r in caplog.records
               if "restarts this task automatically" in r.getMessage()]
    assert len(planned) == tasks, planned
    runner: RecordingRunner = herder.runner  # type: ignore[assignment]
    assert runner.history.count(("c", generation)) == 2, runner.history
    assert running_job(herder) == (generation, tasks)


def test_a_failed_spark_job_stays_failed_without_a_restart_policy(
        herder: DistributedHerder) -> None:
    generation, tasks = give_up_the_job(herder, connector_config(2))
    for _ in range(3):
        herder._reconciler.reconcile_now()
    runner: RecordingRunner = herder.runner  # type: ignore[assignment]
    assert runner.history.count(("c", generation)) == 1, runner.history
    for task in range(tasks):
        status = herder.status_store.task_status("c", task)
        assert status is not None and status.state == "FAILED", status
        assert "The Spark job hosting the tasks of c failed" in (status.trace or "")
