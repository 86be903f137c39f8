"""Many nodes: where this process sits in a launch (launch.py), and `rocmcheck compare`: bundles of several
nodes (or of one node over time) side by side, the node that differs named (bundles.py reads, judge.py judges)."""
