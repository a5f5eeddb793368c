"""The schemaless fast path (orjson plus byte tests) agrees with the exact encoder.

The exact encoder is checked against Kafka Connect by the vectors; here random
values that hit every difference between orjson and Jackson (floats in every
range, NaN, control characters, characters beyond U+FFFF, negative numbers,
dates in text) show the fast path never returns orjson's bytes where they differ.
"""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import pytest

from connect_runtime.converters import JsonConverter, fast_encoder
from connect_runtime.converters.java import double_text
from connect_runtime.converters.json import _finish, _plain


def _random_float(rng: random.Random) -> float:
    if rng.random() < 0.5:
        return struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
    return rng.choice((1, -1)) * rng.random() * 10 ** rng.uniform(-12, 20)


def _random_text(rng: random.Random) -> str:
    alphabet = ["a", "e", "l", "n", "u", "-", "+", ".", "0", "9", "\\", '"', "\x01", "\x1f",
                "\x7f", "é", "☃", "😀", "null", "1e-7", "0.0001"]
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 8)))


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return _random_float(rng)
    if kind == 1:
        return rng.choice([math.nan, math.inf, -math.inf, 0.0, -0.0, None, True, False])
    if kind == 2:
        return rng.randrange(-(1 << 63), 1 << 63)
    if kind in (3, 4):
        return _random_text(rng)
    if kind == 5:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {_random_text(rng): _random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


@pytest.mark.parametrize("seed", range(20))
def test_fast_path_equals_the_exact_encoder(seed: int) -> None:
    rng = random.Random(seed)
    encode = fast_encoder(JsonConverter())
    assert encode is not None
    for _ in range(200):
        value = _random_value(rng)
        assert encode(value) == _finish(_plain(value, None)), value


# orjson writes these without a '.', so only their 'e+' or 'e-' tells them apart.
ONE_DIGIT = [d * 10.0 ** e for d in (1, 2, 5, 9) for e in (-300, -20, -7, -6, 16, 17, 22, 300)]


def test_floats_in_every_range_are_written_as_java_does() -> None:
    rng = random.Random(7)
    encode = fast_encoder(JsonConverter())
    assert encode is not None
    for x in [*ONE_DIGIT, 5e-324, *(_random_float(rng) for _ in range(5000))]:
        want = double_text(x) if math.isfinite(x) else f'"{double_text(x)}"'
        assert encode([x]) == f"[{want}]".encode(), x
