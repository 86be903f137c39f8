"""No secret leaves the machine: every string of a bundle and of the report is redacted, by name and by shape,
tool outputs included."""

from __future__ import annotations

import json

import pytest
from fakes import env_with_path, make_tool
from hostile import cli

from rocmcheck.facts.redact import REDACTED, is_secret_name, redact_tree, redact_value

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
]


@pytest.mark.parametrize("token", TOKENS)
def test_token_shapes_are_redacted_anywhere(token):
    out = redact_value(f"error: 401 for url with {token} in it")
    assert token not in out and REDACTED in out and out.startswith("error: 401")


@pytest.mark.parametrize("url, kept", [
    ("https://:s3cret@mirror.example/simple", "https://:<redacted>@mirror.example/simple"),
    ("https://bob:pa/ss:w0rd@mirror.example/hf", "https://bob:<redacted>@mirror.example/hf"),
    ("https://x-access-token:abc123@github.com/o/r.git", "https://x-access-token:<redacted>@github.com/o/r.git"),
    ("https://mirror.example:8443/path?q=a:b", "https://mirror.example:8443/path?q=a:b"),
])
def test_url_passwords(url, kept):
    assert redact_value(url) == kept


@pytest.mark.parametrize("name, secret", [
    ("HF_TOKEN", True), ("hfToken", True), ("GITLAB_PAT", True), ("AWS_SECRET_ACCESS_KEY", True),
    ("db_password", True), ("MY_CREDS", True), ("OPENAI_API_KEY", True), ("SSH_AUTH_SOCK", True),
    ("NCCL_DEBUG", False), ("TOKENIZERS_PARALLELISM", False), ("pad_token", False), ("PWD", False),
    ("HIP_PATH", False), ("max_new_tokens", False), ("key", False),
])
def test_secret_names(name, secret):
    assert is_secret_name(name) is secret


def test_assignments_inside_tool_output():
    text = "PATH =/usr/bin\nHIP_MY_TOKEN =abc123\nHSA_SECRET: 'xyz'\nexport FOO_PASSWORD=\"p w\"\nAuthorization: Bearer abcdefghijklmnop1234\n"
    out = redact_value(text)
    for secret in ("abc123", "xyz", "p w", "abcdefghijklmnop1234"):
        assert secret not in out
    assert "PATH =/usr/bin" in out


def test_redact_tree_reaches_values_keys_and_nested_lists():
    doc = {"a": [{"password": 1234, "note": "token " + TOKENS[0]}], "api_key": {"x": ["y"]}, TOKENS[1]: "v"}
    out = json.dumps(redact_tree(doc))
    assert not any(t in out for t in TOKENS[:2]) and "1234" not in out and '"y"' not in out


def test_hipconfig_output_in_a_bundle_is_redacted(tmp_path):
    token = TOKENS[1]
    bin_dir = tmp_path / "bin"
    make_tool(bin_dir, "hipconfig", stdout=f"HIP version: 6.2\n== Environment Variables\nHIP_DEPLOY_TOKEN ={token}\n"
                                           f"HSA_MIRROR =https://:hunter2/x@mirror.example\n")
    env = env_with_path(bin_dir, HF_TOKEN=TOKENS[0], HSA_MIRROR="https://:hunter2/x@mirror.example",
                        GITLAB_PAT=TOKENS[3], HF_ENDPOINT=f"https://u:{TOKENS[3]}@hub.example")
    bundle = tmp_path / "b.json"
    proc = cli("doctor", "--no-gpu-probes", "--no-train", "--only", "rocm,host,env", "--json", "--save-bundle",
               str(bundle), env=env)
    assert proc.returncode in (0, 1), proc.stderr[-1000:]
    for text in (bundle.read_text(), proc.stdout):
        for secret in (token, TOKENS[0], TOKENS[3], "hunter2"):
            assert secret not in text
    assert "HIP_DEPLOY_TOKEN =<redacted>" in json.loads(bundle.read_text())["facts"]["commands"]["hipconfig"]["stdout"]
