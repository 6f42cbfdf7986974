"""Allowed ranges of float Config fields, written as their types: `gamma: UnitInterval = 0.99`.

`common.config.pytree_config` checks them whenever a Config is built; NaN is in no range.
"""

import dataclasses
import math
from typing import Annotated


@dataclasses.dataclass(frozen=True)
class Range:
    """An interval of allowed values for a float field; NaN is never in it."""

    low: float
    high: float = math.inf
    low_open: bool = False
    high_open: bool = True

    def __contains__(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def __str__(self) -> str:
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"{left}{self.low:g}, {self.high:g}{right}"


Positive = Annotated[float, Range(0.0, low_open=True)]  # (0, inf): finite, above zero
PositiveOrInf = Annotated[float, Range(0.0, low_open=True, high_open=False)]  # inf: "no limit"
NonNegative = Annotated[float, Range(0.0)]
UnitInterval = Annotated[float, Range(0.0, 1.0, high_open=False)]
PositiveFraction = Annotated[float, Range(0.0, 1.0, low_open=True, high_open=False)]
