"""Keys out of every string an LLM agent lets go: trace turns, blackboard posts, error messages.

Why it exists: a provider's error can quote the request (headers included), and a model can echo
what it was sent. :class:`Redactor` removes the agent's own configured secrets and anything shaped
like an API key or an auth header; :meth:`Redactor.error` builds an :class:`~rrma.contracts.AgentError`
from the scrubbed one-line text only, so no exception chain carries the request further.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rrma.contracts import AgentError

REDACTED = "[redacted]"
_SECRET_PATTERNS = [
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"),  # Anthropic keys
    re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_\-]{16,}"),  # OpenAI-style keys
    re.compile(r"(?i)(authorization\s*[:=]\s*['\"]?bearer\s+)[^\s'\",}]+"),
    re.compile(r"(?i)(x-api-key\s*['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+"),
    re.compile(r"(?i)(api[_-]?key\s*['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+"),
]


class Redactor:
    """Removes the configured secrets, and anything shaped like a key or auth header, from text."""

    def __init__(self, secrets: list[str | None] | None = None) -> None:
        self.secrets = sorted({s for s in (secrets or []) if s and len(s) >= 6}, key=len, reverse=True)

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= 6 and secret not in self.secrets:
            self.secrets = sorted([*self.secrets, secret], key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self.secrets:
            value = value.replace(secret, REDACTED)
        for pattern in _SECRET_PATTERNS:
            value = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + REDACTED, value)
        return value

    def value(self, value: Any) -> Any:
        """Scrub every string inside a JSON-like value."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {str(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value

    def error(self, exc: BaseException, what: str) -> AgentError:
        """An AgentError carrying only the scrubbed, one-line description of ``exc``."""
        message = " ".join(str(exc).split())[:600]
        return AgentError(self.text(f"{what}: {type(exc).__name__}: {message}"))
