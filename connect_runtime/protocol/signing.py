"""Signing internal REST requests with the cluster's session key (KIP-507).

A request carries ``X-Connect-Authorization`` (base64 HMAC of the raw body) and
``X-Connect-Request-Signature-Algorithm`` (a Java Mac name such as
``HmacSHA256``). Verification compares in constant time and never logs the key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from connect_runtime.errors import RequestSignatureException

AUTH_HEADER = "X-Connect-Authorization"
ALGORITHM_HEADER = "X-Connect-Request-Signature-Algorithm"

# Java Mac algorithm names -> hashlib constructors.
_DIGESTS = {
    "HmacSHA1": hashlib.sha1,
    "HmacSHA224": hashlib.sha224,
    "HmacSHA256": hashlib.sha256,
    "HmacSHA384": hashlib.sha384,
    "HmacSHA512": hashlib.sha512,
}


def generate_key(algorithm: str, size_bits: int | None = None) -> bytes:
    """A fresh random key; the default size is the digest's block size, as Java's KeyGenerator."""
    if algorithm not in _DIGESTS:
        raise ValueError(f"unsupported key generation algorithm {algorithm!r}")
    size = (size_bits // 8) if size_bits else _DIGESTS[algorithm]().block_size
    return secrets.token_bytes(size)


def key_id(key_b64: str) -> str:
    """A short public name of a base64 session key (a truncated SHA-256): lets a
    slot learn over a plain channel that the key changed, without the key."""
    return hashlib.sha256(base64.b64decode(key_b64)).hexdigest()[:16]


def signature(key: bytes, algorithm: str, body: bytes) -> str:
    return base64.b64encode(hmac.new(key, body, _DIGESTS[algorithm]).digest()).decode("ascii")


def sign_headers(key_b64: str | None, algorithm: str, body: bytes) -> dict[str, str]:
    """Headers for an internal request; empty when no session key is known."""
    if not key_b64:
        return {}
    key = base64.b64decode(key_b64)
    return {AUTH_HEADER: signature(key, algorithm, body), ALGORITHM_HEADER: algorithm}


def verify(
    key: bytes | None, accepted: list[str], headers: dict[str, str], body: bytes
) -> None:
    """Raise :class:`~connect_runtime.errors.RequestSignatureException` unless
    ``headers`` sign ``body`` with ``key``."""
    lowered = {k.lower(): v for k, v in headers.items()}
    sig = lowered.get(AUTH_HEADER.lower())
    algorithm = lowered.get(ALGORITHM_HEADER.lower())
    if not sig or not algorithm:
        raise RequestSignatureException(
            400, f"Internal request missing required signature headers {AUTH_HEADER} and "
                 f"{ALGORITHM_HEADER}")
    if algorithm not in accepted or algorithm not in _DIGESTS:
        raise RequestSignatureException(
            400, f"Internal request signature algorithm {algorithm!r} is not one of the "
                 f"accepted algorithms {accepted}")
    if key is None:
        raise RequestSignatureException(
            503, "This worker has no session key yet; internal requests cannot be verified. "
                 "Retry shortly.")
    expected = signature(key, algorithm, body)
    if not hmac.compare_digest(expected.encode("ascii"), sig.encode("ascii", "replace")):
        raise RequestSignatureException(403, "Internal request signature does not match")
