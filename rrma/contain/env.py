"""One rule for the environment of every contained process: no credentials, unless named.

A trial program or a coding agent is untrusted: a credential in its environment can be printed
into its output (which lands in the run log, the export and the reviewer's screen) or used. The
rule, for every process :func:`rrma.contain.spawn.spawn` starts:

- a variable whose *name* looks like a credential is removed: one of its ``_``-separated words is
  a credential word (``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD``, ``AUTH``, ...), or a word ends
  in one of the long ones (``PGPASSWORD``, ``APIKEY``); e.g. ``HF_TOKEN``, ``GITHUB_TOKEN``,
  ``AWS_SESSION_TOKEN``, ``CLAUDE_CODE_OAUTH_TOKEN``, ``OPENAI_KEY``, ``SSH_AUTH_SOCK``;
- a variable whose *value* holds a URL with a password (``scheme://user:pass@host``, e.g.
  ``DATABASE_URL``) is removed whatever its name;
- unless the task passes it **by name** (``passed``): the one key a coding agent's tool needs,
  or a variable a task lists explicitly.

The rule errs towards removing: a harmless ``MONKEY_KEY`` goes too. Values under innocent names
cannot be recognised, and the rule does not try.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

# whole words (split on "_") that make a name a credential
CREDENTIAL_WORDS = frozenset({
    "KEY", "KEYS", "APIKEY", "TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASS",
    "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH", "OAUTH", "COOKIE", "COOKIES", "PRIVATE", "SIGNING",
    "JWT", "BEARER",
})
# a word ending in one of these is a credential too (PGPASSWORD, MYAPIKEY, GHTOKEN)
CREDENTIAL_ENDINGS = ("PASSWORD", "PASSWD", "APIKEY", "TOKEN", "SECRET", "CREDENTIALS")
# a URL with a password in it: scheme://user:password@host
PASSWORD_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@")
# names of the harness's own settings that hold no secret despite their words
NOT_CREDENTIALS = frozenset({"RRMA_TRIAL_TOKEN"})


def is_credential(name: str, value: str = "") -> bool:
    """Whether the variable ``name`` (with ``value``) is a credential under the rule above."""
    upper = name.upper()
    if upper in NOT_CREDENTIALS:
        return False
    words = [w for w in re.split(r"[^A-Z0-9]+", upper) if w]
    if any(w in CREDENTIAL_WORDS or w.endswith(CREDENTIAL_ENDINGS) for w in words):
        return True
    return bool(PASSWORD_URL.search(value))


def scrub(env: Mapping[str, str] | None = None, passed: Iterable[str] = ()) -> dict[str, str]:
    """``env`` (default: this process's) without credentials, except the names in ``passed``."""
    source = os.environ if env is None else env
    keep = set(passed)
    return {k: v for k, v in source.items() if k in keep or not is_credential(k, v)}


def removed(env: Mapping[str, str] | None = None, passed: Iterable[str] = ()) -> list[str]:
    """The names :func:`scrub` removes (for the run record: never the values)."""
    source = os.environ if env is None else env
    kept = scrub(source, passed)
    return sorted(k for k in source if k not in kept)
