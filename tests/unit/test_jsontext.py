"""fleet.jsontext.dumps_indented writes what json.dumps(indent=2, default=str) writes."""

from __future__ import annotations

import enum
import json
import random
from typing import Any

import pytest

from fleet.jsontext import dumps_indented


class Level(enum.IntEnum):
    HIGH = 3


class Opaque:
    def __str__(self) -> str:
        return "opaque"


LEAVES: list[Any] = [
    "x",
    'é\n"\\',
    "",
    1,
    -2,
    1.5,
    1e300,
    float("nan"),
    float("inf"),
    True,
    False,
    None,
    Level.HIGH,
    Opaque(),
    10**30,
]
KEYS: list[Any] = ["a", "b", 1, 2.5, True, None, "ü"]


def value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.random()
    if depth > 4 or kind < 0.4:
        return rng.choice(LEAVES)
    if kind < 0.7:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    if kind < 0.8:
        return tuple(value(rng, depth + 1) for _ in range(rng.randint(0, 3)))
    return {rng.choice(KEYS): value(rng, depth + 1) for _ in range(rng.randint(0, 5))}


def test_same_text_as_the_standard_encoder() -> None:
    rng = random.Random(25)
    for _ in range(5000):
        item = value(rng)
        assert dumps_indented(item) == json.dumps(item, indent=2, default=str)


def test_a_key_json_cannot_write_is_refused_alike() -> None:
    with pytest.raises(TypeError):
        json.dumps({(1, 2): 1}, indent=2)
    with pytest.raises(TypeError):
        dumps_indented({(1, 2): 1})


def test_written_in_pieces_the_same_text(monkeypatch: pytest.MonkeyPatch) -> None:
    import fleet.jsontext as jsontext

    monkeypatch.setattr(jsontext, "PIECE", 64)
    rng = random.Random(7)
    for _ in range(300):
        item = value(rng)
        pieces: list[str] = []
        jsontext.write_indented(item, pieces.append)
        assert "".join(pieces) == json.dumps(item, indent=2, default=str) + "\n"


def test_a_long_list_of_names_written_again_is_encoded_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A diff names the same host sets over and over: each long list of strings is encoded
    once per level, and the text is still json.dumps's, lists equal but for their items' types
    (1, 1.0, True) included."""
    from fleet import jsontext

    hosts = [f"gpu-{i:05d}" for i in range(100)]
    document = {
        "values": [{"fact": f"f{i}", "majority_hosts": list(hosts)} for i in range(50)],
        "nested": [list(hosts), list(hosts)],
        "numbers": [[1] * 40, [1.0] * 40, [True] * 40, ["1"] * 40],
    }
    encoded: list[int] = []
    flat = jsontext._flat

    def counted(value: Any, *args: Any) -> str:
        encoded.append(len(value))
        return flat(value, *args)

    monkeypatch.setattr(jsontext, "_flat", counted)
    assert dumps_indented(document) == json.dumps(document, indent=2, default=str)
    assert encoded.count(100) == 2  # once at each of the two levels the list is written at
