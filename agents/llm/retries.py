"""Which failed model calls an LLM agent retries, and how long it waits before the next try.

Why it exists: both providers rate-limit (429) and overload (5xx); the SDKs' own retries are off
so that every retry is one trace turn. :class:`RetryPolicy` is exponential backoff with seeded
jitter (a run replays the same waits), a server's ``retry-after`` winning, capped;
:func:`transient_status` names the HTTP statuses every provider retries.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class RetryPolicy:
    """Exponential backoff with seeded jitter; a server's retry-after wins (capped)."""

    attempts: int = 6  # total tries of one model call
    base_s: float = 1.0
    max_s: float = 60.0
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    def delay(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None and retry_after >= 0:
            return min(self.max_s, retry_after)
        return min(self.max_s, self.base_s * (2 ** retry) * (0.5 + 0.5 * self.rng.random()))


@dataclass
class Transient:
    """A failed attempt that may succeed when retried."""

    reason: str  # e.g. "rate limited (429)"
    retry_after: float | None = None


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    if not headers:
        return None
    for name in ("retry-after-ms", "retry-after"):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        return value / 1000.0 if name.endswith("-ms") else value
    return None


def transient_status(status: int, retry_after: float | None) -> Transient | None:
    """The HTTP statuses every provider retries: 429 (rate limit), 408, 409 and 5xx."""
    if status == 429:
        return Transient("rate limited (429)", retry_after)
    if status in (408, 409) or status >= 500:
        return Transient(f"server error ({status})", retry_after)
    return None
