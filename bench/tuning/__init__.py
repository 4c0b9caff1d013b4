"""Tuning harnesses: where defaults were chosen, on the tuning split only (ranking, context format, score cut)."""
