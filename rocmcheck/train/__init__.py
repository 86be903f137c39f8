"""The smoke-train: a short bf16 fine-tune of a real LLaMA that proves the stack end to end.

torch-free (import them anywhere): config, report, task, ds_config, reference, verdicts, comparisons, fit,
memory, kernels, outputs, launch, runner, doctor_stage. The rest imports torch: run (the one run path and
its loop), modeling, numerics, data, device, distributed, plain_strategy, ds_engine, compiled, bench."""
