"""Token lengths: a fixed value, or a seeded distribution drawn once per request.

A profile writes ``output_len = 512``, ``output_len = { uniform = [256, 768] }`` (every
integer in the range equally likely) or ``output_len = { values = [128, 512, 2048], weights =
[5, 3, 2] }``; ``input_len`` the same. Request *i* of run *k* always draws the same length for
the same seed, so a golden and the run checked against it send the same lengths, and every
request still asks for its exact length (``ignore_eos``).
"""

from __future__ import annotations

import bisect
import itertools
import random
from dataclasses import dataclass
from typing import Any

__all__ = ["Lengths", "LengthsError", "parse_lengths"]

FORMS = (
    "a positive integer (e.g. 512), { uniform = [LOW, HIGH] } (every integer from LOW to HIGH "
    "equally likely) or { values = [128, 512], weights = [3, 1] } (weights optional)"
)


class LengthsError(ValueError):
    """A length field that is none of the accepted forms; the message says which forms are."""


@dataclass(frozen=True)
class Lengths:
    """A fixed length (``values`` of one), a uniform integer range, or weighted values."""

    values: tuple[int, ...]
    weights: tuple[float, ...] = ()
    uniform: tuple[int, int] | None = None

    @classmethod
    def fixed(cls, n: int) -> Lengths:
        return cls((n,))

    @property
    def is_fixed(self) -> bool:
        return self.uniform is None and len(self.values) == 1

    @property
    def mean(self) -> float:
        if self.uniform is not None:
            return (self.uniform[0] + self.uniform[1]) / 2
        weights = self.weights or (1.0,) * len(self.values)
        return sum(v * w for v, w in zip(self.values, weights)) / sum(weights)

    @property
    def smallest(self) -> int:
        return self.uniform[0] if self.uniform is not None else min(self.values)

    @property
    def largest(self) -> int:
        return self.uniform[1] if self.uniform is not None else max(self.values)

    def draw(self, rng: random.Random) -> int:
        if self.uniform is not None:
            return rng.randint(*self.uniform)
        if len(self.values) == 1:
            return self.values[0]
        if not self.weights:
            return self.values[rng.randrange(len(self.values))]
        cumulative = list(itertools.accumulate(self.weights))
        return self.values[bisect.bisect_right(cumulative, rng.random() * cumulative[-1])]

    def describe(self) -> int | dict[str, Any]:
        """As the workload fingerprint records it: the int itself when fixed (as before)."""
        if self.uniform is not None:
            return {"uniform": list(self.uniform)}
        if len(self.values) == 1:
            return self.values[0]
        return {
            "values": list(self.values),
            **({"weights": list(self.weights)} if self.weights else {}),
        }


def parse_lengths(value: Any) -> Lengths:
    """A profile's length field as :class:`Lengths`; LengthsError says what is wrong."""
    if _is_pos_int(value):
        return Lengths.fixed(value)
    if not isinstance(value, dict) or not value:
        raise LengthsError(f"got {value!r}; expected {FORMS}")
    keys = set(value)
    if keys == {"uniform"}:
        bounds = value["uniform"]
        if not (
            isinstance(bounds, list)
            and len(bounds) == 2
            and all(_is_pos_int(b) for b in bounds)
            and bounds[0] <= bounds[1]
        ):
            raise LengthsError(
                f"'uniform' is {bounds!r}; expected [LOW, HIGH], two positive integers with "
                "LOW <= HIGH"
            )
        return Lengths((), (), (bounds[0], bounds[1]))
    if keys in ({"values"}, {"values", "weights"}):
        values = value["values"]
        if not (isinstance(values, list) and values and all(_is_pos_int(v) for v in values)):
            raise LengthsError(
                f"'values' is {values!r}; expected a non-empty list of positive integers"
            )
        weights = value.get("weights", [])
        if "weights" in value and not (
            isinstance(weights, list)
            and len(weights) == len(values)
            and all(_is_number(w) and w >= 0 for w in weights)
            and sum(weights) > 0
        ):
            raise LengthsError(
                f"'weights' is {weights!r}; expected {len(values)} non-negative numbers (one per "
                "value), not all zero"
            )
        return Lengths(tuple(values), tuple(float(w) for w in weights))
    raise LengthsError(f"has keys {sorted(keys)}; expected {FORMS}")


def _is_pos_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)
