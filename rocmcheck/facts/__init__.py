"""Facts: what the machine is. Collected once, read-only, bounded in time."""
