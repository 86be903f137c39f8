"""Secrets never leave the machine: bundles and reports are shared with strangers.

Three rules, applied by redact_tree to every string a bundle or report holds, keys and values alike:
- by name: the value of a secret-looking name (HF_TOKEN, AWS_SECRET_ACCESS_KEY, db_password, hfToken) is replaced,
  whether it is a dict entry or a `NAME=value` / `NAME: value` line inside a tool's output (hipconfig --full
  prints HIP_*/HSA_* variables);
- by shape: tokens recognisable anywhere (Hugging Face, GitHub classic and fine-grained, GitLab, AWS key ids,
  Slack, OpenAI/Anthropic, Stripe, npm, PyPI, Google API keys, JWTs, Bearer/Basic headers, PEM private keys);
- URLs: the password of scheme://user:password@host goes (an empty user, a `/` or `:` in it too), the host stays.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

REDACTED = "<redacted>"

# Name parts that mark a secret (split on _ - . and camelCase): HF_TOKEN, db-password, hfToken, GITLAB_PAT.
_SECRET_PARTS = {"TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASS", "PASSPHRASE", "PAT",
                 "APIKEY", "CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH", "AUTHORIZATION", "COOKIE", "PRIVATE",
                 "SIGNATURE", "SAS"}
# The same words inside a name written without separators (GITHUBTOKEN, mysecret, DBPASSWORD, awsaccesskey).
_SECRET_INSIDE = re.compile(r"SECRET|PASSW|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|AUTH_?TOKEN|TOKEN$", re.I)
# Names with those words that are not secrets: tokenizer settings and token counts.
_NOT_SECRET = re.compile(r"^(?:[A-Z]+_)?(?:BOS|EOS|PAD|UNK|SEP|CLS|MASK)_TOKEN|TOKEN_IDS?$|TOKENS?_PER|NUM_TOKENS|"
                         r"MAX_(?:NEW_)?TOKENS|TOKENIZER|^PASS(?:ED)?$|BYPASS", re.I)
_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

# Token shapes (prefixes documented by their issuers), matched anywhere in a string.
_TOKEN_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_])(?:"
    r"hf_[A-Za-z0-9]{20,}"  # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"  # GitHub classic and fine-grained
    r"|gl(?:pat|dt|rt|ptt|oas|cbt|imt|ft|soat|agent)-[A-Za-z0-9_.-]{16,}|GR1348941[A-Za-z0-9_-]{16,}"  # GitLab
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}"  # AWS key ids
    r"|xox[abeprs]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}"  # Slack
    r"|sk-[A-Za-z0-9_-]{20,}"  # OpenAI (sk-proj-...), Anthropic (sk-ant-...)
    r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_-]{50,}"  # npm, PyPI upload tokens
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # JSON web tokens
    r")"
)
_AUTH_HEADER = re.compile(r"\b(Bearer|Basic|Token)(\s+)[A-Za-z0-9._~+/=-]{12,}")
_PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S)
# scheme://[user]:password@host — the password may hold / and : (the host cannot hold @ or whitespace).
_URL_CREDENTIALS = re.compile(r"([a-z][a-z0-9+.-]*://[^\s/@:]*:)[^\s@]+@", re.I)
# NAME=value, NAME: value, NAME   :value, export NAME="value", "name": "value" inside text.
_ASSIGNMENT = re.compile(
    r"(?P<name>(?<![A-Za-z0-9_.-])[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>[\"']?[ \t]*[=:][ \t]*)"
    r"(?P<value>\"[^\"\n]*\"?|'[^'\n]*'?|[^\s\"',;}]+)"
)


def is_secret_name(name: str) -> bool:
    if _NOT_SECRET.search(name):
        return False
    parts = [p.upper() for p in _PARTS.findall(name)]
    if any(p in _SECRET_PARTS for p in parts):
        return True
    if len(parts) > 1 and parts[-1] in ("KEY", "KEYS"):  # API_KEY, SSH_KEY, HF-KEY; not a bare "key"
        return True
    return bool(_SECRET_INSIDE.search(name.replace("-", "_")))


def _assignment(match: re.Match[str]) -> str:
    value = match.group("value")
    if not is_secret_name(match.group("name")) or value.startswith("//") or value in ("Bearer", "Basic", "Token"):
        return match.group(0)  # a URL, or an auth header whose credential the header rule replaced
    quote = value[0] if value[:1] in "\"'" else ""
    return f"{match.group('name')}{match.group('sep')}{quote}{REDACTED}{quote if value.endswith(quote) and len(value) > 1 else ''}"


def redact_value(value: str) -> str:
    """A string with token-shaped values, URL passwords, auth headers, private keys and the values of
    secret-looking NAME=value assignments replaced by <redacted>."""
    if not value:
        return value
    out = _PEM.sub(f"-----BEGIN \\1PRIVATE KEY----- {REDACTED}", value)
    out = _TOKEN_SHAPES.sub(REDACTED, out)
    out = _AUTH_HEADER.sub(rf"\1\2{REDACTED}", out)
    out = _URL_CREDENTIALS.sub(rf"\1{REDACTED}@", out)
    if "=" in out or ":" in out:
        out = _ASSIGNMENT.sub(_assignment, out)
    return out


def redact_tree(value: Any) -> Any:
    """A copy of a JSON-like value with every string redacted, and every value under a secret-looking key
    replaced whole (numbers and lists too). Iterative over dicts and lists, so depth is no limit."""
    if isinstance(value, str):
        return redact_value(value)
    if not isinstance(value, (dict, list, tuple)):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]  # (source, parent container, slot in parent)
    while stack:
        node, parent, slot = stack.pop()
        if isinstance(node, dict):
            copy: dict[Any, Any] = {}
            parent[slot] = copy
            for key, child in node.items():
                new_key = redact_value(key) if isinstance(key, str) else key
                if isinstance(key, str) and is_secret_name(key) and child is not None and not isinstance(child, bool):
                    copy[new_key] = REDACTED if not isinstance(child, (dict, list)) else _redact_all(child)
                else:
                    copy[new_key] = None
                    stack.append((child, copy, new_key))
        elif isinstance(node, (list, tuple)):
            items: list[Any] = [None] * len(node)
            parent[slot] = items
            stack.extend((child, items, i) for i, child in enumerate(node))
        else:
            parent[slot] = redact_value(node) if isinstance(node, str) else node
    return root[0]


def _redact_all(value: Any) -> Any:
    """Under a secret name: keep the shape (keys, list lengths), drop every scalar."""
    if isinstance(value, dict):
        return {k: _redact_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_all(v) for v in value]
    return REDACTED


def redact_env(environ: Mapping[str, str], names: Iterable[str], prefixes: Iterable[str]) -> dict[str, str]:
    """The chosen variables (exact names or prefixes), with secret ones replaced by <redacted>."""
    wanted = set(names)
    prefixes = tuple(prefixes)
    out: dict[str, str] = {}
    for key, value in environ.items():
        if key in wanted or key.startswith(prefixes):
            out[key] = REDACTED if is_secret_name(key) else redact_value(value)
    return dict(sorted(out.items()))
