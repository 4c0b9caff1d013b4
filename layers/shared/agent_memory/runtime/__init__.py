"""What the functions run on: cached AWS clients, time budgets, and the cold-start helpers (lean imports, a paused
garbage collector, lazily generated dataclasses)."""
