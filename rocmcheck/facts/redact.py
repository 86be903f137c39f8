"""Environment capture with secret values removed: bundles and reports are shared with strangers."""

from __future__ import annotations

import re
from typing import Iterable, Mapping

REDACTED = "<redacted>"
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY|ACCESS_?KEY|PRIVATE|CREDENTIAL|AUTH|_KEY$|^KEY", re.I)
# Values that look like secrets even under an innocent name (HF tokens, GitHub tokens, AWS keys).
_SECRET_VALUE = re.compile(r"\b(hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|AKIA[0-9A-Z]{16}|sk-[A-Za-z0-9_-]{20,})\b")


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


# user:password@ inside a URL (a private HF mirror, a pip index): the password goes, the host stays readable.
_URL_CREDENTIALS = re.compile(r"([a-z][a-z0-9+.-]*://[^/\s:@]+:)[^/\s@]+@", re.I)


def redact_value(value: str) -> str:
    return _URL_CREDENTIALS.sub(rf"\1{REDACTED}@", _SECRET_VALUE.sub(REDACTED, value))


def redact_env(environ: Mapping[str, str], names: Iterable[str], prefixes: Iterable[str]) -> dict[str, str]:
    """The chosen variables (exact names or prefixes), with secret ones replaced by <redacted>."""
    wanted = set(names)
    prefixes = tuple(prefixes)
    out: dict[str, str] = {}
    for key, value in environ.items():
        if key in wanted or key.startswith(prefixes):
            out[key] = REDACTED if is_secret_name(key) else redact_value(value)
    return dict(sorted(out.items()))
