"""`rocmcheck monitor`: watch a person's own training command (GPU memory, power, utilisation, temperature,
clocks), judge the memory curve, and find the line that leaks.

    sample.py    one reading per GPU (the record written to CSV/JSONL)
    curve.py     the pure classifier: flat, sawtooth or staircase; peak against capacity
    parse.py     pure parsers of nvidia-smi / amd-smi / rocm-smi monitoring outputs
    sampler.py   readers: NVML and amdsmi bindings first, the CLIs (through the one runner) otherwise
    procs.py     the process tree under a pid, and the GPUs *_VISIBLE_DEVICES selects
    wrap.py      runs the command (or attaches to a pid), forwards signals, samples until it ends
    output.py    CSV/JSONL files, the live status line, the plot
    leak.py      the leak finder inside the training process (HF Trainer callback, context manager)

Nothing here imports torch at module level; leak.py imports it inside the training process only.
"""
