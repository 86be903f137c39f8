"""The smoke-train: a short bf16 fine-tune of a real LLaMA that proves the stack end to end.

One entry: runner.smoke_train decides once what to run (request.py: train here, launch ranks, or bench), runs it
(run.py, launch.py or bench.py), then shows, writes and returns the exit code.

torch-free (import them anywhere): config, request, report, task, ds_config, reference, verdicts, comparisons, fit,
model_files, kernels, outputs, launch, runner, child, doctor_stage. The rest imports torch: run (the one run path
and its loop), modeling, numerics, data, device, distributed, plain_strategy, ds_engine, compiled, bench."""
