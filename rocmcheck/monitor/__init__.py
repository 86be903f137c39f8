"""`rocmcheck monitor`: watch a person's own training command (GPU memory, power, utilisation, temperature,
clocks), judge the memory curve, and find the line that leaks.

    sample.py       one reading per GPU (the record written to CSV/JSONL)
    staircase.py    the one leak rule: does the floor keep rising (train.memory_leak and monitor.memory_curve)
    curve.py        the pure classifier: flat, sawtooth or staircase; peak against capacity
    step_memory.py  memory after each optimizer step and smoke-train's leak decision
    sampler.py      readers: NVML and amdsmi (facts/bindings.py) first, the CLIs (facts/tools.py, the one
                    runner, facts/parsers/smi_monitor.py) otherwise
    procs.py        the process tree under a pid, and the GPUs *_VISIBLE_DEVICES selects
    wrap.py         runs the command (or attaches to a pid), forwards signals, samples until it ends
    output.py       CSV/JSONL files, the status line, the plot
    recording.py    recordings read back (--replay), as hostile input
    leak.py         the leak finder inside the training process (HF Trainer callback, context manager)

Nothing here imports torch at module level; leak.py and step_memory.py import it inside the training process only.
"""
