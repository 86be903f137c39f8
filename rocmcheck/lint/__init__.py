"""Config lint: DeepSpeed JSON, accelerate configs, LLaMA-Factory YAML and TrainingArguments files, each judged for
the program that reads it (rocmcheck.lint.consumers).

    lint_deepspeed_config(path_or_dict, *, world_size=None, micro_batch=None, grad_accum=None, consumer=None)
    lint_file(path, *, world_size=None, consumer=None)
both return list[LintMessage]; LintMessage.to_check_result() gives the project's CheckResult, and every message
names its consumer (LintMessage.consumer). rocmcheck.lint.run.LintRun judges the files of one run together.
"""

from rocmcheck.errors import BadInput
from rocmcheck.lint.deepspeed import lint_deepspeed_config
from rocmcheck.lint.files import detect_kind, lint_file
from rocmcheck.lint.messages import LintMessage, Severity, has_errors

__all__ = ["BadInput", "LintMessage", "Severity", "detect_kind", "has_errors", "lint_deepspeed_config", "lint_file"]
