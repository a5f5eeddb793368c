"""Kafka Connect's logger admin (KIP-495, KIP-976) over Python's :mod:`logging`.

:class:`LoggerLevels` is this worker's side of ``/admin/loggers``: it reads and
sets the levels of the loggers in one :class:`logging.Manager` (the process's,
unless a test hands it another) and remembers when this API last changed each.

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

Connect's rules, as Kafka Connect 4.1.1 applies them:

* The loggers that exist are the root logger, named "root", and every logger
  created in the manager (``PlaceHolder`` nodes are not loggers). A logger's
  level is its effective level. "root" and "" name the root logger, in any case.
* Listing shows every existing logger, sorted by name, except those at OFF.
* Setting a namespace sets, explicitly, the level of every existing logger whose
  name *starts with* the namespace (a plain string prefix, so "a.b" also covers
  "a.bc"), plus the namespace's own logger, created if missing. "root" sets
  every logger. Loggers created later inherit through Python's hierarchy.
* The answer names the loggers whose effective level changed, sorted; only those
  get a new ``last_modified`` (ms since the epoch, the same for one call).
  Connect 4.1.1 also reports OFF loggers set to OFF again (its listing hides
  them, so it sees no old level); we report only real changes.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable

from connect_runtime.cluster.herder_api import LoggerLevel
from connect_runtime.config.properties import java_trim
from connect_runtime.errors import NotFoundException

log = logging.getLogger(__name__)

__all__ = ["LEVELS", "ROOT_LOGGER_NAME", "LoggerLevels", "level_name", "parse_level"]

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


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class LoggerLevels:
    """Read and set logger levels by Connect's rules (module docstring). Thread-safe.

    ``manager`` is the logging hierarchy to act on (the process's by default);
    ``clock`` gives ``last_modified`` in ms.
    """

    def __init__(self, manager: logging.Manager | None = None,
                 clock: Callable[[], int] = _now_ms) -> None:
        self._manager = manager if manager is not None else logging.Logger.manager
        self._clock = clock
        self._last_modified: dict[str, int] = {}
        self._lock = threading.Lock()

    def level(self, name: str) -> LoggerLevel | None:
        """The level of the existing logger ``name``, or None if no such logger exists.

        Never creates a logger: asking about a typo must not leave one behind.
        """
        with self._lock:
            if name.lower() in _ROOT_NAMES:
                return self._level_of(self._manager.root)
            logger = self._existing().get(name)
            return None if logger is None else self._level_of(logger)

    def all_levels(self) -> dict[str, LoggerLevel]:
        """Every existing logger but those at OFF, sorted by name, root as "root"."""
        with self._lock:
            loggers = [self._manager.root, *self._existing().values()]
            levels = {self._name(logger): self._level_of(logger) for logger in loggers}
        return {name: levels[name] for name in sorted(levels) if levels[name].level != "OFF"}

    def set_level(self, namespace: str, level: str) -> list[str]:
        """Set ``namespace`` and the loggers under it to ``level``; the changed loggers' names.

        ``level`` is any text :func:`parse_level` accepts; for anything else its
        NotFoundException propagates and nothing changes.
        """
        name = parse_level(level)
        target = LEVELS[name]
        with self._lock:
            loggers = self._in_namespace(namespace)
            # Read every level before setting any: setting a parent first would
            # change the effective level its NOTSET children report.
            before = [(logger, logger.getEffectiveLevel()) for logger in loggers]
            for logger in loggers:
                logger.setLevel(target)
            changed = sorted(self._name(lg) for lg, previous in before if previous != target)
            now = self._clock()
            for changed_name in changed:
                self._last_modified[changed_name] = now
        if changed:
            log.info("Set level of namespace %s and children to %s: %s", namespace, name, changed)
        return changed

    # ----- helpers, called with the lock held

    def _existing(self) -> dict[str, logging.Logger]:
        # copy(): another thread may create a logger meanwhile, and iterating the
        # live dict would then fail; dict.copy() runs without releasing the GIL.
        return {name: node for name, node in self._manager.loggerDict.copy().items()
                if isinstance(node, logging.Logger)}

    def _in_namespace(self, namespace: str) -> list[logging.Logger]:
        existing = self._existing()
        if namespace.lower() in _ROOT_NAMES:
            return [self._manager.root, *existing.values()]
        loggers = [logger for name, logger in existing.items() if name.startswith(namespace)]
        if namespace not in existing:
            loggers.append(self._manager.getLogger(namespace))
        return loggers

    def _name(self, logger: logging.Logger) -> str:
        return ROOT_LOGGER_NAME if logger is self._manager.root else logger.name

    def _level_of(self, logger: logging.Logger) -> LoggerLevel:
        return LoggerLevel(level_name(logger.getEffectiveLevel()),
                           self._last_modified.get(self._name(logger)))
