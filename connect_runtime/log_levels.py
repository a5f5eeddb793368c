"""Kafka Connect's logger levels over Python's :mod:`logging`, for both planes.

The worker's ``/admin/loggers`` (:mod:`connect_runtime.cluster.loggers`) reads and
sets levels by these rules in the worker process. The task processes on Spark
executors apply the same settings: the worker sends every slot the
:class:`LevelSetting` list it applied (:func:`record_setting`) in the slot's
answers, and the slot replays it (:func:`apply_settings`) before its task starts
and whenever it changes (decision 59 in docs/architecture.md).

Levels: Connect's names (log4j2's) map to Python levels as below. A Python
level between two of them reads as the next more severe name, i.e. the least
severe Connect level the logger still emits (a logger at 15 emits INFO but not
DEBUG, so it reads "INFO")::

    Connect  Python
    OFF      sys.maxsize (no record passes, whatever custom level it has)
    FATAL    CRITICAL (50)
    ERROR    ERROR (40)
    WARN     WARNING (30)
    INFO     INFO (20)
    DEBUG    DEBUG (10)
    TRACE    5
    ALL      1 (not NOTSET, which means "inherit" in Python)

The namespace rule, as Kafka Connect 4.1.1 applies it: setting a namespace sets,
explicitly, the level of every existing logger whose name *starts with* the
namespace (a plain string prefix, so "a.b" also covers "a.bc"), plus the
namespace's own logger, created if missing. "root" (or "", in any case) sets
every logger. Loggers created later inherit through Python's hierarchy.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

from connect_runtime.config.properties import java_trim
from connect_runtime.errors import NotFoundException

__all__ = ["LEVELS", "ROOT_LOGGER_NAME", "LevelSetting", "apply_settings", "is_root",
           "level_name", "loggers_in_namespace", "parse_level", "record_setting"]

ROOT_LOGGER_NAME = "root"
# log4j2 calls the root logger ""; Connect accepts both names, in any case.
_ROOT_NAMES = frozenset({ROOT_LOGGER_NAME, ""})

# Most severe first; level_name() relies on that order.
LEVELS: dict[str, int] = {
    "OFF": sys.maxsize,
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": 5,
    "ALL": 1,
}


def parse_level(text: str) -> str:
    """Connect's name for the level ``text`` names; NotFoundException (Connect's
    status and message) if it names none.

    As log4j2's ``Level.toLevel``: surrounding blanks and case do not matter
    ("  debug" is DEBUG); Python-only names ("WARNING", "CRITICAL") are not levels.
    """
    name = java_trim(text).upper()  # log4j2 trims level names as Java's String.trim
    if name not in LEVELS:
        raise NotFoundException(f"invalid log level '{text}'.")
    return name


def level_name(python_level: int) -> str:
    """Connect's name for a Python level: the least severe Connect level it still emits."""
    name = "OFF"
    for candidate, value in LEVELS.items():
        if value < python_level:
            break
        name = candidate
    return name


def is_root(namespace: str) -> bool:
    """Whether ``namespace`` names the root logger ("root" or "", in any case)."""
    return namespace.lower() in _ROOT_NAMES


def loggers_in_namespace(manager: logging.Manager, namespace: str) -> list[logging.Logger]:
    """The loggers of ``manager`` that setting ``namespace`` sets (the module
    docstring's rule), the namespace's own logger created if missing.

    ``PlaceHolder`` nodes are not loggers. Another thread may create a logger
    meanwhile: the hierarchy is read from a copy.
    """
    # dict.copy() runs without releasing the GIL, so a logger created meanwhile
    # cannot make the iteration fail.
    existing = {name: node for name, node in manager.loggerDict.copy().items()
                if isinstance(node, logging.Logger)}
    if is_root(namespace):
        return [manager.root, *existing.values()]
    loggers = [logger for name, logger in existing.items() if name.startswith(namespace)]
    if namespace not in existing:
        loggers.append(manager.getLogger(namespace))
    return loggers


@dataclass(frozen=True, slots=True)
class LevelSetting:
    """One level set through ``/admin/loggers``: ``namespace`` ("root" for the
    root logger, whatever name the request used) to ``level``, a Connect level
    name (a key of :data:`LEVELS`)."""

    namespace: str
    level: str

    @classmethod
    def of(cls, namespace: str, level: str) -> LevelSetting:
        """The setting a request for ``namespace`` and ``level`` (any text
        :func:`parse_level` accepts) makes; its NotFoundException propagates."""
        return cls(ROOT_LOGGER_NAME if is_root(namespace) else namespace, parse_level(level))


def record_setting(settings: tuple[LevelSetting, ...],
                   new: LevelSetting) -> tuple[LevelSetting, ...]:
    """``settings`` (applied in order) followed by ``new``, without an earlier
    setting of the same namespace: the list is as long as the number of
    namespaces set, however many requests there were.

    Replaying the result on a fresh hierarchy (:func:`apply_settings`) gives every
    logger the effective level replaying the whole history would: an earlier
    setting of ``new``'s namespace set no logger that ``new`` does not set again,
    and the namespace's own logger is still created (by ``new``) before every
    later setting that covers it. Dropping more would not be safe: a root setting
    after "a.bc" must keep "a.bc", whose logger a later "a.b" sets (a string
    prefix) where, missing, it would inherit from the root.
    """
    return (*(s for s in settings if s.namespace != new.namespace), new)


def apply_settings(settings: tuple[LevelSetting, ...],
                   manager: logging.Manager | None = None) -> None:
    """Set each of ``settings``, in order, by the namespace rule, in ``manager``
    (the process's hierarchy by default)."""
    manager = manager if manager is not None else logging.Logger.manager
    for setting in settings:
        for logger in loggers_in_namespace(manager, setting.namespace):
            logger.setLevel(LEVELS[setting.level])
