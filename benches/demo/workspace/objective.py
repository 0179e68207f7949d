"""Demo objective: a noisy quadratic bowl. Agents tune the constants below; lower loss is better.

The optimum is far from the defaults, and the noise (seeded by RRMA_SEED) is small, so a
baseline measured three times has a small sigma and a real improvement stands out.
"""

import math
import os
import random

X = 0.0  # first coordinate, any real number
Y = 0.0  # second coordinate
LEARNING_RATE = 0.1  # a scale parameter: the bowl's third axis is log10(LEARNING_RATE / 0.003)
DEPTH = 2  # an integer knob, best at 5

rng = random.Random(int(os.environ.get("RRMA_SEED", "0")))
loss = (X - 1.7) ** 2 + 2.0 * (Y + 0.8) ** 2 + math.log10(LEARNING_RATE / 0.003) ** 2 + 0.1 * (DEPTH - 5) ** 2
loss += rng.gauss(0.0, 0.02)
print(f"step: {DEPTH}")
print(f"loss: {loss:.6f}")
