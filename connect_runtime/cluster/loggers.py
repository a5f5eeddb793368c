"""Kafka Connect's logger admin (KIP-495, KIP-976) over Python's :mod:`logging`.

:class:`LoggerLevels` is this worker's side of ``/admin/loggers``: it reads and
sets the levels of the loggers in one :class:`logging.Manager` (the process's,
unless a test hands it another), remembers when this API last changed each, and
keeps the list of settings made (:func:`~connect_runtime.log_levels.record_setting`)
that the worker's task slots apply in their own processes.

Level names and the namespace rule are :mod:`connect_runtime.log_levels`' (the
task processes apply them too). Connect's other rules, as Kafka Connect 4.1.1
applies them:

* The loggers that exist are the root logger, named "root", and every logger
  created in the manager (``PlaceHolder`` nodes are not loggers). A logger's
  level is its effective level. "root" and "" name the root logger, in any case.
* Listing shows every existing logger, sorted by name, except those at OFF.
* The answer to a setting names the loggers whose effective level changed,
  sorted; only those get a new ``last_modified`` (ms since the epoch, the same
  for one call). Connect 4.1.1 also reports OFF loggers set to OFF again (its
  listing hides them, so it sees no old level); we report only real changes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from connect_runtime.cluster.herder_api import LoggerLevel
from connect_runtime.log_levels import (
    LEVELS,
    ROOT_LOGGER_NAME,
    LevelSetting,
    is_root,
    level_name,
    loggers_in_namespace,
    parse_level,
    record_setting,
)

log = logging.getLogger(__name__)

__all__ = ["LEVELS", "ROOT_LOGGER_NAME", "LoggerLevels", "level_name", "parse_level"]


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
        self._lock = threading.Lock()
        # Guarded by _lock, with the levels of the manager's loggers they describe.
        self._last_modified: dict[str, int] = {}
        self._settings: tuple[LevelSetting, ...] = ()

    def level(self, name: str) -> LoggerLevel | None:
        """The level of the existing logger ``name``, or None if no such logger exists.

        Never creates a logger: asking about a typo must not leave one behind.
        """
        with self._lock:
            if is_root(name):
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
        setting = LevelSetting.of(namespace, level)
        name, target = setting.level, LEVELS[setting.level]
        with self._lock:
            loggers = loggers_in_namespace(self._manager, namespace)
            # Read every level before setting any: setting a parent first would
            # change the effective level its NOTSET children report.
            before = [(logger, logger.getEffectiveLevel()) for logger in loggers]
            for logger in loggers:
                logger.setLevel(target)
            changed = sorted(self._name(lg) for lg, previous in before if previous != target)
            now = self._clock()
            for changed_name in changed:
                self._last_modified[changed_name] = now
            # Recorded even when nothing changed here: a task process may differ.
            self._settings = record_setting(self._settings, setting)
        if changed:
            log.info("Set level of namespace %s and children to %s: %s", namespace, name, changed)
        return changed

    def settings(self) -> tuple[LevelSetting, ...]:
        """The settings made so far, to replay in order in a task process (the
        earlier ones of a namespace set again left out: :func:`record_setting`)."""
        with self._lock:
            return self._settings

    # ----- helpers, called with the lock held

    def _existing(self) -> dict[str, logging.Logger]:
        # copy(): another thread may create a logger meanwhile, and iterating the
        # live dict would then fail; dict.copy() runs without releasing the GIL.
        return {name: node for name, node in self._manager.loggerDict.copy().items()
                if isinstance(node, logging.Logger)}

    def _name(self, logger: logging.Logger) -> str:
        return ROOT_LOGGER_NAME if logger is self._manager.root else logger.name

    def _level_of(self, logger: logging.Logger) -> LoggerLevel:
        return LoggerLevel(level_name(logger.getEffectiveLevel()),
                           self._last_modified.get(self._name(logger)))
