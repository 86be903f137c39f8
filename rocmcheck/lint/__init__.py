"""Config lint: DeepSpeed JSON, LLaMA-Factory YAML and TrainingArguments files.

    lint_deepspeed_config(path_or_dict, *, world_size=None, micro_batch=None, grad_accum=None)
    lint_file(path, *, world_size=None)
both return list[LintMessage]; LintMessage.to_check_result() gives the project's CheckResult.
"""

from rocmcheck.errors import BadInput
from rocmcheck.lint.deepspeed import lint_deepspeed_config
from rocmcheck.lint.files import detect_kind, lint_file
from rocmcheck.lint.messages import LintMessage, Severity, has_errors

__all__ = ["BadInput", "LintMessage", "Severity", "detect_kind", "has_errors", "lint_deepspeed_config", "lint_file"]
