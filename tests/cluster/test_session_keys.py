"""SessionKeys: when the leader rotates the KIP-507 key, and which keys verify."""

from __future__ import annotations

import base64

import pytest
from support.clock import FakeClock

from connect_runtime.cluster.session_keys import SessionKeys
from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.errors import RequestSignatureException
from connect_runtime.protocol import signing
from connect_runtime.storage.config_store import SessionKey

HOUR_MS = 3_600_000


class Topic:
    """Stands in for the config topic's current key."""

    def __init__(self, key: SessionKey | None = None) -> None:
        self.key = key

    def __call__(self) -> SessionKey | None:
        return self.key


def keys(topic: Topic, clock: FakeClock, ttl_ms: int = HOUR_MS, grace_s: float = 300.0,
         size_bits: int | None = None, accepted: tuple[str, ...] = ("HmacSHA256",)
         ) -> SessionKeys:
    return SessionKeys(topic, ttl_ms=ttl_ms, generation_algorithm="HmacSHA256",
                       key_size_bits=size_bits, verification_algorithms=accepted,
                       clock=clock.time, monotonic=clock.monotonic, grace_s=grace_s)


def signed(key: bytes, body: bytes, algorithm: str = "HmacSHA256") -> dict[str, str]:
    return signing.sign_headers(base64.b64encode(key).decode("ascii"), algorithm, body)


def test_a_key_is_generated_when_there_is_none() -> None:
    clock = FakeClock(1_234.5)
    key = keys(Topic(), clock).next_key()
    assert key is not None
    assert key.algorithm == "HmacSHA256"
    assert key.creation_ms == 1_234_500  # the wall clock, in ms, as the record holds it
    assert len(key.key) == 64  # HmacSHA256's block size by default


def test_the_configured_key_size_is_used() -> None:
    key = keys(Topic(), FakeClock(1_000.0), size_bits=128).next_key()
    assert key is not None and len(key.key) == 16


def test_a_key_is_rotated_once_it_reaches_its_ttl() -> None:
    clock = FakeClock(100.0)
    topic = Topic(SessionKey(b"k" * 32, "HmacSHA256", creation_ms=100_000))
    session_keys = keys(topic, clock, ttl_ms=10_000)
    clock.now = 109.999
    assert session_keys.next_key() is None
    clock.now = 110.0  # exactly ttl old: due
    fresh = session_keys.next_key()
    assert fresh is not None and fresh.key != b"k" * 32 and fresh.creation_ms == 110_000


def test_a_ttl_of_zero_never_rotates() -> None:
    clock = FakeClock(10.0 ** 9)
    topic = Topic(SessionKey(b"k" * 32, "HmacSHA256", creation_ms=0))
    assert keys(topic, clock, ttl_ms=0).next_key() is None
    topic.key = None  # ... but there must be a key at all
    assert keys(topic, clock, ttl_ms=0).next_key() is not None


def test_current_key_and_its_base64() -> None:
    topic = Topic()
    session_keys = keys(topic, FakeClock(1_000.0))
    assert session_keys.current() is None and session_keys.current_b64() is None
    topic.key = SessionKey(b"\x01\x02\x03", "HmacSHA512", 0)
    assert session_keys.current() == (b"\x01\x02\x03", "HmacSHA512")
    assert session_keys.current_b64() == "AQID"
    # Slots get the key itself only over TLS; its id either way.
    key_id = signing.key_id("AQID")
    assert session_keys.for_slots(tls=True) == ("AQID", key_id)
    assert session_keys.for_slots(tls=False) == (None, key_id)
    assert len(key_id) == 16 and key_id != signing.key_id("AQIE")


def test_requests_signed_with_the_current_key_verify() -> None:
    topic = Topic(SessionKey(b"a" * 32, "HmacSHA256", 0))
    session_keys = keys(topic, FakeClock(1_000.0))
    session_keys.verify(signed(b"a" * 32, b"body"), b"body")
    with pytest.raises(RequestSignatureException) as forged:
        session_keys.verify(signed(b"a" * 32, b"body"), b"other body")
    assert forged.value.status == 403


def test_a_rotated_out_key_is_accepted_for_the_grace_period_only() -> None:
    clock = FakeClock(0.0)
    old, new = b"o" * 32, b"n" * 32
    topic = Topic(SessionKey(old, "HmacSHA256", 0))
    session_keys = keys(topic, clock, grace_s=300.0)
    session_keys.note()  # the listener hears the first key record
    clock.now = 10.0
    topic.key = SessionKey(new, "HmacSHA256", 10_000)
    session_keys.note()  # ... and the rotation: old is accepted until 310
    session_keys.verify(signed(new, b"x"), b"x")
    clock.now = 309.0
    session_keys.verify(signed(old, b"x"), b"x")
    clock.now = 310.0
    with pytest.raises(RequestSignatureException) as expired:
        session_keys.verify(signed(old, b"x"), b"x")
    assert expired.value.status == 403


def test_a_rotation_is_noticed_by_verification_itself() -> None:
    # Without any listener call: reading the current key notes it.
    old, new = b"o" * 32, b"n" * 32
    topic = Topic(SessionKey(old, "HmacSHA256", 0))
    session_keys = keys(topic, FakeClock(1_000.0))
    session_keys.verify(signed(old, b"x"), b"x")
    topic.key = SessionKey(new, "HmacSHA256", 1)
    session_keys.verify(signed(old, b"x"), b"x")


def test_a_key_never_noted_as_current_is_not_accepted() -> None:
    topic = Topic(SessionKey(b"n" * 32, "HmacSHA256", 0))
    session_keys = keys(topic, FakeClock(1_000.0))
    session_keys.note(b"o" * 32)
    session_keys.note(b"n" * 32)  # o was current, so it is accepted for a while
    session_keys.verify(signed(b"o" * 32, b"x"), b"x")
    with pytest.raises(RequestSignatureException) as stranger:
        session_keys.verify(signed(b"s" * 32, b"x"), b"x")
    assert stranger.value.status == 403


def test_noting_the_same_key_again_does_not_extend_the_grace() -> None:
    clock = FakeClock(0.0)
    old, new = b"o" * 32, b"n" * 32
    topic = Topic(SessionKey(new, "HmacSHA256", 0))
    session_keys = keys(topic, clock, grace_s=100.0)
    session_keys.note(old)
    session_keys.note(new)  # old accepted until 100
    clock.now = 90.0
    session_keys.note(new)
    clock.now = 100.0
    with pytest.raises(RequestSignatureException):
        session_keys.verify(signed(old, b"x"), b"x")


def test_errors_other_than_a_mismatch_are_not_retried_with_old_keys() -> None:
    old = b"o" * 32
    topic = Topic()
    session_keys = keys(topic, FakeClock(1_000.0), accepted=("HmacSHA256",))
    session_keys.note(old)
    session_keys.note(b"p" * 32)  # old is now a rotated-out key in its grace period
    with pytest.raises(RequestSignatureException) as no_key:  # no current key yet
        session_keys.verify(signed(old, b"x"), b"x")
    assert no_key.value.status == 503
    topic.key = SessionKey(b"n" * 32, "HmacSHA256", 0)
    with pytest.raises(RequestSignatureException) as unsigned:
        session_keys.verify({}, b"x")
    assert unsigned.value.status == 400
    with pytest.raises(RequestSignatureException) as not_accepted:
        session_keys.verify(signed(old, b"x", "HmacSHA512"), b"x")
    assert not_accepted.value.status == 400


def test_settings_come_from_the_worker_config() -> None:
    config = WorkerConfig({
        "group.id": "g", "config.storage.topic": "c", "offset.storage.topic": "o",
        "status.storage.topic": "s", "inter.worker.key.ttl.ms": "0",
        "inter.worker.key.generation.algorithm": "HmacSHA512",
        "inter.worker.key.size": "256",
        "inter.worker.verification.algorithms": "HmacSHA256,HmacSHA512",
    })
    topic = Topic()
    session_keys = SessionKeys.for_worker(config, topic)
    key = session_keys.next_key()
    assert key is not None and key.algorithm == "HmacSHA512" and len(key.key) == 32
    topic.key = SessionKey(key.key, key.algorithm, 0)
    assert session_keys.next_key() is None  # ttl 0: never expires
    session_keys.verify(signed(key.key, b"x", "HmacSHA512"), b"x")
    session_keys.verify(signed(key.key, b"x", "HmacSHA256"), b"x")
