"""The spark.* keys: what long-running slots need is enforced, named when refused."""

from __future__ import annotations

import sys

import pytest

from connect_runtime.config.spark_settings import effective_master, spark_settings
from connect_runtime.errors import ConfigException


@pytest.mark.parametrize(("given", "expected"), [
    ("local[*]", "local[*,4]"), ("local[8]", "local[8,4]"), ("local", "local[1,4]"),
    ("local[2,3]", "local[2,3]"), ("spark://h:7077", "spark://h:7077"),
])
def test_local_masters_get_slot_retries(given: str, expected: str) -> None:
    assert effective_master(given) == expected


def test_defaults_for_long_running_slots() -> None:
    settings = spark_settings({})
    assert settings.local and settings.master == "local[*,4]" and settings.task_cpus == 1
    assert settings.conf["spark.scheduler.mode"] == "FAIR"
    assert settings.conf["spark.task.maxFailures"] == "4"
    assert settings.conf["spark.pyspark.python"] == sys.executable
    assert settings.conf["spark.driver.host"] == "127.0.0.1"


def test_a_cluster_master_keeps_the_users_python_and_host() -> None:
    settings = spark_settings({"spark.master": "spark://10.0.0.1:7077",
                               "spark.pyspark.python": "./env/bin/python",
                               "spark.archives": "env.tar.gz#env", "other.key": "x"})
    assert not settings.local and settings.master == "spark://10.0.0.1:7077"
    assert settings.conf["spark.pyspark.python"] == "./env/bin/python"
    assert "spark.driver.host" not in settings.conf and "other.key" not in settings.conf


def test_speculation_is_forced_off_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    assert spark_settings({"spark.speculation": "true"}).conf["spark.speculation"] == "false"
    assert "spark.speculation" in caplog.text


@pytest.mark.parametrize(("keys", "named", "says"), [
    ({"spark.master": "mars://x"}, "spark.master", "spark://HOST:PORT"),
    ({"spark.master": "local[4,1]"}, "spark.master", "at least 2"),
    ({"spark.task.maxFailures": "1"}, "spark.task.maxFailures", "at least 2"),
    ({"spark.task.maxFailures": "many"}, "spark.task.maxFailures", "integer"),
    ({"spark.task.cpus": "0"}, "spark.task.cpus", "at least 1"),
    ({"spark.dynamicAllocation.enabled": "true"}, "spark.dynamicAllocation.enabled",
     "maxExecutors"),
])
def test_settings_that_break_task_semantics_are_refused_naming_the_key(
        keys: dict[str, str], named: str, says: str) -> None:
    with pytest.raises(ConfigException, match=says) as raised:
        spark_settings(keys)
    assert named in str(raised.value)


def test_bounded_dynamic_allocation_is_accepted() -> None:
    spark_settings({"spark.dynamicAllocation.enabled": "true",
                    "spark.dynamicAllocation.maxExecutors": "4"})


def test_a_cluster_master_without_authentication_is_warned_of() -> None:
    """Its driver's RPC port listens beyond loopback: anyone reaching it runs code."""
    warning = spark_settings({"spark.master": "spark://10.0.0.5:7077",
                              "spark.driver.host": "10.0.0.9"}).unauthenticated_rpc()
    assert warning is not None and "10.0.0.9" in warning and "spark.authenticate" in warning
    assert spark_settings({"spark.master": "spark://10.0.0.5:7077",
                           "spark.authenticate": "true"}).unauthenticated_rpc() is None
    assert spark_settings({"spark.master": "local[4]"}).unauthenticated_rpc() is None
