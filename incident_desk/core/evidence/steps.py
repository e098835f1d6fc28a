"""Where a metric series stepped: the one split of its points that best tells a level before from a level after.

Prefix sums give every split's two means and the spread around them in one pass (linear in the points); the step
is the split with the least spread, and it counts when the levels differ by more than ``MIN_RELATIVE`` of the
larger and by more than a few times the noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

MIN_POINTS = 4
MIN_RELATIVE = 0.2
MIN_NOISE_RATIO = 3.0


@dataclass(frozen=True)
class Step:
    at: datetime  # the first point of the new level
    before: float
    after: float

    @property
    def relative(self) -> float:
        """How big the step is against the larger of the two levels (0 to 1)."""
        top = max(abs(self.before), abs(self.after))
        return abs(self.after - self.before) / top if top else 0.0


def find_step(points: Sequence[tuple[datetime, float]]) -> Step | None:
    """The series' biggest step, or None when it holds no clear one."""
    values = [value for _, value in points if math.isfinite(value)]
    times = [at for at, value in points if math.isfinite(value)]
    count = len(values)
    if count < MIN_POINTS:
        return None
    sums, squares = [0.0], [0.0]
    for value in values:
        sums.append(sums[-1] + value)
        squares.append(squares[-1] + value * value)
    best: tuple[float, int] | None = None
    for split in range(2, count - 1):
        left, right = sums[split], sums[count] - sums[split]
        spread = (squares[split] - left * left / split) + (
            squares[count] - squares[split] - right * right / (count - split)
        )
        if best is None or spread < best[0]:
            best = (spread, split)
    if best is None:
        return None
    spread, split = best
    before, after = sums[split] / split, (sums[count] - sums[split]) / (count - split)
    noise = math.sqrt(max(spread, 0.0) / count)
    step = Step(times[split], before, after)
    if step.relative < MIN_RELATIVE or abs(after - before) < MIN_NOISE_RATIO * noise:
        return None
    return step
