"""The smoke-train: a short bf16 fine-tune of a real LLaMA that proves the stack end to end.

torch is imported only in this package's run modules (loop, device, memory, data, bench, make_model);
config, task, reference, verdicts and doctor_stage stay import-cheap."""
