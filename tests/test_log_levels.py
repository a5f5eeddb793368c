"""The settings list a worker sends its task processes (connect_runtime.log_levels):
replayed on a fresh hierarchy, it gives every logger the level the worker's has,
and it does not grow with repeated requests. Each test on hierarchies of its own."""

from __future__ import annotations

import logging
import random

import pytest

from connect_runtime.errors import NotFoundException
from connect_runtime.log_levels import (
    LEVELS,
    LevelSetting,
    apply_settings,
    loggers_in_namespace,
    record_setting,
)

NAMES = ["a", "a.b", "a.b.c", "a.bc", "a.bc.d", "b", "b.x"]


def fresh() -> logging.Manager:
    return logging.Manager(logging.RootLogger(logging.INFO))


def effective(manager: logging.Manager, names: list[str]) -> dict[str, int]:
    return {name: manager.getLogger(name).getEffectiveLevel() for name in ["", *names]}


def test_a_setting_names_root_one_way_and_checks_its_level() -> None:
    assert LevelSetting.of("ROOT", " debug") == LevelSetting("root", "DEBUG")
    assert LevelSetting.of("", "warn") == LevelSetting("root", "WARN")
    with pytest.raises(NotFoundException, match="invalid log level 'WARNING'"):
        LevelSetting.of("a", "WARNING")


def test_a_later_setting_replaces_an_earlier_one_of_its_namespace_only() -> None:
    settings: tuple[LevelSetting, ...] = ()
    for namespace, level in [("a.b.c", "DEBUG"), ("a.bc", "TRACE"), ("a.b", "ERROR"),
                             ("b", "WARN"), ("a.b", "INFO"), ("root", "DEBUG")]:
        settings = record_setting(settings, LevelSetting(namespace, level))
    assert settings == (LevelSetting("a.b.c", "DEBUG"), LevelSetting("a.bc", "TRACE"),
                        LevelSetting("b", "WARN"), LevelSetting("a.b", "INFO"),
                        LevelSetting("root", "DEBUG"))


def test_a_thousand_requests_on_a_few_namespaces_stay_a_short_list() -> None:
    settings: tuple[LevelSetting, ...] = ()
    for i in range(1000):
        settings = record_setting(settings, LevelSetting(NAMES[i % 3], ("DEBUG", "INFO")[i % 2]))
    assert len(settings) == 3


@pytest.mark.parametrize("seed", range(200))
def test_replaying_the_list_on_a_fresh_hierarchy_gives_the_workers_levels(seed: int) -> None:
    """The worker applies each request as it comes (each creates its namespace's
    logger, which later requests may set by the string-prefix rule); a task process
    replays the list once and creates its loggers afterwards. Every logger, set or
    created later, must end at the same effective level."""
    rng = random.Random(seed)
    worker = fresh()
    settings: tuple[LevelSetting, ...] = ()
    for _ in range(rng.randint(1, 8)):
        setting = LevelSetting(rng.choice(["root", *NAMES]), rng.choice(list(LEVELS)))
        for logger in loggers_in_namespace(worker, setting.namespace):
            logger.setLevel(LEVELS[setting.level])
        settings = record_setting(settings, setting)
    task_process = fresh()
    apply_settings(settings, task_process)
    assert effective(task_process, NAMES) == effective(worker, NAMES), settings


def test_replaying_again_changes_nothing() -> None:
    manager = fresh()
    settings = (LevelSetting("a", "DEBUG"), LevelSetting("a.bc", "ERROR"))
    apply_settings(settings, manager)
    before = effective(manager, NAMES)
    apply_settings(settings, manager)
    assert effective(manager, NAMES) == before
    assert manager.getLogger("a.b").getEffectiveLevel() == logging.DEBUG
