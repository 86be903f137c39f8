"""The memory planner and batch finder. Pure Python: torch is imported only by the GPU child (probe_child.py)."""
