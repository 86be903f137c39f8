"""No secret leaves the machine: every string of a bundle and of the report is redacted, by name and by shape,
tool outputs included; and what is not a secret (versions, paths, GPU names, rocminfo fields) stays readable."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import FIXTURES_DIR, PROJECT_FIXTURES_DIR
from fakes import env_with_path, make_tool
from hostile import cli
from hypothesis import given, settings
from hypothesis import strategies as st

from rocmcheck.facts.redact import REDACTED, is_secret_name, redact_env, redact_tree, redact_value
from rocmcheck.safe.text import normalize

# Shapes as their issuers document them (made-up values of the right length and alphabet).
TOKENS = [
    "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3f",
    "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "github_pat_11ABCDEFG0" + "a1B2c3D4e5F6g7H8i9J0k1_" + "L2m3N4o5P6q7R8s9T0u1V2w3X4y5Z6a7B8c9D0e1F2g3H4i5J6k7L8",
    "glpat-" + "xY7zA9bC1dE3fG5hI7jK",
    "AKIA" + "IOSFODNN7EXAMPLE",
    "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "sk-proj-" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "sk-ant-api03-" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "npm_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "dapi" + "0123456789abcdef0123456789abcde6",  # Databricks
    "SG." + "ngeVfQFYQlKU0ufo8x5d1A" + "." + "TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr",  # SendGrid
]


@pytest.mark.parametrize("token", TOKENS)
def test_token_shapes_are_redacted_anywhere(token):
    out = redact_value(f"error: 401 for url with {token} in it")
    assert token not in out and REDACTED in out and out.startswith("error: 401")


@pytest.mark.parametrize("colour", ["\x1b[m", "\x1b[1m", "\x1b[01;31m", "\x1b[38;5;196m"])
def test_a_coloured_token_is_redacted(colour):
    """grep --color and coloured logs put an escape sequence before the token, or inside it (grep's match starting
    mid-token): the sequences are dropped first, then the token is redacted."""
    token = TOKENS[1]
    assert redact_value(f"found {colour}{token}\x1b[0m here") == f"found {REDACTED} here"
    inside = f"found {token[:3]}{colour}\x1b[K{token[3:]}\x1b[0m here"
    assert redact_value(inside) == f"found {REDACTED} here"
    assert redact_value(f"x{token}") == f"x{token}"  # glued to a word: not a token's start (as before)


@pytest.mark.parametrize("url, kept", [
    ("https://:s3cret@mirror.example/simple", "https://:<redacted>@mirror.example/simple"),
    ("https://bob:pa/ss:w0rd@mirror.example/hf", "https://bob:<redacted>@mirror.example/hf"),
    ("https://x-access-token:abc123@github.com/o/r.git", "https://x-access-token:<redacted>@github.com/o/r.git"),
    ("https://mirror.example:8443/path?q=a:b", "https://mirror.example:8443/path?q=a:b"),
    # a password holding "@": the last "@" before the path ends it
    ("https://user:p@ssSECRET5@host/x", "https://user:<redacted>@host/x"),
    # a token as the user name (GitHub's 40 hex, a Sentry DSN's key); a plain user name stays
    ("https://0123456789abcdef0123456789abcdef01234567@github.com/o/r.git", "https://<redacted>@github.com/o/r.git"),
    ("https://9f1e2d3c4b5a69788796a5b4c3d2e1f0@o42.ingest.sentry.io/7", "https://<redacted>@o42.ingest.sentry.io/7"),
    ("https://git@github.com/o/r.git", "https://git@github.com/o/r.git"),
    ("postgresql://app@db:5432/x", "postgresql://app@db:5432/x"),
    # a port then a path with an "@" in it (npm scopes) is no password
    ("https://registry.npmjs.org:443/@babel/core", "https://registry.npmjs.org:443/@babel/core"),
])
def test_url_passwords(url, kept):
    assert redact_value(url) == kept


@pytest.mark.parametrize("name, secret", [
    ("HF_TOKEN", True), ("hfToken", True), ("GITLAB_PAT", True), ("AWS_SECRET_ACCESS_KEY", True),
    ("db_password", True), ("MY_CREDS", True), ("OPENAI_API_KEY", True), ("SSH_AUTH_SOCK", True), ("sig", True),
    ("X-Amz-Signature", True), ("X-Amz-Credential", True), ("NCCL_IB_SECRET", True), ("RCCL_AUTH_TOKEN", True),
    ("NCCL_DEBUG", False), ("TOKENIZERS_PARALLELISM", False), ("pad_token", False), ("PWD", False),
    ("HIP_PATH", False), ("max_new_tokens", False), ("key", False), ("flops_per_token", False),
    ("time_to_first_token", False), ("max_token", False),
])
def test_secret_names(name, secret):
    assert is_secret_name(name) is secret


def test_assignments_inside_tool_output():
    text = ("PATH =/usr/bin\nHIP_MY_TOKEN =abc123\nHSA_SECRET: 'xyz'\nexport FOO_PASSWORD=\"p w\"\n"
            "Authorization: Bearer abcdefghijklmnop1234\n")
    out = redact_value(text)
    for secret in ("abc123", "xyz", "p w", "abcdefghijklmnop1234"):
        assert secret not in out
    assert "PATH =/usr/bin" in out


# Each: (text as a tool, the environment or an error message shows it, the secret in it, what must stay).
LEAKS = [
    # URL query secrets: Azure SAS, S3 presigned (v4 and v2), a DSN's query password, OAuth tokens, an API key
    ("HF_ENDPOINT=https://acct.blob.core.windows.net/c?sv=2022-11-02&ss=b&sig=AzureSasSIG0123456789abc%3D&se=2026",
     "AzureSasSIG", "acct.blob.core.windows.net/c?sv=2022-11-02"),
    ("HF_HUB_URL=https://bucket.s3.amazonaws.com/x?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDCREDx%2F2026"
     "&X-Amz-Signature=S3SIGabcdef0123", "S3SIGabcdef0123", "X-Amz-Algorithm=AWS4-HMAC-SHA256"),
    ("HF_HUB_URL=https://bucket.s3.amazonaws.com/x?X-Amz-Credential=AKIDCREDx%2F2026&X-Amz-Date=1", "AKIDCREDx",
     "X-Amz-Date=1"),
    ("https://b.s3.amazonaws.com/k?AWSAccessKeyId=AKIDV2abc&Signature=V2SIGxyz%3D&Expires=1", "V2SIGxyz", "Expires=1"),
    ("HF_DSN=postgresql://app@db:5432/x?password=QueryPw27&sslmode=require", "QueryPw27", "sslmode=require"),
    ("GET https://api.example/v1?access_token=OAuthTok3n99&page=2 200", "OAuthTok3n99", "page=2 200"),
    ("https://maps.example/api?key=ApiKeyQuery123&q=x", "ApiKeyQuery123", "&q=x"),
    ("https://h/x?token=QueryTok3n#frag", "QueryTok3n", "#frag"),
    # a secret behind another NAME=
    ("HIP_AWS=aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "bPxRfiCYEXAMPLEKEY", "HIP_AWS="),
    ('HIP_CFG=password: "Quoted SECRET25 with spaces"', "SECRET25", "HIP_CFG=password"),
    ('HIP_CFG=db_password = \'single quoted SECRET26\'', "SECRET26", "HIP_CFG="),
    # lowercase and GitHub's own header forms; the scheme word stays
    ("Authorization: token ghsecret0123456789abcdef", "ghsecret0123456789abcdef", "Authorization: token"),
    ("authorization: bearer lowercaseSECRET0123456789", "lowercaseSECRET0123456789", "authorization: bearer"),
    ("curl -H 'Authorization: Bearer curlSECRETabcdef01' https://x", "curlSECRETabcdef01", "Bearer"),
    # values with spaces, ; , } (hipconfig --full prints the environment)
    ("HIP_DB_PASSWORD=p@ss;w0rdSECRET", "w0rdSECRET", "HIP_DB_PASSWORD="),
    ("HSA_SECRET=correct horse battery staple", "battery staple", "HSA_SECRET="),
    ("HIP_TOKEN=abc,defSECRET", "defSECRET", "HIP_TOKEN="),
    ("HIP_API_KEY=ab}cdSECRET", "cdSECRET", "HIP_API_KEY="),
    # private keys: PGP as well as PEM, cut ones too
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0PGPSECRETbody\n=abcd\n-----END PGP PRIVATE KEY BLOCK-----\nnext",
     "PGPSECRET", "-----END PGP PRIVATE KEY BLOCK-----\nnext"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktSSHSECRET\n-----END OPENSSH PRIVATE KEY-----", "SSHSECRET",
     "BEGIN OPENSSH PRIVATE KEY"),
    ("key file:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAcutSECRET", "cutSECRET", "key file:"),
    # ODBC, Slack and Discord webhooks, kaggle.json
    ("Driver={ODBC Driver 18};Server=db;Uid=app;Pwd=OdbcSECRET1;", "OdbcSECRET1", "Uid=app"),
    ("SLACK=https://hooks.slack.com/services/T00000000/B00000000/WebhookSECRETxxxxxxxxxxx", "WebhookSECRET",
     "https://hooks.slack.com/services/"),
    ("https://discord.com/api/webhooks/123456789012345678/DiscordSECRET_abcdef", "DiscordSECRET",
     "discord.com/api/webhooks/"),
    ('{"username":"alice","key":"0123456789abcdef0123456789abcdef"}', "0123456789abcdef0123456789abcdef",
     '"username":"alice"'),
    # an error message quoting a password, plain and inside the JSON event line that carries it
    ("ImportError: cannot connect password=hunter2hunter2 to db", "hunter2hunter2", "ImportError: cannot connect"),
    ('{"event": "probe", "probe": "torch", "data": {"error": "ImportError: x password=hunter2hunter2 y"}}',
     "hunter2hunter2", '"probe": "torch"'),
    ('{"error": "login failed: password=\\"with spaces SECRET28\\""}', "SECRET28", '{"error": "login failed'),
    # a JSON object or array under a secret key, on one line or pretty-printed: all of it, to its closing bracket
    ('{"credentials": {"value": "hunter2xyz", "n": [1, {"x": "}"}]}, "user": "bob"}', "hunter2xyz", '"user": "bob"}'),
    ('{\n  "auth": {\n    "value": "hunter2xyz"\n  },\n  "user": "bob"\n}', "hunter2xyz", '"user": "bob"\n}'),
    # a command-line flag: its value ends at the next space
    ("torchrun train.py --hf-token=FlagSECRET1 --epochs 3", "FlagSECRET1", "--epochs 3"),
]


@pytest.mark.parametrize("text, secret, kept", LEAKS, ids=[leak[1] for leak in LEAKS])
def test_secrets_are_redacted_wherever_they_sit(text, secret, kept):
    out = redact_value(text)
    assert secret not in out, out
    assert REDACTED in out and kept in out, out
    assert redact_value(out) == out  # stable: a redacted bundle redacted again is the same bundle


def test_an_event_line_stays_json_once_redacted():
    line = json.dumps({"event": "probe", "probe": "torch",
                       "data": {"installed": False, "error": "ImportError: x password=hunter2hunter2 y"}})
    event = json.loads(redact_value(line))
    assert event["data"] == {"installed": False, "error": f"ImportError: x password={REDACTED}"}


# Controls: forms that were redacted already, and must stay so.
CONTROLS = [
    ("glpat-" + "xY7zA9bC1dE3fG5hI7jK", "xY7zA9bC1dE3fG5hI7jK"),
    ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOp"),
    ("sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOp"),
    ("AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "SyA1b2C3d4E5f6G7"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==", "dXNlcjpwYXNzd29yZDEyMw"),
    ('{"headers": {"Authorization": "Basic dXNlcjpwYXNzd29yZDEyMw=="}}', "dXNlcjpwYXNzd29yZDEyMw"),
    ("//registry.npmjs.org/:_authToken=npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrSt"),
    ("//npm.example/:_authToken=plainNpmSECRET", "plainNpmSECRET"),
    ('{"auths": {"ghcr.io": {"auth": "ZG9ja2VyOmh1bnRlcjI="}}}', "ZG9ja2VyOmh1bnRlcjI"),
    ("first line\nHF_TOKEN=secondLineSECRET\nthird", "secondLineSECRET"),
    ("NCCL_IB_SECRET=ncclSECRET", "ncclSECRET"),
    ("RCCL_AUTH_TOKEN: rcclSECRET", "rcclSECRET"),
]


@pytest.mark.parametrize("text, secret", CONTROLS, ids=[c[1] for c in CONTROLS])
def test_controls_stay_redacted(text, secret):
    out = redact_value(text)
    assert secret not in out and REDACTED in out, out


@pytest.mark.parametrize("text", [
    "Marketing Name:          AMD Instinct MI300X",
    "  Uuid:                    GPU-4b8f2c9e1a7d3f60",
    "HIP version: 6.3.42131-fa1d09cbd",
    "PATH =/usr/local/sbin:/usr/bin:/opt/rocm-6.3.2/bin",
    "PWD=/home/alice/work",
    "key: value",
    "key=model.layers.0.self_attn.q_proj.weight",
    '{"key": "input_ids", "flops_per_token": 5286144, "max_new_tokens": 32}',
    "https://download.pytorch.org/whl/rocm6.2/torch-2.5.1%2Brocm6.2-cp311-cp311-linux_x86_64.whl",
    "ISA 1 Name: amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
    "pad_token: <unk>  eos_token: </s>  tokenizer: LlamaTokenizerFast",
])
def test_what_is_not_a_secret_stays_readable(text):
    assert redact_value(text) == text


def _text_fixtures() -> list[Path]:
    return sorted(p for p in FIXTURES_DIR.rglob("*.txt") if p.is_file())


@pytest.mark.parametrize("path", _text_fixtures(), ids=lambda p: str(p.relative_to(FIXTURES_DIR)))
def test_real_tool_outputs_are_left_as_they_are(path):
    """rocminfo, rocm-smi, amd-smi, nvidia-smi, hipconfig, ds_report and collect_env as their users published
    them: nothing in them is a secret, so redaction changes nothing (versions, paths, GPU names, fields) but what
    normalize drops first (nvidia-smi topo -m underlines its header with escape sequences)."""
    text = path.read_text(encoding="utf-8")
    assert redact_value(text) == normalize(text)


def test_recorded_json_reports_keep_their_numbers():
    report = json.loads((PROJECT_FIXTURES_DIR / "train" / "cpu-default-report.json").read_text(encoding="utf-8"))
    assert redact_tree(report) == report


def test_redact_tree_reaches_values_keys_and_nested_lists():
    doc = {"a": [{"password": 1234, "note": "token " + TOKENS[0]}], "api_key": {"x": ["y"]}, TOKENS[1]: "v"}
    out = json.dumps(redact_tree(doc))
    assert not any(t in out for t in TOKENS[:2]) and "1234" not in out and '"y"' not in out


def test_redact_tree_judges_a_bare_key_or_pwd_by_its_value():
    doc = {"username": "alice", "key": "0123456789abcdef0123456789abcdef", "Pwd": "odbcSECRET",
           "other": {"key": "input_ids", "PWD": "/home/alice"}}
    out = redact_tree(doc)
    assert out == {"username": "alice", "key": REDACTED, "Pwd": REDACTED,
                   "other": {"key": "input_ids", "PWD": "/home/alice"}}


def test_redact_env_reaches_a_secret_inside_a_value():
    env = {"HIP_X": "aws_secret_access_key = wJalrXUtnFEMIbPxRfiCY", "HSA_SECRET": "correct horse",
           "HF_ENDPOINT": "https://h/x?sig=SasSIG1", "NCCL_DEBUG": "INFO"}
    out = redact_env(env, [], ["HIP_", "HSA_", "HF_", "NCCL_"])
    assert out == {"HF_ENDPOINT": f"https://h/x?sig={REDACTED}", "HIP_X": f"aws_secret_access_key = {REDACTED}",
                   "HSA_SECRET": REDACTED, "NCCL_DEBUG": "INFO"}


# Anywhere in a line: after any other text (other NAME= pairs, quotes, URLs, separators), a secret-named value is
# gone, whatever it holds up to the end of its line.
_AROUND = st.text(st.sampled_from(list("abcXYZ019 =:;,.-_/\"'{}?&@")), max_size=40)
_SECRET = st.text(st.sampled_from(list("QWERTYUPqwertyup23456789;,} @!%")), min_size=1, max_size=30).map(
    lambda s: "Zq9" + s.strip() + "Zq9")
_NAMES = st.sampled_from(["password", "HF_TOKEN", "db_password", "aws_secret_access_key", "HIP_API_KEY",
                          "X-Amz-Signature", "client_secret", "hfToken", "NCCL_IB_SECRET"])
_FORMS = st.sampled_from(["{n}={v}", "{n}: {v}", "{n} = {v}", "export {n}=\"{v}\"", "\"{n}\": \"{v}\"",
                          "{n}='{v}'"])


@settings(max_examples=300, deadline=None)
@given(before=_AROUND, after=_AROUND, name=_NAMES, form=_FORMS, secret=_SECRET)
def test_a_secret_assignment_is_redacted_after_anything(before, after, name, form, secret):
    if form.endswith("\"{v}\"") or form.endswith("'{v}'"):
        secret = secret.replace('"', "").replace("'", "")
    line = form.format(n=name, v=secret)
    text = f"{before} {line}\n{after}"
    out = redact_value(text)
    assert secret not in out, (text, out)
    first, rest = out.split("\n", 1)
    assert REDACTED in first and rest == redact_value(after), (text, out)  # the next line is judged on its own
    assert redact_value(out) == out


def test_hipconfig_output_in_a_bundle_is_redacted(tmp_path):
    token = TOKENS[1]
    bin_dir = tmp_path / "bin"
    make_tool(bin_dir, "hipconfig", stdout=f"HIP version: 6.2\n== Environment Variables\nHIP_DEPLOY_TOKEN ={token}\n"
                                           f"HSA_MIRROR =https://:hunter2/x@mirror.example\n"
                                           "HIP_DB_PASSWORD=p@ss;w0rdSECRET\n"
                                           "HIP_AWS=aws_secret_access_key = wJalrXUtnFEMIbPxRfiCY\n")
    env = env_with_path(bin_dir, HF_TOKEN=TOKENS[0], HSA_MIRROR="https://:hunter2/x@mirror.example",
                        GITLAB_PAT=TOKENS[3], HF_ENDPOINT=f"https://u:{TOKENS[3]}@hub.example",
                        HF_HUB_URL="https://b.s3.amazonaws.com/x?X-Amz-Signature=S3SIGabcdef0123")
    bundle = tmp_path / "b.json"
    proc = cli("doctor", "--no-gpu-probes", "--no-train", "--only", "rocm,host,env", "--json", "--save-bundle",
               str(bundle), env=env)
    assert proc.returncode in (0, 1), proc.stderr[-1000:]
    for text in (bundle.read_text(), proc.stdout):
        for secret in (token, TOKENS[0], TOKENS[3], "hunter2", "w0rdSECRET", "wJalrXUtnFEMIbPxRfiCY", "S3SIGabcdef"):
            assert secret not in text
    assert "HIP_DEPLOY_TOKEN =<redacted>" in json.loads(bundle.read_text())["facts"]["commands"]["hipconfig"]["stdout"]


def test_a_torch_error_quoting_a_password_is_redacted_in_the_child_stdout_too(tmp_path):
    """The probe child reports torch's import error in an event line on its stdout, kept as the run's evidence:
    the password the error quotes must be gone there as well as in the parsed probe."""
    site = tmp_path / "site" / "torch"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("raise ImportError('cannot reach the store: password=hunter2hunter2 (db)')\n")
    bundle = tmp_path / "b.json"
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    proc = cli("doctor", "--no-gpu-probes", "--no-train", "--only", "torch", "--out", str(bundle), env=env,
               cwd=tmp_path)
    assert proc.returncode in (0, 1, 3), proc.stderr[-2000:]
    text = bundle.read_text()
    assert "hunter2hunter2" not in text and "hunter2hunter2" not in proc.stdout
    facts = json.loads(text)["facts"]
    assert "password=<redacted>" in facts["probe_runs"]["torch"]["stdout"]
    assert facts["probes"]["torch"]["error"].endswith("password=<redacted>")


_QUERY_SECRET = st.text(st.sampled_from(list("QWERTYUPqwertyup23456789%-_.~+/=")), min_size=1, max_size=30).map(
    lambda s: "Zq9" + s + "Zq9")
_QUERY_NAMES = st.sampled_from(["sig", "X-Amz-Signature", "X-Amz-Credential", "token", "password", "access_token",
                                "key", "client_secret", "AWSAccessKeyId", "X-Amz-Security-Token"])


@settings(max_examples=200, deadline=None)
@given(name=_QUERY_NAMES, secret=_QUERY_SECRET, first=st.booleans(), host=st.sampled_from(
    ["https://acct.blob.core.windows.net/c/x.bin", "https://b.s3.amazonaws.com/k", "postgresql://app@db:5432/x"]))
def test_a_secret_in_a_url_query_is_redacted_and_the_rest_kept(name, secret, first, host):
    query = f"{name}={secret}&sv=2022" if first else f"sv=2022&{name}={secret}"
    out = redact_value(f"HF_ENDPOINT={host}?{query}#frag")
    assert secret not in out and "sv=2022" in out and out.startswith(f"HF_ENDPOINT={host}?") and out.endswith("#frag")


_PASSWORD = st.text(st.sampled_from(list("QWERTYqwerty2345@:/;,!%$")), min_size=1, max_size=24).map(
    lambda s: "Zq9" + s + "Zq9")


@settings(max_examples=200, deadline=None)
@given(password=_PASSWORD, user=st.sampled_from(["", "bob", "x-access-token", "oauth2"]))
def test_a_url_password_is_redacted_whatever_it_holds(password, user):
    out = redact_value(f"git clone https://{user}:{password}@git.example.com/o/r.git now")
    assert out == f"git clone https://{user}:{REDACTED}@git.example.com/o/r.git now"
