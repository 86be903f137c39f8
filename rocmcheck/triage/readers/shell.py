"""Shell prompts and command lines as people paste them: which part of a line is the prompt, which tool the
command runs, and which tool's output follows it. Shared by the paste splitter (paste.py) and the readers that
read a session line by line (python_session.py, docker_run.py). Pure; never raises.

The prompt shapes are the ones seen in the pastes under tests/fixtures/pastes/ and tests/fixtures/public/:
``$ rocminfo``, ``# python -m torch.utils.collect_env``, ``joshua@codex:~/code/gpustuff$ python3 -m ...``,
``(venv) root@CHUN:~/ComfyUI# python3 ...``, ``[reapertwo@arch ~]$ /opt/rocm/bin/rocminfo``,
``Singularity> python -m deepspeed.env_report``, ``(conda_container_env) python -m deepspeed report``,
``❯ amd-smi``, ``~$ amd-smi static``, ``> CUDA_VISIBLE_DEVICES=1 python -c "..."`` and ``$uname -a``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

# A command line longer than this is not read as a command (a pasted log line is not a prompt).
MAX_COMMAND_CHARS = 4096

# Prompts that say "a command follows" whatever the command is.
_CERTAIN_PROMPTS = (
    # user@host:path$ / user@host:path# , with an optional (venv) or (conda env) before it
    re.compile(r"^(?:\([\w.@/+-]+\)\s*)?[\w.-]+@[\w.-]+(?::\s?[^\s$#>]*)?\s?[$#%]\s?(?=\S)"),
    # [user@host dir]$
    re.compile(r"^(?:\([\w.@/+-]+\)\s*)?\[[\w.-]+@[\w.-]+[^\]]*\][$#%]\s?(?=\S)"),
    # "$ cmd", "~$ cmd", "/path$ cmd", "(venv) $ cmd"
    re.compile(r"^(?:\([\w.@/+-]+\)\s*)?(?:~[^\s$#]*|/[^\s$#]*)?\$\s+(?=\S)"),
    # bash-5.1$ / sh-4.4#
    re.compile(r"^(?:ba|z|k)?sh-[\d.]+[$#]\s?(?=\S)"),
    # Singularity> / Apptainer> / PS C:\Users\x> / C:\path>
    re.compile(r"^(?:Singularity|Apptainer|PS [A-Za-z]:[^>]*|[A-Za-z]:\\[^>]*)>\s?(?=\S)"),
    # fish / starship / oh-my-zsh prompt characters
    re.compile(r"^[\u276f\u279c\u03bb\u00bb]\s+(?=\S)"),
)
# Prompts that are a prompt only when a known tool follows ("# " is also a comment, "> " a quote or continuation,
# "(name) " a parenthesis in prose, "$cmd" a price).
_TOOL_PROMPTS = (
    re.compile(r"^(?:\([\w.@/+-]+\)\s*)?#\s+(?=\S)"),
    re.compile(r"^>\s?(?=\S)"),
    re.compile(r"^\([\w.@/+-]+\)\s+(?=\S)"),
    re.compile(r"^\$(?=\S)"),
)
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = {"sudo", "time", "env", "nohup", "exec", "command", "stdbuf", "nice", "srun", "singularity", "apptainer"}

# Executable basename -> the kind of what it prints. Tools whose kind depends on a subcommand are in _SUBCOMMANDS.
_TOOL_KINDS = {
    "rocminfo": "rocminfo",
    "rocm-smi": "rocm_smi",
    "rocm_smi.py": "rocm_smi",
    "amd-smi": "amd_smi",
    "nvidia-smi": "nvidia_smi",
    "hipconfig": "hipconfig",
    "hipconfig.pl": "hipconfig",
    "uname": "uname",
    "lsb_release": "lsb_release",
    "ds_report": "ds_report",
    "dmesg": "kernel_log",
    "journalctl": "kernel_log",
    "collect_env.py": "collect_env",
    "ipython": "python_session",
    "ipython3": "python_session",
}
_SUBCOMMANDS = {
    "pip": {"list": "pip_list", "freeze": "pip_freeze", "install": "pip_install", "download": "pip_install",
            "wheel": "pip_install", "uninstall": "pip_install", "show": None, "check": None},
    "conda": {"list": "conda_list", "install": None, "create": None, "env": None, "info": None},
    "accelerate": {"env": "accelerate_env", "launch": None, "config": None},
    "transformers-cli": {"env": "transformers_env"},
    "transformers": {"env": "transformers_env"},
    "llamafactory-cli": {"env": "llamafactory_env", "train": None, "export": None, "chat": None, "eval": None,
                         "webui": None, "api": None},
    "lmf": {"env": "llamafactory_env", "train": None},
    "dkms": {"status": "dkms", "install": "dkms", "build": "dkms", "autoinstall": "dkms"},
    "docker": {"run": "docker_run", "container": "docker_run"},
    "podman": {"run": "docker_run"},
    "nvidia-docker": {"run": "docker_run"},
}
for _alias, _base in (("pip3", "pip"), ("mamba", "conda"), ("micromamba", "conda")):
    _SUBCOMMANDS[_alias] = _SUBCOMMANDS[_base]
_NCCL_TEST_BINARY = re.compile(r"^(?:all_reduce|all_gather|broadcast|reduce_scatter|reduce|alltoall|scatter|gather|"
                               r"sendrecv|hypercube)_perf(?:_mpi)?$")
_PYTHON = re.compile(r"^(?:python(?:\d+(?:\.\d+)?)?|py|pypy3?)(?:\.exe)?$")
# Files whose `cat` prints one of the formats read here.
_CAT_FILES = {"/etc/os-release": "os_release", "/usr/lib/os-release": "os_release", "/etc/lsb-release": "os_release",
              "/proc/version": "uname"}
_LABEL = re.compile(r"^(?:the\s+)?(?:output|result|results)\s+of\s+(.+?)\s*:?$|^(.+?)\s+(?:output|result)s?\s*:?$",
                    re.IGNORECASE)
_EMPHASIS = re.compile(r"^(\*\*|__|\*|_)(.+?)\1$")
# A prompt holds one of these characters (each prompt pattern above needs one): a line without any has none.
_PROMPT_CHARS = re.compile(r"[$#%>(\u276f\u279c\u03bb\u00bb]")
# Every executable name that makes a command known (_TOOL_KINDS, _SUBCOMMANDS, nvcc, cat, _PYTHON,
# _NCCL_TEST_BINARY) holds one of these: a line without any runs no known tool.
_KNOWN_PARTS = re.compile(r"rocm|smi|hipconfig|uname|lsb_release|ds_report|dmesg|journalctl|collect_env|py|pip|conda"
                          r"|mamba|accelerate|transformers|llamafactory|lmf|dkms|docker|podman|nvcc|cat|_perf")
_PLACEHOLDER = re.compile(r"^<[^>]*>?$|^[^<]*>$")


@dataclass
class Command:
    """One command line: the prompt (if any) removed, the tool it runs and the kind of output it prints."""

    text: str  # the command as typed, prompt removed
    tool: str = ""  # the executable's basename ("rocm-smi", "python3"), "" when none was found
    args: list[str] = field(default_factory=list)  # the arguments after the tool (and after `python -m X`)
    kind: str | None = None  # the kind of the output that follows (paste.KINDS), None when not one read here
    env: dict[str, str] = field(default_factory=dict)  # VAR=value assignments before the tool
    prompt: str = ""  # the prompt text that was removed ("" for a bare command line)
    tool_known: bool = False  # the tool is one whose name alone makes a line a command (rocminfo, pip, python...)


def split_prompt(line: str) -> tuple[str, str] | None:
    """(prompt, command) when `line` starts with a shell prompt followed by a command; None otherwise. A prompt
    that could also be prose ("# ", "> ", "(x) ") counts only when a known tool follows it."""
    if not line or len(line) > MAX_COMMAND_CHARS or not _PROMPT_CHARS.search(line):
        return None
    stripped = line.strip()
    for pattern in _CERTAIN_PROMPTS:
        m = pattern.match(stripped)
        if m:
            return stripped[: m.end()], stripped[m.end():].strip()
    for pattern in _TOOL_PROMPTS:
        m = pattern.match(stripped)
        if m:
            rest = stripped[m.end():].strip()
            if parse_command(rest).tool_known:
                return stripped[: m.end()], rest
    return None


def _tokens(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=False, posix=True)
    except ValueError:  # an unbalanced quote: a paste cut mid-line
        return text.split()


def _first_tool(tokens: list[str]) -> int:
    """The index of the executable in a command's words (after VAR=value assignments and sudo / env / time)."""
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if _ENV_ASSIGNMENT.match(token) or token in _WRAPPERS or (token.startswith("-") and i and
                                                                  tokens[i - 1] in _WRAPPERS):
            i += 1
        else:
            break
    return i


def _basename(exe: str) -> str:
    return exe.rstrip(";").replace("\\", "/").rsplit("/", 1)[-1]


def _is_known(base: str) -> bool:
    return bool(base in _TOOL_KINDS or base in _SUBCOMMANDS or base in ("nvcc", "cat") or _PYTHON.match(base)
                or _NCCL_TEST_BINARY.match(base))


def parse_command(text: str) -> Command:
    """The tool a command line runs and the kind of its output. Never raises."""
    command = Command(text=(text or "").strip()[:MAX_COMMAND_CHARS])
    head = command.text.split("|", 1)[0]  # in a pipeline the first command prints
    quick = head.split()
    i = _first_tool(quick)
    if i >= len(quick) or "://" in quick[i] or quick[i].endswith("/") or not _is_known(_basename(quick[i])):
        # not a tool read here: its words, without the cost of shell quoting
        command.env = {t.partition("=")[0]: t.partition("=")[2] for t in quick[:i] if _ENV_ASSIGNMENT.match(t)}
        if i < len(quick):
            command.tool, command.args = _basename(quick[i]), quick[i + 1:]
        return command
    tokens = _tokens(head)
    i = _first_tool(tokens)
    for token in tokens[:i]:
        if _ENV_ASSIGNMENT.match(token):
            name, _, value = token.partition("=")
            command.env[name] = value
    if i >= len(tokens):
        return command
    base = _basename(tokens[i])
    rest = tokens[i + 1:]
    command.tool, command.args = base, rest
    if _PYTHON.match(base):
        command.tool_known = True
        command.kind = _python_kind(rest, command)
        return command
    if base in _TOOL_KINDS:
        command.tool_known = True
        command.kind = _TOOL_KINDS[base]
        return command
    if base == "nvcc":
        command.tool_known = True
        command.kind = "nvcc" if any(a in ("-V", "--version") for a in rest) else None
        return command
    if base in _SUBCOMMANDS:
        command.tool_known = True
        sub = next((a for a in rest if not a.startswith("-")), "")
        command.kind = _SUBCOMMANDS[base].get(sub)
        if command.kind == "pip_list" and any(a.startswith("--format") and "freeze" in a for a in rest):
            command.kind = "pip_freeze"
        return command
    if _NCCL_TEST_BINARY.match(base):
        command.tool_known = True
        command.kind = "nccl_tests"
        return command
    if base == "cat" and rest:
        command.tool_known = True
        command.kind = _CAT_FILES.get(rest[0])
    return command


def _python_kind(args: list[str], command: Command) -> str | None:
    """`python -m torch.utils.collect_env` -> collect_env, `python -c ...` / bare `python` -> python_session, ..."""
    if not args or args[0] in ("-i", "-q", "-V", "--version", "-u"):
        return "python_session"
    if args[0] == "-c":
        return "python_session"
    if args[0] == "-m" and len(args) > 1:
        module = args[1]
        command.args = args[2:]
        if module in ("torch.utils.collect_env", "vllm.collect_env"):
            return "collect_env"
        if module in ("deepspeed.env_report", "deepspeed.env_report.main"):
            return "ds_report"
        if module == "pip":
            sub = next((a for a in args[2:] if not a.startswith("-")), "")
            kind = _SUBCOMMANDS["pip"].get(sub)
            if kind == "pip_list" and any(a.startswith("--format") and "freeze" in a for a in args[2:]):
                return "pip_freeze"
            return kind
        return None
    script = args[0].replace("\\", "/").rsplit("/", 1)[-1]
    if script == "collect_env.py":
        return "collect_env"
    return None


def bare_command(line: str) -> Command | None:
    """A line with no prompt that is a command invocation on its own: "rocm-smi", "pip list", "lsb_release -a",
    "/opt/rocm/hip/bin/hipconfig", "**`amd-smi version`**", "Result of rocm-smi :". None for prose that merely
    starts with a tool's name ("rocminfo gives me the error ...")."""
    if not line or not _KNOWN_PARTS.search(line):
        return None
    text = unmark(line)
    if not text or len(text) > 300:
        return None
    folded = text.casefold()  # the label's words, as re.IGNORECASE matches them
    m = _LABEL.match(text) if "output" in folded or "result" in folded else None
    if m:
        text = unmark(m.group(1) or m.group(2))
    text = text.rstrip(":").strip()
    command = parse_command(text)
    if not command.tool_known:
        return None
    args = command.args
    if _PYTHON.match(command.tool) and "-c" in command.text.split():
        return command  # `python -c "code"`: the code is one argument, whatever it says
    if not all(_argument_like(a, command.tool) for a in args):
        return None
    return command


def _argument_like(arg: str, tool: str) -> bool:
    if arg.startswith(("-", "/", "./", "~", "$", "'", '"')) or "=" in arg or "/" in arg or _PLACEHOLDER.match(arg):
        return True
    if re.fullmatch(r"[\w.-]+\.(?:py|sh|json|yaml|yml|txt|log)", arg) or re.fullmatch(r"\d+", arg):
        return True
    subs = _SUBCOMMANDS.get(tool, {})
    if arg in subs:
        return True
    # amd-smi, rocm-smi and nvidia-smi subcommands and option values ("amd-smi static", "nvidia-smi topo -m")
    return tool in ("amd-smi", "nvidia-smi", "rocm-smi", "journalctl", "dmesg") and \
        bool(re.fullmatch(r"[a-z][\w-]*", arg))


def unmark(line: str) -> str:
    """The line without markdown emphasis and inline-code marks around it: "**`amd-smi version`**" -> "amd-smi
    version", "`ROCk module is loaded`" -> "ROCk module is loaded"."""
    text = (line or "").strip()
    for _ in range(3):
        before = text
        text = _EMPHASIS.sub(r"\2", text).strip()
        if text.startswith("`") and not text.startswith("```"):
            text = text[1:]
            if text.endswith("`") and not text.endswith("```"):
                text = text[:-1]
            text = text.strip()
        elif text.endswith("`") and not text.endswith("```") and "`" not in text[:-1]:
            text = text[:-1].strip()
        if text == before:
            break
    return text
