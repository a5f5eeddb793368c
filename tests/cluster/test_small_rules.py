"""Pure rules of the worker: states, fencing, request signing."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from connect_runtime.cluster.config_writer import config_changes
from connect_runtime.cluster.fencing import task_count_needs_fencing, transactional_ids
from connect_runtime.cluster.spark_runner import DRIVER_LOG4J2, driver_conf
from connect_runtime.errors import RequestSignatureException
from connect_runtime.protocol import signing
from connect_runtime.protocol.states import IllegalStateTransition, State, check_transition


def test_state_transitions_are_guarded() -> None:
    assert check_transition(State.RUNNING, State.PAUSED) is State.PAUSED
    assert check_transition(State.FAILED, State.RESTARTING) is State.RESTARTING
    with pytest.raises(IllegalStateTransition, match="FAILED -> RUNNING"):
        check_transition(State.FAILED, State.RUNNING)
    with pytest.raises(IllegalStateTransition):
        check_transition(State.DESTROYED, State.RUNNING)


def test_fencing_rule_of_kip_618() -> None:
    assert not task_count_needs_fencing(None, 5)  # first generation: nothing to fence
    assert not task_count_needs_fencing(1, 1)  # the single task fences its predecessor
    assert task_count_needs_fencing(1, 2)
    assert task_count_needs_fencing(3, 3)  # partitions may have moved between tasks
    assert transactional_ids("g", "c", 3) == ["g-c-0", "g-c-1", "g-c-2"]


def test_a_config_change_is_logged_by_key_names_never_values() -> None:
    before = {"name": "c", "tasks.max": "1", "password": "old", "gone": "x"}
    after = {"name": "c", "tasks.max": "2", "password": "new", "topic": "t"}
    assert config_changes(before, after) == "changed password, tasks.max; added topic; " \
                                            "removed gone"
    assert config_changes(before, dict(before)) == "no key changed"


def test_signed_requests_verify_and_forgeries_do_not() -> None:
    key = signing.generate_key("HmacSHA256")
    assert len(key) == 64  # SHA-256 block size, like Java's KeyGenerator default
    headers = signing.sign_headers(base64.b64encode(key).decode(), "HmacSHA256", b"body")
    signing.verify(key, ["HmacSHA256"], headers, b"body")
    with pytest.raises(RequestSignatureException) as forged:
        signing.verify(key, ["HmacSHA256"], headers, b"other body")
    assert forged.value.status == 403
    with pytest.raises(RequestSignatureException) as missing:
        signing.verify(key, ["HmacSHA256"], {}, b"body")
    assert missing.value.status == 400
    with pytest.raises(RequestSignatureException) as unknown:
        signing.verify(key, ["HmacSHA256"], {**headers, signing.ALGORITHM_HEADER: "HmacMD5"},
                       b"body")
    assert unknown.value.status == 400
    with pytest.raises(RequestSignatureException) as no_key:
        signing.verify(None, ["HmacSHA256"], headers, b"body")
    assert no_key.value.status == 503


def test_the_drivers_log_configuration_comes_before_the_users_java_options(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A -Dlog4j2.configurationFile of the user's own comes later on the JVM's
    command line, so it wins; other options are kept. (No class archive here:
    test_jvm_archive.py has the option that maps one.)"""
    monkeypatch.setenv("CONNECT_RUNTIME_JVM_ARCHIVES", str(tmp_path))
    ours = f'-Dlog4j2.configurationFile="{DRIVER_LOG4J2}"'
    assert DRIVER_LOG4J2.is_file()
    assert driver_conf({"spark.master": "local[2]"}) == {
        "spark.master": "local[2]", "spark.driver.extraJavaOptions": ours}
    given = "-Dlog4j2.configurationFile=/etc/mine.properties -Xss4m"
    assert driver_conf({"spark.driver.extraJavaOptions": given}) == {
        "spark.driver.extraJavaOptions": f"{ours} {given}"}


def test_the_drivers_temp_dir_is_the_workers_unless_the_user_sets_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark's spark-* and blockmgr-* go to java.io.tmpdir when spark.local.dir is
    unset; a -Djava.io.tmpdir of the user's comes later and wins."""
    monkeypatch.setenv("CONNECT_RUNTIME_JVM_ARCHIVES", str(tmp_path / "no-archives"))
    log4j = f'-Dlog4j2.configurationFile="{DRIVER_LOG4J2}"'
    ours = f'{log4j} -Djava.io.tmpdir="{tmp_path}"'
    assert driver_conf({}, tmp_path) == {"spark.driver.extraJavaOptions": ours}
    given = "-Djava.io.tmpdir=/var/tmp/mine"
    assert driver_conf({"spark.driver.extraJavaOptions": given, "spark.local.dir": "/data"},
                       tmp_path) == {"spark.driver.extraJavaOptions": f"{ours} {given}",
                                     "spark.local.dir": "/data"}


def test_slots_hold_at_most_tasks_per_process_tasks_as_evenly_as_can_be() -> None:
    from connect_runtime.cluster.spark_runner import slot_groups
    from connect_runtime.protocol.task_spec import TaskSpec

    def specs(count: int, per_process: int | None) -> list[TaskSpec]:
        return [TaskSpec(connector="c", task=t, generation=1, task_config={},
                         connector_config={}, bootstrap_servers="b:9092", group_id="g",
                         config_topic="cfg", status_topic="st", global_offsets_topic="off",
                         worker_url="http://w:8083", worker_id="w", eos_support="enabled",
                         offset_flush_interval_ms=1000, tasks_per_process=per_process)
                for t in range(count)]

    def shape(count: int, per_process: int | None, cores: int = 2) -> list[list[int]]:
        return [[s.task for s in group]
                for group in slot_groups(specs(count, per_process), cores)]

    assert shape(3, 1) == [[0], [1], [2]]
    assert shape(10, 4) == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert shape(4, 4) == [[0, 1, 2, 3]]
    assert shape(2, 64) == [[0, 1]]
    assert shape(200, 20) == [list(range(i, i + 20)) for i in range(0, 200, 20)]
    assert shape(0, 4) == []
    # A number is a number, whatever the cores.
    assert shape(4, 1, cores=1) == [[0], [1], [2], [3]]
    # auto (None): a process per core while there are tasks for each, then at
    # most 64 tasks to a process.
    assert shape(1, None) == [[0]]
    assert shape(3, None) == [[0, 1], [2]]
    assert shape(40, None) == [list(range(0, 20)), list(range(20, 40))]
    assert [len(g) for g in shape(200, None)] == [50, 50, 50, 50]
    assert [len(g) for g in shape(129, None, cores=1)] == [43, 43, 43]
    assert shape(3, None, cores=8) == [[0], [1], [2]]
    assert [len(g) for g in shape(20, None, cores=8)] == [3, 3, 3, 3, 2, 2, 2, 2]
    assert shape(0, None) == []


def test_auto_packing_gives_every_core_a_process_and_no_process_more_than_64_tasks() -> None:
    from connect_runtime.cluster.spark_runner import auto_slots

    for cores in (1, 2, 3, 8, 64, 500):
        for tasks in range(1, 1000, 7):
            slots = auto_slots(tasks, cores)
            assert slots == min(tasks, cores) or slots == -(-tasks // 64)
            assert min(tasks, cores) <= slots <= tasks
            assert -(-tasks // slots) <= 64
