"""Lines per minute by level from one bounded pass over a log: the kernel, its chunks, its cache."""
