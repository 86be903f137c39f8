"""Secrets never leave the machine: bundles and reports are shared with strangers.

Four rules, applied by redact_tree to every string a bundle or report holds, keys and values alike:
- by name: the value of a secret-looking name (HF_TOKEN, AWS_SECRET_ACCESS_KEY, db_password, hfToken, sig) is
  replaced, whether it is a dict entry or a `NAME=value` / `NAME: value` / `"name": "value"` / `--name=value` inside
  a tool's output, at any position (also behind another `NAME=`, inside a quoted string, in a URL's query). The
  value runs to the end of its line (spaces, `;`, `,` and `}` included), or to its closing quote when quoted, or to
  the closing `"` of the JSON string it sits in, or to the next `&` in a URL query, or past a JSON scalar after a
  quoted key. Two bare names count only with a credential-shaped value: `key` (kaggle.json, a `?key=` query) and
  `pwd` (ODBC's `Pwd=`; PWD=/a/path is the working folder). An auth scheme word (`Bearer x`, `token x`) is kept.
- by shape: tokens recognisable anywhere (Hugging Face, GitHub classic and fine-grained, GitLab, AWS key ids,
  Slack tokens and webhook URLs, Discord webhooks, OpenAI/Anthropic, Stripe, npm, PyPI, Google API keys,
  Databricks, SendGrid, JWTs, Bearer/Basic/Token headers);
- private key blocks: PEM (`-----BEGIN ... PRIVATE KEY-----`) and PGP (`... PRIVATE KEY BLOCK-----`), up to their
  END line (or the end of the text, when it was cut);
- URLs: the password of scheme://user:password@host goes (an empty user, a `/`, `:` or `@` in it too), and a
  user name that is itself a credential (a 40-hex token, a DSN's key); the host and a port stay.

Linear time, whatever the input. Each pass is a loop of `search` calls from where the last one ended, with
patterns that can only start at the beginning of a run of their own characters (a lookbehind on that class) and
read it possessively; the text a handler looks at past a match is either replaced (consumed) or remembered
(the URL authority), never read again from a later position. Most passes search only the lines that hold a
literal every match of theirs holds (a secret word of a name, "://", a tool's name), found with one str.find scan
of the text per literal: the rest of the text costs no regex step. A Meter passed to redact_value counts the
characters handed to each call, so tests can check that the work is a small multiple of the input
(tests/test_redact_linear.py; the wall time is benchmarks/bench_redact.py's).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Mapping

from rocmcheck.safe.text import normalize

REDACTED = "<redacted>"

# Name parts that mark a secret (split on _ - . and camelCase): HF_TOKEN, db-password, hfToken, GITLAB_PAT.
_SECRET_PARTS = {"TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASS", "PASSPHRASE", "PAT",
                 "APIKEY", "CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH", "AUTHORIZATION", "COOKIE", "PRIVATE",
                 "SIGNATURE", "SAS", "SIG"}
# The same words inside a name written without separators (GITHUBTOKEN, mysecret, DBPASSWORD, awsaccesskey).
_SECRET_INSIDE = re.compile(r"SECRET|PASSW|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|AUTH_?TOKEN|TOKEN$", re.I)
# Names with those words that are not secrets: tokenizer settings, token counts and rates.
_NOT_SECRET = re.compile(r"^(?:[A-Z]+_)?(?:BOS|EOS|PAD|UNK|SEP|CLS|MASK)_TOKEN|TOKEN_IDS?$|TOKENS?_PER|NUM_TOKENS|"
                         r"MAX_(?:NEW_)?TOKENS?|TOKENIZER|^PASS(?:ED)?$|BYPASS|(?:PER|FIRST|NEXT|LAST|EACH)_TOKEN",
                         re.I)
_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# Bare names that are secret only with a credential-shaped value (or, for key, in a URL query).
_KEY_NAMES = {"KEY"}
_PWD_NAMES = {"PWD"}
# A value that is itself a credential: one word of 20 to 256 token characters, letters and digits both (hex,
# base64); a dotted name (model.layers.0.weight) is not one.
MAX_CREDENTIAL_CHARS = 256
_CREDENTIAL = re.compile(r"(?=[A-Za-z0-9_~+/=-]*?[0-9])(?=[A-Za-z0-9_~+/=-]*?[A-Za-z])[A-Za-z0-9_~+/=-]{20,256}")
_AUTH_SCHEME = re.compile(r"(?:bearer|basic|token|digest|negotiate|bot)[ \t]+", re.I)


class Meter:
    """Counts the characters redact_value hands to each regex call and each handler reads (tests only)."""

    def __init__(self) -> None:
        self.steps = 0

    def add(self, n: int) -> None:
        self.steps += max(0, n) + 1


class _NoMeter(Meter):
    def add(self, n: int) -> None:
        pass


_NO_METER = _NoMeter()


def is_secret_name(name: str) -> bool:
    if _NOT_SECRET.search(name):
        return False
    parts = [p.upper() for p in _PARTS.findall(name)]
    if any(p in _SECRET_PARTS for p in parts):
        return True
    if len(parts) > 1 and parts[-1] in ("KEY", "KEYS"):  # API_KEY, SSH_KEY, HF-KEY; not a bare "key"
        return True
    return bool(_SECRET_INSIDE.search(name.replace("-", "_")))


def is_secret_pair(name: str, value: object) -> bool:
    """Whether `name: value` holds a secret: by its name, or a bare `key` / `pwd` whose value is a credential
    (kaggle.json's {"key": "<32 hex>"}, ODBC's Pwd=...) and not a word or a folder."""
    if is_secret_name(name):
        return True
    if not isinstance(value, str) or not value:
        return False
    bare = name.strip("-").upper()
    if bare in _KEY_NAMES:
        return _CREDENTIAL.fullmatch(value) is not None
    if bare in _PWD_NAMES:
        return value[0] not in "/~"
    return False


# ---------------------------------------------------------------- the passes

_Handler = Callable[[str, "re.Match[str]", Meter], "tuple[int, int, str, int] | None"]


def _rewrite(text: str, trigger: re.Pattern[str], handle: _Handler, meter: Meter, start: int = 0,
             lines: list[tuple[int, int]] | None = None) -> str:
    """Search trigger from where the last match (or what its handler consumed) ended, from `start` on (no match
    can begin before it); a handler returns (start, end, replacement, resume) for text[start:end], or None to go
    on after its match. `lines`: the only lines (start, end of each, in order: _lines_holding) where a match can
    begin and end, where the caller knows that; the rest of the text is not searched."""
    out: list[str] = []
    pos, copied = start, 0
    at_line = 0
    while True:
        if lines is None:
            match = trigger.search(text, pos)
            meter.add((match.end() if match else len(text)) - pos)
        else:
            match = None
            while at_line < len(lines) and match is None:
                line_start, line_end = lines[at_line]
                if line_end >= pos:
                    match = trigger.search(text, max(pos, line_start), line_end + 1)
                    meter.add((match.end() if match else line_end + 1) - max(pos, line_start))
                if match is None:
                    at_line += 1
        if match is None:
            break
        found = handle(text, match, meter)
        if found is None:
            pos = match.end()
            continue
        start, end, replacement, resume = found
        out.append(text[copied:start])
        out.append(replacement)
        copied = end
        pos = max(resume, match.end())
    if not out:
        return text
    out.append(text[copied:])
    return "".join(out)


def _lines_holding(text: str, literals: tuple[str, ...], meter: Meter, start: int = 0,
                   not_followed: dict[str, str] | None = None) -> list[tuple[int, int]]:
    """(start, end) of each line of text[start:] holding one of the literals, in order; `end` is the line's newline
    (or the end of the text). An occurrence of a literal followed by not_followed[literal] does not count. Each
    literal's search goes on after the line it was found in, so the text is read once per literal (str.find, not
    counted by the meter; the lines found are)."""
    found: set[tuple[int, int]] = set()
    size = len(text)
    for lit in literals:
        skip = (not_followed or {}).get(lit)
        at = text.find(lit, start)
        while at >= 0:
            if skip is not None and text.startswith(skip, at + len(lit)):
                meter.add(len(lit))
                at = text.find(lit, at + 1)
                continue
            line_start = text.rfind("\n", start, at) + 1 or start
            line_end = text.find("\n", at)
            line_end = size if line_end < 0 else line_end
            meter.add(line_end - line_start)
            found.add((max(line_start, start), line_end))
            at = text.find(lit, line_end + 1)
    return sorted(found)


def _run(pattern: re.Pattern[str], text: str, pos: int, meter: Meter) -> int:
    """The end of `pattern` (a possessive run, which always matches) read from pos."""
    end = pattern.match(text, pos).end()  # type: ignore[union-attr]
    meter.add(end - pos)
    return end


# Private key blocks: the header's label is read once; the END line is looked for forward only.
_PEM_BEGIN = re.compile(r"-----BEGIN ")
_PEM_LABEL = re.compile(r"[A-Z0-9 ]*+")
_PEM_END = "-----END "


def _pem(text: str, match: re.Match[str], meter: Meter) -> tuple[int, int, str, int] | None:
    label_end = _run(_PEM_LABEL, text, match.end(), meter)
    label = text[match.end():label_end]
    if not (label.endswith("PRIVATE KEY") or label.endswith("PRIVATE KEY BLOCK")) or \
            not text.startswith("-----", label_end):
        return None
    body = label_end + 5
    search = body
    while True:
        end = text.find(_PEM_END, search)
        meter.add((end if end >= 0 else len(text)) - search)
        if end < 0:
            return body, len(text), f" {REDACTED}", len(text)  # cut: the rest of the text is the key
        end_label = _run(_PEM_LABEL, text, end + len(_PEM_END), meter)
        if "PRIVATE KEY" in text[end + len(_PEM_END):end_label]:
            return body, end, f"\n{REDACTED}\n", end
        search = end + len(_PEM_END)


# Token shapes (prefixes documented by their issuers). Each body is one run of its class read greedily after a
# literal prefix; a start needs a non-word character before it, so no start falls inside a body of its own class
# (the JWT's segments hold "-", so a JWT also needs no "-" before it). Colour codes are gone before this pass
# (normalize). The lookahead on the first characters of the prefixes lets most positions fail at once.
_TOKEN_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_])(?=[hgGAxsrpndSeyo1LlfaPNt])(?:"
    r"hf_[A-Za-z0-9]{20,}+"  # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{20,}+|github_pat_[A-Za-z0-9_]{20,}+"  # GitHub classic and fine-grained
    r"|gl(?:pat|dt|rt|ptt|oas|cbt|imt|ft|soat|agent)-[A-Za-z0-9_.-]{16,}+|GR1348941[A-Za-z0-9_-]{16,}+"  # GitLab
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}"  # AWS key ids
    r"|xox[abeprs]-[A-Za-z0-9-]{10,}+|xapp-[A-Za-z0-9-]{10,}+"  # Slack
    r"|sk-[A-Za-z0-9_-]{20,}+"  # OpenAI (sk-proj-...), Anthropic (sk-ant-...)
    r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}+"  # Stripe
    r"|npm_[A-Za-z0-9]{30,}+|pypi-[A-Za-z0-9_-]{50,}+"  # npm, PyPI upload tokens
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|dapi[0-9a-f]{32}(?:-[0-9]+)?"  # Databricks personal access tokens
    r"|SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"  # SendGrid API keys
    r"|(?<!-)eyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+"  # JSON web tokens
    r"|ya29\.[A-Za-z0-9_-]{20,}+|1//0[A-Za-z0-9_-]{30,}+"  # Google OAuth access and refresh tokens
    r"|GOCSPX-[A-Za-z0-9_-]{20,}+"  # Google OAuth client secrets
    r"|(?:LTAI|AKID)[A-Za-z0-9]{12,}+"  # Alibaba Cloud and Tencent Cloud access key ids
    r"|do[por]_v1_[a-f0-9]{64}"  # DigitalOcean
    r"|dckr_pat_[A-Za-z0-9_-]{20,}+"  # Docker Hub personal access tokens
    r"|nvapi-[A-Za-z0-9_-]{40,}+"  # NVIDIA NGC / build.nvidia.com API keys
    r"|api_org_[A-Za-z0-9]{20,}+"  # Hugging Face organisation tokens (older)
    r"|r8_[A-Za-z0-9]{30,}+|gsk_[A-Za-z0-9]{40,}+|pplx-[A-Za-z0-9]{40,}+|fw_[A-Za-z0-9]{20,}+"  # Replicate,
    # Groq, Perplexity, Fireworks AI
    r"|hv[sb]\.[A-Za-z0-9_-]{24,}+"  # HashiCorp Vault
    r"|pul-[a-f0-9]{40}|glsa_[A-Za-z0-9_]{32,}+|glc_[A-Za-z0-9+/=]{32,}+"  # Pulumi, Grafana
    r"|PMAK-[A-Za-z0-9-]{30,}+|NRAK-[A-Z0-9]{27}|sntry[su]_[A-Za-z0-9+/=_]{30,}+"  # Postman, New Relic, Sentry
    r"|tskey-[a-z]+-[A-Za-z0-9-]{10,}+|lin_api_[A-Za-z0-9]{30,}+|ntn_[A-Za-z0-9]{30,}+"  # Tailscale, Linear,
    # Notion
    r"|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}|ATATT3[A-Za-z0-9_=-]{50,}+|AGE-SECRET-KEY-1[0-9A-Z]{50,}+"  # Shopify,
    # Atlassian, age
    r")"
)
# Shapes with no fixed first letter, each looked for only when its marker is in the text.
_MARKED_SHAPES = (
    ("8Q~", re.compile(r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.-]{3}8Q~[A-Za-z0-9_~.-]{31,}+")),  # Microsoft Entra
    # (Azure AD) client secrets
    (".atlasv1.", re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_-]{60,}+")),  # Terraform Cloud
)
# Webhook URLs whose path is the credential: the host and the kind stay.
_WEBHOOK = re.compile(r"(?:hooks\.slack(?:-gov)?\.com/(?:services|workflows|triggers)/"
                      r"|discord(?:app)?\.com/api/webhooks/)(?=[A-Za-z0-9_-])")
_WEBHOOK_PATH = re.compile(r"[A-Za-z0-9_/-]*+")
_AUTH_HEADER = re.compile(r"(?<![A-Za-z0-9_])(?:Bearer|Basic|Token)\s++(?=[A-Za-z0-9._~+/=-]{12})")
_AUTH_CREDENTIAL = re.compile(r"[A-Za-z0-9._~+/=-]*+")


def _whole(text: str, match: re.Match[str], meter: Meter) -> tuple[int, int, str, int]:
    return match.start(), match.end(), REDACTED, match.end()


def _after(body: re.Pattern[str]) -> _Handler:
    """Replace the run of `body` that follows the match (the match itself stays)."""
    def handle(text: str, match: re.Match[str], meter: Meter) -> tuple[int, int, str, int]:
        end = _run(body, text, match.end(), meter)
        return match.end(), end, REDACTED, end
    return handle


# URLs: a scheme starts only at the beginning of a run of scheme characters. The authority part (up to
# whitespace, a quote, < > `, ? or #) is where a password can be; its last "@" ends the user information (so a
# password may hold "@", "/" and ":"). Later schemes inside the same authority reuse what was found for it.
_URL_START = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*+://")
_URL_AUTHORITY = re.compile(r"[^\s\"'<>`?#]*+")
_PORT_THEN_PATH = re.compile(r"[0-9]{1,5}/")


class _UrlPass:
    """One decision per authority: the first scheme in it decides (or, when its user part holds a "/", the last
    "://" before the "@"); later schemes inside an authority already decided are passed over."""

    def __init__(self) -> None:
        self.decided_to = -1  # the end of the last authority decided

    def __call__(self, text: str, match: re.Match[str], meter: Meter) -> tuple[int, int, str, int] | None:
        start = match.end()
        if start < self.decided_to:
            return None
        end = self.decided_to = _run(_URL_AUTHORITY, text, start, meter)
        at = text.rfind("@", start, end)
        meter.add(end - start)
        if at < 0:
            return None
        found = _userinfo(text, start, at)
        if found is None:
            inner = text.rfind("://", start, at)  # x://a/y://user:password@host: the inner URL's user information
            found = _userinfo(text, inner + 3, at) if inner >= 0 else None
        return found


def _userinfo(text: str, start: int, at: int) -> tuple[int, int, str, int] | None:
    """The password (or a user name that is a credential) in text[start:at], the part before a URL's last "@"."""
    userinfo = text[start:at]
    first_at = userinfo.find("@")
    colon = userinfo.find(":")
    if first_at >= 0 and (colon < 0 or first_at < colon):  # user@host...@: the user is before the first @
        at, userinfo, colon = start + first_at, userinfo[:first_at], -1
    if colon < 0:  # a user name alone: a credential only when it looks like one (a token, a DSN's key)
        if _CREDENTIAL.fullmatch(userinfo) is None:
            return None
        return start, at, REDACTED, at + 1
    user, password = userinfo[:colon], userinfo[colon + 1:]
    if "/" in user or not password or password == REDACTED or _PORT_THEN_PATH.match(password):
        return None  # host/path, an empty password, done already, or host:port/path@...
    return start + colon + 1, at, REDACTED, at + 1


# NAME=value: a name starts only at the beginning of a run of name characters, and only a name holding one of
# the secret words is looked at (the lookahead reads the run once more). "--name" (a command-line flag) counts.
_SECRET_HINT = r"(?i:tok|secret|pass|pat(?!h)|key|cred|auth|cookie|private|sig|sas|pwd)"  # PATH is no hint
# The same words, lower-case: a line holding none of them (lower-cased; "pat" before "h" is none) holds no such name.
_SECRET_HINTS = ("tok", "secret", "pass", "pat", "key", "cred", "auth", "cookie", "private", "sig", "sas", "pwd")
_NAME_SEP = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<name>-{0,2}(?=[A-Za-z0-9_.-]*?" + _SECRET_HINT + r")[A-Za-z_][A-Za-z0-9_.-]*+)"
    r"(?P<sep>[\"']?[ \t]*+[=:][ \t]*+|[ \t]++(?=[^\s-]))"  # an option's value may follow a space
)
_DOUBLE_QUOTED = re.compile(r'(?:[^"\\\n]|\\.)*+')  # up to an unescaped " or the end of the line
_SINGLE_QUOTED = re.compile(r"[^'\n]*+")
_QUERY_VALUE = re.compile(r"[^&#\s\"'<>]*+")
_JSON_SCALAR = re.compile(r"[^,}\]\s]*+")
_WORD = re.compile(r"\S*+")  # a command-line flag's value
# A JSON object or array under a secret key, read to its matching bracket (strings skipped whole), across lines.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*+"|[{\[]|[}\]]|[^"{}\[\]]++|"', re.S)
_LINE = re.compile(r"[^\r\n]*+")
_QUOTE_OR_ESCAPE = re.compile(r'\\[^\n]|"')
_CREDENTIAL_RUN = re.compile(r"[A-Za-z0-9_~+/=-]*+")
_LAST_DIGIT = re.compile(r".*[0-9]", re.S)
_LAST_LETTER = re.compile(r".*[A-Za-z]", re.S)


class _AssignmentPass:
    """Tracks whether the position reached is inside a double-quoted string of its line (a JSON string that
    quotes `password=...`), counting unescaped quotes over the text read since the last match."""

    def __init__(self) -> None:
        self.counted_to = 0
        self.in_string = False
        # The last run of credential characters read for a bare `key`, and where its last digit and letter are:
        # a later `key=` inside the same run (key=a/key=a/...) is answered from them, not by reading it again.
        self.run = (-1, -1)
        self.last_digit = self.last_letter = -1

    def _credential_at(self, text: str, start: int, meter: Meter) -> bool:
        """Whether text[start:] begins with a credential that runs to the end of its word (_CREDENTIAL)."""
        if not self.run[0] <= start < self.run[1]:
            end = _run(_CREDENTIAL_RUN, text, start, meter)
            self.run = (start, end)
            digit, letter = _LAST_DIGIT.match(text, start, end), _LAST_LETTER.match(text, start, end)
            meter.add(2 * (end - start))
            self.last_digit = digit.end() - 1 if digit else -1
            self.last_letter = letter.end() - 1 if letter else -1
        length = self.run[1] - start
        return (20 <= length <= MAX_CREDENTIAL_CHARS and self.last_digit >= start and self.last_letter >= start
                and not text.startswith(".", self.run[1]))

    def _advance(self, text: str, upto: int, meter: Meter) -> None:
        if upto <= self.counted_to:
            return
        meter.add(upto - self.counted_to)
        start = self.counted_to
        newline = text.rfind("\n", start, upto)
        if newline >= 0:  # a line ends a string: count from the last line's start (an escape never spans one)
            self.in_string, start = False, newline + 1
        if _QUOTE_OR_ESCAPE.findall(text, start, upto).count('"') % 2:
            self.in_string = not self.in_string
        self.counted_to = upto

    def __call__(self, text: str, match: re.Match[str], meter: Meter) -> tuple[int, int, str, int] | None:
        name, sep, start = match.group("name"), match.group("sep"), match.end()
        if not sep.strip():  # `--hub_token X`: an option whose name says secret, its next word
            if not name.startswith("-"):
                return None
            if is_secret_name(name.lstrip("-")):
                return _value_word(text, start, meter)
            found = _value_word(text, start, meter) if name.lstrip("-").upper() in _KEY_NAMES else None
            if found is None or _CREDENTIAL.fullmatch(text, found[0], found[1]) is None:
                return None  # `--key 2` (sort's), `--key name`: only a credential-shaped value after a bare --key
            return found
        if ":" in sep and text.startswith("//", start) or text.startswith("://", max(0, match.start() - 3)):
            return None  # scheme://, or a URL's user:password (the URL pass's business), not an assignment
        before = text[match.start() - 1] if match.start() else ""
        query = before in ("?", "&")
        bare = name.strip("-").upper()
        if not is_secret_name(name):
            if bare in _KEY_NAMES and not query:
                if not self._credential_at(text, start + 1 if text[start:start + 1] in ("'", '"') else start, meter):
                    return None
            elif bare in _PWD_NAMES:
                if start >= len(text) or text[start] in "/~\r\n":
                    return None
            elif not (query and bare in _KEY_NAMES):
                return None
        self._advance(text, match.start(), meter)
        quote = text[start:start + 1]
        if quote in ("'", '"'):
            body = _run(_DOUBLE_QUOTED if quote == '"' else _SINGLE_QUOTED, text, start + 1, meter)
            value_start, value_end = start + 1, body
            resume = body + 1 if text.startswith(quote, body) else body
        elif quote in ("{", "[") and sep[:1] in ("'", '"') and before == sep[:1]:  # "credentials": {...}
            value_start, value_end = start, _json_container_end(text, start, meter)
            resume = value_end
        else:
            form = (_QUERY_VALUE if query else _WORD if name.startswith("-")
                    else _JSON_SCALAR if sep[:1] in ("'", '"') and before == sep[:1]
                    else _DOUBLE_QUOTED if self.in_string else _LINE)
            value_start = start
            value_end = resume = _run(form, text, start, meter)
        scheme = _AUTH_SCHEME.match(text, value_start, value_end)
        if scheme is not None:
            value_start = scheme.end()
        if value_end <= value_start or text.startswith(REDACTED, value_start):
            return None  # nothing there, or redacted already (an auth header's credential)
        return value_start, value_end, REDACTED, resume


def _value_word(text: str, start: int, meter: Meter) -> tuple[int, int, str, int] | None:
    """The word (or quoted string) at text[start:] replaced; None when it is empty or redacted already."""
    quote = text[start:start + 1]
    if quote in ("'", '"'):
        end = _run(_DOUBLE_QUOTED if quote == '"' else _SINGLE_QUOTED, text, start + 1, meter)
        value_start, resume = start + 1, end + 1 if text.startswith(quote, end) else end
    else:
        value_start = start
        end = resume = _run(_WORD_UNQUOTED, text, start, meter)
    if end <= value_start or text.startswith(REDACTED, value_start):
        return None
    return value_start, end, REDACTED, resume


_WORD_UNQUOTED = re.compile(r"[^\s'\"]*+")

# Tools that take a password as the word after `-p` (or glued to it: mysql -pSECRET, sshpass -pSECRET), or after
# `--password`/`--password-stdin`-less forms: docker/podman/nerdctl/buildah/skopeo/helm/oras `login`, sshpass,
# the MySQL and MariaDB clients. The rest of the tool's line is read once for that option.
_PASSWORD_TOOL = re.compile(
    r"(?<![A-Za-z0-9_.-])(?:sshpass|mysql(?:dump|admin|import|show|check)?|mariadb(?:-dump|-admin)?"
    r"|(?:docker|podman|nerdctl|buildah|skopeo|helm(?:[ \t]++registry)?|oras|crane|regctl|apptainer|singularity)"
    r"[ \t]++(?:[A-Za-z-]++[ \t]++)??login)(?![A-Za-z0-9_.-])"
)
_TOOL_LINE = re.compile(r"[^\n;|&]*+")
_PASSWORD_OPTION = re.compile(r"(?<!\S)(?:-p|--password(?:=|[ \t]++))[ \t]*+")


class _PasswordToolPass:
    """`-p X` on a password tool's line (or another option); the part of a line read without finding one is not
    read again."""

    def __init__(self, option: re.Pattern[str] | None = None) -> None:
        self.read_to = -1
        self.option = option or _PASSWORD_OPTION

    def __call__(self, text: str, match: re.Match[str], meter: Meter) -> tuple[int, int, str, int] | None:
        if match.end() < self.read_to:
            return None
        line_end = _run(_TOOL_LINE, text, match.end(), meter)
        option = self.option.search(text, match.end(), line_end)
        meter.add(line_end - match.end())
        if option is None:
            self.read_to = line_end
            return None
        return _value_word(text, option.end(), meter) or (option.end(), option.end(), "", option.end())


# Where the password-tool and user-option passes can first match: a tool's name or one of the options.
_TOOL_GATE = re.compile(r"(?<!\S)(?:-[uUp]|--user|--proxy-user|--password)|sshpass|mysql|mariadb|login")
# Every match of _TOOL_GATE, _PASSWORD_TOOL and _USER_OPTION holds one of these (each on one line).
_TOOL_GATE_LITERALS = ("-u", "-U", "-p", "sshpass", "mysql", "mariadb", "login")
_PASSWORD_TOOL_LITERALS = ("sshpass", "mysql", "mariadb", "login")

# `curl -u user:password` (also --user, --proxy-user, -U, and glued: -ualice:pw): the password half goes. A
# numeric second half is a uid:gid (docker run -u 1000:1000), not a password.
_USER_OPTION = re.compile(r"(?<!\S)(?:-u|-U|--user|--proxy-user)(?:=|[ \t]*+)(?=['\"]?[^\s:'\"]*+:)")
_USER_NAME = re.compile(r"[^\s:'\"]*+:")
_DIGITS_WORD = re.compile(r"[0-9]++(?=[\s'\"]|$)")


def _user_option(text: str, match: re.Match[str], meter: Meter) -> tuple[int, int, str, int] | None:
    start = match.end() + (1 if text[match.end():match.end() + 1] in ("'", '"') else 0)
    colon = _run(_USER_NAME, text, start, meter)
    if _DIGITS_WORD.match(text, colon):
        return None
    quote = text[start - 1] if start > match.end() else ""
    end = _run(_SINGLE_QUOTED if quote == "'" else _DOUBLE_QUOTED if quote == '"' else _WORD_UNQUOTED,
               text, colon, meter)
    if end <= colon or text.startswith(REDACTED, colon):
        return None
    return colon, end, REDACTED, end


# netrc (~/.netrc, what `wandb login` and `huggingface-cli login` write): `password X` on a line that starts with
# it, or after a `machine NAME`/`default` on its line (`machine api.wandb.ai login user password X`).
# Elsewhere on a line (`sshpass`-less scripts, `echo password X`) the word after `password` goes unless it is a
# plain lower-case word ("the password is wrong").
_NETRC = re.compile(r"(?m)(?P<lead>^[ \t]*+)?(?<![^\s\"'(=:])(?:password|passwd)[ \t]++(?=\S)")
_PROSE_WORD = re.compile(r"[a-z]++[.,;:!?]?(?=\s|$)")
_NETRC_MACHINE = re.compile(r"(?<![A-Za-z0-9_.-])(?:machine[ \t]++\S++|default)(?=[ \t])")
_NETRC_PASSWORD = re.compile(r"(?<!\S)(?:password|passwd)[ \t]++(?=\S)")


def _netrc(text: str, match: re.Match[str], meter: Meter) -> tuple[int, int, str, int] | None:
    if match.group("lead") is None and _PROSE_WORD.match(text, match.end()):
        return None
    return _value_word(text, match.end(), meter)


def _json_container_end(text: str, start: int, meter: Meter) -> int:
    """The end of the JSON object or array opening at text[start], or the end of the text when it is not closed."""
    depth = 0
    for token in _JSON_TOKEN.finditer(text, start):
        meter.add(token.end() - token.start())
        mark = token.group()
        if mark in ("{", "["):
            depth += 1
        elif mark in ("}", "]"):
            depth -= 1
            if depth == 0:
                return token.end()
    return len(text)


def redact_value(value: str, meter: Meter | None = None) -> str:
    """A string normalized (rocmcheck.safe.text.normalize: no escape sequence or invisible character can split a
    token), then with token-shaped values, URL passwords, auth headers, private keys, the values of secret-looking
    NAME=value assignments and options, tools' password options and netrc passwords replaced by <redacted>.
    Linear in len(value) (see the module)."""
    if not value:
        return value
    meter = meter or _NO_METER
    out = normalize(value)
    if "-----BEGIN " in out:
        out = _rewrite(out, _PEM_BEGIN, _pem, meter)
    if "://" in out:  # before the token shapes: a token as a URL's user still has its password read
        out = _rewrite(out, _URL_START, _UrlPass(), meter, lines=_lines_holding(out, ("://",), meter))
    out = _rewrite(out, _TOKEN_SHAPES, _whole, meter)
    for marker, shape in _MARKED_SHAPES:
        if marker in out:
            out = _rewrite(out, shape, _whole, meter)
    if "hooks.slack" in out or "discord" in out:
        out = _rewrite(out, _WEBHOOK, _after(_WEBHOOK_PATH), meter)
    if "Bearer" in out or "Basic" in out or "Token" in out:
        out = _rewrite(out, _AUTH_HEADER, _after(_AUTH_CREDENTIAL), meter)
    if "=" in out or ":" in out or "-" in out:
        low = out.lower()  # a name's secret word is ASCII, inside the name: found in the lower-cased text
        lines = _lines_holding(low, _SECRET_HINTS, meter, not_followed={"pat": "h"}) if len(low) == len(out) \
            else None
        del low  # a copy of the whole text: not kept through the passes below
        out = _rewrite(out, _NAME_SEP, _AssignmentPass(), meter, lines=lines)
    gate = _lines_holding(out, _TOOL_GATE_LITERALS, meter)
    first = next((m for m in (_TOOL_GATE.search(out, a, b + 1) for a, b in gate) if m is not None), None)
    if first is not None:  # one scan for the words the two passes below need, from its line on
        line_start = out.rfind("\n", 0, first.start()) + 1
        out = _rewrite(out, _PASSWORD_TOOL, _PasswordToolPass(), meter, line_start,
                       _lines_holding(out, _PASSWORD_TOOL_LITERALS, meter, line_start))
        out = _rewrite(out, _USER_OPTION, _user_option, meter, line_start,
                       _lines_holding(out, ("-u", "-U"), meter, line_start))
    if "password" in out or "passwd" in out:
        out = _rewrite(out, _NETRC, _netrc, meter, lines=_lines_holding(out, ("passw",), meter))
        if "machine" in out or "default" in out:
            out = _rewrite(out, _NETRC_MACHINE, _PasswordToolPass(_NETRC_PASSWORD), meter,
                           lines=_lines_holding(out, ("machine", "default"), meter))
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
                if isinstance(key, str) and child is not None and not isinstance(child, bool) and \
                        is_secret_pair(key, child):
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
            out[key] = REDACTED if is_secret_pair(key, value) else redact_value(value)
    return dict(sorted(out.items()))


# ---------------------------------------------------------------- the public summary's identity mask

HOME_MARK = "~"
USER_MARK = "<user>"
IP_MARK = "<ip>"
# Home folders by their usual places (any user's): /home/NAME, /Users/NAME, /root, and a cluster's
# /home/GROUP/NAME-style trees keep their tail after the first level.
_HOME_PATH = re.compile(r"(?<![A-Za-z0-9_.~-])(?:/home|/Users|/export/home|/u)/[^/\s:;,'\"=]++"
                        r"|(?<![A-Za-z0-9_.-])/root(?=/|$|[\s:;,'\"])")
_IPV4 = re.compile(r"(?<![0-9.])(?:(?:25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])"
                   r"(?![0-9]|\.[0-9])")
# IPv6: a run of hex groups with "::" in it, or eight groups.
_IPV6 = re.compile(r"(?<![0-9A-Fa-f:])(?:(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}"
                   r"|(?:[0-9A-Fa-f]{1,4}:){1,6}:(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,5})?"
                   r"|::(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,6}))(?![0-9A-Fa-f:])")
MIN_USER_CHARS = 3  # a shorter user name ("ai", "me") would mask parts of ordinary words


def mask_identity(value: str, home: str | None = None, user: str | None = None) -> str:
    """value with home folders as `~` (the given home, then any /home/NAME, /Users/NAME, /root), the given user
    name as <user> (where it stands as a word of its own) and IPv4/IPv6 addresses as <ip>: what a summary pasted in
    public keeps of a variable's meaning (a path under the home folder, an address and its port) without naming
    the person or their network. Linear: a few regex passes."""
    out = value
    if home and len(home) > 1 and home != "/":
        home = home.rstrip("/")
        out = re.sub(re.escape(home) + r"(?=/|$|[\s:;,'\"=])", HOME_MARK, out)
    out = _HOME_PATH.sub(HOME_MARK, out)
    if user and len(user) >= MIN_USER_CHARS:
        out = re.sub(r"(?<![A-Za-z0-9])" + re.escape(user) + r"(?![A-Za-z0-9])", USER_MARK, out)
    if "." in out:
        out = _IPV4.sub(IP_MARK, out)
    if "::" in out or out.count(":") >= 7:
        out = _IPV6.sub(IP_MARK, out)
    return out
