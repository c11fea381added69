"""A fabric suspect whose pair moved nothing is infinitely slow: the document must stay valid JSON."""

from __future__ import annotations

import json

from fleet.fabric.blame import Suspect


def test_an_infinite_factor_is_written_as_null_not_infinity() -> None:
    suspect = Suspect("link", ("a", "b"), "0 GB/s: moved nothing", factor=float("inf"))
    text = json.dumps(suspect.to_dict(), allow_nan=False)  # raises on Infinity
    assert json.loads(text)["factor"] is None
    assert Suspect("host", ("a",), "slow", factor=3.14159).to_dict()["factor"] == 3.14
