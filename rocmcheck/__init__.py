"""rocmcheck: can this machine fine-tune LLaMA-class models on ROCm (or CUDA)? And if not, what to do."""

__version__ = "0.1.0"
