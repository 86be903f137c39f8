"""One `rocmcheck lint` run over several files, and its verdicts: every message of every file judged, a pass for
each file judged without an error or a warning (naming the consumer it was judged for), and a verdict for each
file lint refused.

The files of one run are judged together: a DeepSpeed JSON that a training file of the run points at (`deepspeed:`)
or an accelerate config names (`deepspeed_config_file`) is judged once, through that file, for its consumer (the HF
Trainer, accelerate launch) and with its training arguments; a training file without a `deepspeed:` key gives its
training arguments to the accelerate configs of the run (the script `accelerate launch` starts runs with them).

A refused file is never a pass. A file that cannot be read or parsed (missing, a folder, not JSON/YAML, a
duplicate key), or that the named --consumer does not read, is bad input: a failure beside judged files, a skip
when nothing was judged, and the command exits 2 after showing the rest (`bad_input`). A file of none of the kinds
lint judges is a skip: when nothing at all was judged, the run is NOT JUDGED (exit 3 by rocmcheck.result.exit_code).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rocmcheck.errors import BadInput
from rocmcheck.fixes import note
from rocmcheck.lint.accelerate_config import check_with_accelerate, resolve_config_file, working_directory
from rocmcheck.lint.consumers import (
    ACCELERATE,
    ACCELERATE_LAUNCH,
    DEEPSPEED,
    HF_TRAINER,
    HF_TRAINER_UNDER_LLAMAFACTORY,
    LLAMAFACTORY,
    TRAINING_ARGS,
    Consumer,
    ConsumerChoice,
)
from rocmcheck.lint.files import NotJudged, UnknownKind, choose_consumer, kind_of, lint_loaded, resolve_deepspeed_path
from rocmcheck.lint.hf_auto import TrainingSettings
from rocmcheck.lint.loading import load_mapping
from rocmcheck.lint.messages import LintMessage, Severity
from rocmcheck.result import CheckResult, Status
from rocmcheck.safe.text import excerpt

UNREADABLE_FIX = note("correct the file (or its path) as the message says; lint reads JSON and YAML mappings")


@dataclass
class _Planned:
    name: str
    path: Path
    data: dict
    kind: str
    choice: ConsumerChoice
    through: str | None = None  # the file of the run that points at this DeepSpeed config (judged through it)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


@dataclass
class LintRun:
    """lint_all(names) judges the files of one run; results() gives every verdict of the run."""

    options: dict[str, Any] = field(default_factory=dict)  # lint_file's keyword arguments
    consumer: Consumer | None = None  # --consumer
    messages: list[LintMessage] = field(default_factory=list)
    judged: list[tuple[str, list[LintMessage], ConsumerChoice]] = field(default_factory=list)
    refused: list[tuple[str, BadInput]] = field(default_factory=list)

    @property
    def bad_input(self) -> list[tuple[str, BadInput]]:
        """The refused files that are bad input (exit 2): all but those of a kind lint does not judge."""
        return [(name, problem) for name, problem in self.refused if not isinstance(problem, UnknownKind)]

    def lint(self, name: str) -> None:
        """One file alone (as lint_all([name]) would, without the other files of a run)."""
        self.lint_all([name])

    def lint_all(self, names: list[str], on_file: Callable[[str], None] | None = None) -> None:
        deep = self.options.get("deep", True)
        planned: list[_Planned] = []
        for name in names:
            path = Path(name)
            try:
                data = load_mapping(path)
                kind = kind_of(data, path, deep=deep)
                choice = choose_consumer(data, kind, path, named=self.consumer, deep=deep)
            except BadInput as exc:
                self.refused.append((name, exc))
                continue
            planned.append(_Planned(name, path, data, kind, choice))
        self._link(planned)
        if deep:  # one child for all the accelerate configs of the run: accelerate is imported once
            check_with_accelerate([(p.path, p.data, working_directory(p.data, p.path)) for p in planned
                                   if p.kind == ACCELERATE])
        trainers = [p for p in planned if p.kind in (TRAINING_ARGS, LLAMAFACTORY) and p.data.get("deepspeed") is None
                    and p.choice.consumer.llamafactory_command in (None, "train")]
        for p in planned:
            if p.through is not None:
                continue
            if on_file is not None:
                on_file(p.name)
            training = None
            if p.kind == ACCELERATE and trainers:
                training = TrainingSettings.from_args(trainers[0].data, self.options.get("world_size"))
                training.source = f"the training arguments ({excerpt(trainers[0].path.name)})"
            options = {k: v for k, v in self.options.items() if k != "deep"}
            found = lint_loaded(p.data, p.path, p.kind, p.choice, deep=deep, training=training, **options)
            self.messages.extend(found)
            linked = [q for q in planned if q.through == p.name]
            theirs = {id(m) for q in linked for m in found if m.file and _same_file(Path(m.file), q.path)}
            self.judged.append((p.name, [m for m in found if id(m) not in theirs], p.choice))
            for q in linked:
                self.judged.append((q.name, [m for m in found if m.file and _same_file(Path(m.file), q.path)],
                                    q.choice))

    def _link(self, planned: list[_Planned]) -> None:
        """DeepSpeed configs of the run that another file of the run points at: judged through that file."""
        for p in planned:
            target, consumer = None, None
            ds = p.data.get("deepspeed")
            if p.kind in (TRAINING_ARGS, LLAMAFACTORY) and isinstance(ds, str) \
                    and p.choice.consumer.llamafactory_command in (None, "train"):
                target, _ = resolve_deepspeed_path(ds, p.path)
                consumer = HF_TRAINER_UNDER_LLAMAFACTORY if p.kind == LLAMAFACTORY else HF_TRAINER
            section = p.data.get("deepspeed_config")
            if p.kind == ACCELERATE and isinstance(section, dict) and isinstance(section.get("deepspeed_config_file"),
                                                                                 str):
                target, _ = resolve_config_file(section["deepspeed_config_file"], p.path)
                consumer = ACCELERATE_LAUNCH
            if target is None or consumer is None:
                continue
            for q in planned:
                if q is not p and q.kind == DEEPSPEED and q.through is None and _same_file(q.path, target):
                    q.through = p.name
                    q.choice = ConsumerChoice(consumer, f"{excerpt(p.path.name)} points at it: "
                                                        f"{p.choice.consumer.label} hands it over")

    def results(self) -> list[CheckResult]:
        out = [m.to_check_result() for m in self.messages]
        for name, found, choice in self.judged:
            if not any(m.severity in (Severity.ERROR, Severity.WARNING) for m in found):
                out.append(CheckResult("lint.file.clean", Status.PASS,
                                       f"{excerpt(name)}: no errors or warnings for {choice.consumer.label}",
                                       area="lint", data={"file": name, **choice.to_dict()}))
        for name, problem in self.refused:
            out.append(refused_result(name, problem, others_judged=bool(self.judged)))
        return out

    def consumers(self) -> list[dict[str, Any]]:
        return [{"file": name, **choice.to_dict()} for name, _, choice in self.judged]

    def count(self, severity: Severity) -> int:
        return sum(m.severity is severity for m in self.messages)


def refused_result(name: str, problem: BadInput, *, others_judged: bool) -> CheckResult:
    """The verdict on a file lint could not judge. A kind lint does not judge: a skip. Bad input (unreadable, or not
    read by the named consumer): a failure beside judged files, a skip when nothing was judged (the command exits 2
    either way)."""
    summary = f"not judged: {excerpt(problem, 1000)}"
    if isinstance(problem, NotJudged):
        return CheckResult("lint.file.not_judged", Status.SKIP, excerpt(problem, 1000), area="lint",
                           data={"file": name, "owner": problem.owner})
    if isinstance(problem, UnknownKind):
        return CheckResult("lint.file.unknown_kind", Status.SKIP, summary, area="lint", data={"file": name})
    if not others_judged:
        return CheckResult("lint.file.unreadable", Status.SKIP, summary, area="lint", data={"file": name})
    return CheckResult("lint.file.unreadable", Status.FAIL, summary, fix=UNREADABLE_FIX, area="lint",
                       data={"file": name})
