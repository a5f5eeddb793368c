"""Connect's logger-admin rules over Python logging, on a private hierarchy each test.

The expectations are what Kafka Connect 4.1.1 answered, measured on a running worker.
"""

from __future__ import annotations

import logging
import sys

import pytest
from support.clock import FakeClock

from connect_runtime.cluster.herder_api import LoggerLevel
from connect_runtime.cluster.loggers import LEVELS, LoggerLevels, level_name, parse_level
from connect_runtime.errors import NotFoundException
from connect_runtime.log_levels import LevelSetting


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_000)


@pytest.fixture
def manager() -> logging.Manager:
    """A hierarchy of its own, root at INFO: tests never touch the process's loggers."""
    return logging.Manager(logging.RootLogger(logging.INFO))


@pytest.fixture
def levels(manager: logging.Manager, clock: FakeClock) -> LoggerLevels:
    return LoggerLevels(manager, lambda: int(clock()))  # ms, as the stamps are


# ----------------------------------------------------------------- level names


@pytest.mark.parametrize(("text", "name"), [
    ("DEBUG", "DEBUG"), ("debug", "DEBUG"), ("Warn", "WARN"), (" DEBUG", "DEBUG"),
    ("DEBUG\t", "DEBUG"), ("off", "OFF"), ("FATAL", "FATAL"), ("all", "ALL"),
])
def test_level_names_are_log4j_names_in_any_case_trimmed(text: str, name: str) -> None:
    assert parse_level(text) == name


@pytest.mark.parametrize("text", ["WARNING", "CRITICAL", "bogus", "", "   ", "5", "true"])
def test_anything_else_is_connects_404_message(text: str) -> None:
    with pytest.raises(NotFoundException) as caught:
        parse_level(text)
    assert str(caught.value) == f"invalid log level '{text}'."


def test_level_mapping_to_python() -> None:
    # Most severe first: level_name() depends on the order.
    assert list(LEVELS.items()) == [
        ("OFF", sys.maxsize), ("FATAL", logging.CRITICAL), ("ERROR", logging.ERROR),
        ("WARN", logging.WARNING), ("INFO", logging.INFO), ("DEBUG", logging.DEBUG),
        ("TRACE", 5), ("ALL", 1)]
    for name, value in LEVELS.items():
        assert level_name(value) == name


@pytest.mark.parametrize(("python_level", "name"), [
    (0, "ALL"), (3, "TRACE"), (9, "DEBUG"), (15, "INFO"), (25, "WARN"), (45, "FATAL"),
    (51, "OFF"), (1000, "OFF"),
])
def test_a_custom_python_level_reads_as_the_least_severe_level_it_still_emits(
    python_level: int, name: str,
) -> None:
    assert level_name(python_level) == name


# ------------------------------------------------------------------------ reading


def test_root_answers_to_root_in_any_case(levels: LoggerLevels) -> None:
    for name in ("root", "ROOT", "Root", ""):
        assert levels.level(name) == LoggerLevel("INFO", None)


def test_a_logger_reports_its_effective_level(
    levels: LoggerLevels, manager: logging.Manager,
) -> None:
    manager.getLogger("a").setLevel(logging.WARNING)
    manager.getLogger("a.b")
    assert levels.level("a.b") == LoggerLevel("WARN", None)


def test_unknown_loggers_and_placeholders_are_not_found_and_not_created(
    levels: LoggerLevels, manager: logging.Manager,
) -> None:
    manager.getLogger("x.y.z")  # makes "x" and "x.y" placeholders
    assert levels.level("x.y") is None
    assert levels.level("nope") is None
    assert "nope" not in manager.loggerDict
    assert isinstance(manager.loggerDict["x.y"], logging.PlaceHolder)


def test_listing_is_sorted_with_root_and_without_off_loggers(
    levels: LoggerLevels, manager: logging.Manager,
) -> None:
    manager.getLogger("zeta")
    manager.getLogger("alpha.beta").setLevel(logging.DEBUG)
    manager.getLogger("silent").setLevel(sys.maxsize)
    listing = levels.all_levels()
    assert list(listing) == ["alpha.beta", "root", "zeta"]
    assert listing["alpha.beta"] == LoggerLevel("DEBUG", None)
    assert listing["zeta"] == LoggerLevel("INFO", None)


def test_root_at_off_is_not_listed(levels: LoggerLevels, manager: logging.Manager) -> None:
    manager.getLogger("a").setLevel(logging.ERROR)
    levels.set_level("root", "OFF")
    assert levels.all_levels() == {}
    assert levels.level("root") == LoggerLevel("OFF", 1_000)


# ------------------------------------------------------------------------ setting


def test_setting_a_namespace_sets_every_logger_whose_name_starts_with_it(
    levels: LoggerLevels, manager: logging.Manager, clock: FakeClock,
) -> None:
    # As Connect's rule: a plain string prefix, so "zz.h" covers "zz.hx" too.
    for name in ("zz.h.a", "zz.hx", "zz.h.a.deep", "zz.other"):
        manager.getLogger(name).setLevel(logging.DEBUG)
    clock.now = 5_000
    assert levels.set_level("zz.h", "WARN") == ["zz.h", "zz.h.a", "zz.h.a.deep", "zz.hx"]
    for name in ("zz.h", "zz.h.a", "zz.hx", "zz.h.a.deep"):
        assert levels.level(name) == LoggerLevel("WARN", 5_000)
        assert manager.getLogger(name).level == logging.WARNING  # explicitly set
    assert levels.level("zz.other") == LoggerLevel("DEBUG", None)


def test_only_loggers_whose_level_changed_are_reported_and_stamped(
    levels: LoggerLevels, manager: logging.Manager, clock: FakeClock,
) -> None:
    manager.getLogger("n.a").setLevel(logging.ERROR)
    manager.getLogger("n.b").setLevel(logging.DEBUG)
    manager.getLogger("n").setLevel(logging.ERROR)
    assert levels.set_level("n", "ERROR") == ["n.b"]
    assert levels.level("n.a") == LoggerLevel("ERROR", None)
    assert levels.level("n.b") == LoggerLevel("ERROR", 1_000)
    clock.now = 2_000
    assert levels.set_level("n", "error") == []
    assert levels.level("n.b") == LoggerLevel("ERROR", 1_000)


def test_a_new_namespace_is_created_and_reported_only_if_its_level_differs(
    levels: LoggerLevels, manager: logging.Manager,
) -> None:
    # Connect 4.1.1: a new logger at its inherited level is no change.
    assert levels.set_level("fresh.same", "INFO") == []
    assert levels.level("fresh.same") == LoggerLevel("INFO", None)
    assert levels.set_level("fresh.other", "TRACE") == ["fresh.other"]
    assert manager.getLogger("fresh.other").isEnabledFor(5)


def test_every_logger_is_read_before_any_is_set(
    levels: LoggerLevels, manager: logging.Manager,
) -> None:
    # "p.c" inherits from "p": setting "p" first must not hide "p.c"'s change.
    manager.getLogger("p.c")
    manager.getLogger("p")
    assert levels.set_level("p", "DEBUG") == ["p", "p.c"]


def test_loggers_created_later_inherit_the_namespace_level(
    levels: LoggerLevels, manager: logging.Manager,
) -> None:
    levels.set_level("later", "DEBUG")
    assert levels.level("later") == LoggerLevel("DEBUG", 1_000)
    manager.getLogger("later.child")
    assert levels.level("later.child") == LoggerLevel("DEBUG", None)


def test_root_namespace_sets_every_logger(
    levels: LoggerLevels, manager: logging.Manager,
) -> None:
    manager.getLogger("one").setLevel(logging.ERROR)
    manager.getLogger("two.three")
    assert levels.set_level("ROOT", "DEBUG") == ["one", "root", "two.three"]
    assert manager.root.level == logging.DEBUG
    assert "ROOT" not in manager.loggerDict


def test_off_silences_every_record(levels: LoggerLevels, manager: logging.Manager) -> None:
    levels.set_level("quiet", "OFF")
    logger = manager.getLogger("quiet")
    assert not logger.isEnabledFor(logging.CRITICAL)
    assert not logger.isEnabledFor(10_000)
    assert levels.level("quiet") == LoggerLevel("OFF", 1_000)


def test_an_invalid_level_changes_nothing(
    levels: LoggerLevels, manager: logging.Manager,
) -> None:
    with pytest.raises(NotFoundException, match=r"^invalid log level 'WARNING'\.$"):
        levels.set_level("untouched", "WARNING")
    assert "untouched" not in manager.loggerDict


def test_the_process_hierarchy_is_the_default() -> None:
    name = "connect_runtime.tests.loggers_default"
    logging.getLogger(name)
    assert LoggerLevels().level(name) is not None


def test_every_setting_is_kept_for_the_task_processes_but_no_refused_one(
    levels: LoggerLevels,
) -> None:
    assert levels.settings() == ()
    levels.set_level("a", "DEBUG")
    levels.set_level("Root", "info")  # changes nothing here; a task process may differ
    levels.set_level("a", "TRACE")
    with pytest.raises(NotFoundException):
        levels.set_level("b", "bogus")
    assert levels.settings() == (LevelSetting("root", "INFO"), LevelSetting("a", "TRACE"))
