"""The cluster's KIP-507 session key, as the leader uses it.

The key itself lives in the config topic (the leader writes it, every worker
reads it); :class:`SessionKeys` decides when the leader must write a new one,
remembers keys rotated out recently, and verifies signed internal requests
against the current key or a still-accepted previous one.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable, Sequence

from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.errors import RequestSignatureException
from connect_runtime.protocol import signing
from connect_runtime.storage.config_store import SessionKey

# How long a rotated-out session key is still accepted (slots learn the new key
# from their next heartbeat answer, within a second).
PREVIOUS_KEY_GRACE_S = 300.0


class SessionKeys:
    """Rotation decision, grace period for old keys, and request verification.

    ``current`` returns the key the config topic holds now (None before the
    first one is written). ``clock`` is wall-clock seconds: key creation times
    are written to the config topic and compared by whichever worker leads
    next. ``monotonic`` times the grace period, which never leaves this process.
    Thread-safe.
    """

    def __init__(self, current: Callable[[], SessionKey | None], *, ttl_ms: int,
                 generation_algorithm: str, key_size_bits: int | None,
                 verification_algorithms: Sequence[str],
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 grace_s: float = PREVIOUS_KEY_GRACE_S) -> None:
        self._current = current
        self._ttl_ms = ttl_ms
        self._algorithm = generation_algorithm
        self._key_size_bits = key_size_bits
        self._accepted = list(verification_algorithms)
        self._clock = clock
        self._monotonic = monotonic
        self._grace_s = grace_s
        self._lock = threading.Lock()
        self._last_key: bytes | None = None
        self._recent_keys: dict[bytes, float] = {}  # rotated-out key -> accepted until

    @classmethod
    def for_worker(cls, config: WorkerConfig,
                   current: Callable[[], SessionKey | None]) -> SessionKeys:
        """Settings from the worker's ``inter.worker.*`` configs, real clocks."""
        return cls(current, ttl_ms=int(config["inter.worker.key.ttl.ms"]),
                   generation_algorithm=str(config["inter.worker.key.generation.algorithm"]),
                   key_size_bits=config.get("inter.worker.key.size"),
                   verification_algorithms=list(config["inter.worker.verification.algorithms"]))

    def next_key(self) -> SessionKey | None:
        """A freshly generated key if the leader must write one, else None.

        One is due when there is no key yet or the current one is at least
        ``ttl_ms`` old; a TTL of 0 means a key never expires.
        """
        key = self._current()
        now_ms = self._clock() * 1000
        if key is not None and (self._ttl_ms == 0 or now_ms - key.creation_ms < self._ttl_ms):
            return None
        raw = signing.generate_key(self._algorithm, self._key_size_bits)
        return SessionKey(raw, self._algorithm, int(now_ms))

    def current(self) -> tuple[bytes, str] | None:
        """(key, algorithm) of the current key, noting it (see :meth:`note`); None if none."""
        key = self._current()
        if key is None:
            return None
        self.note(key.key)
        return key.key, key.algorithm

    def current_b64(self) -> str | None:
        """The current key, base64, as slots receive it; None if there is none yet."""
        key = self.current()
        return base64.b64encode(key[0]).decode("ascii") if key else None

    def for_slots(self, tls: bool) -> tuple[str | None, str | None]:
        """What slot answers say of the current key: the key itself (base64) only
        over TLS channels, and its id (:func:`signing.key_id`) always. Over plain
        HTTP a slot reads a new key from the config topic, as workers do, so the
        key never crosses the network in clear."""
        key = self.current_b64()
        if key is None:
            return None, None
        return (key if tls else None), signing.key_id(key)

    def note(self, current: bytes | None = None) -> None:
        """Record ``current`` (default: the config topic's key) as the key in use.

        If it differs from the one noted before, that one stays accepted for
        ``grace_s``: long-running task slots signing with it are then not locked
        out before they learn the new key. Called on every key record.
        """
        if current is None:
            key = self._current()
            if key is None:
                return
            current = key.key
        with self._lock:
            now = self._monotonic()
            if self._last_key is not None and self._last_key != current:
                self._recent_keys[self._last_key] = now + self._grace_s
            self._last_key = current
            self._recent_keys = {k: t for k, t in self._recent_keys.items() if t > now}

    def verify(self, headers: dict[str, str], body: bytes) -> None:
        """Raise :class:`RequestSignatureException` unless the request is signed
        with the current key or a rotated-out one still in its grace period.

        Errors other than a signature mismatch (403) are raised as the current
        key's check gives them: missing headers or an unaccepted algorithm (400),
        no key yet (503).
        """
        key = self.current()
        try:
            signing.verify(key[0] if key else None, self._accepted, headers, body)
        except RequestSignatureException as e:
            if e.status != 403:
                raise
            with self._lock:
                now = self._monotonic()
                recent = [k for k, t in self._recent_keys.items() if t > now]
            for old in recent:
                try:
                    signing.verify(old, self._accepted, headers, body)
                    return
                except RequestSignatureException:
                    continue
            raise
