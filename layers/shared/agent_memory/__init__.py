"""Serverless agent memory: the shared layer (models, policy, stores, service)."""

from . import coldgc, lean

__version__ = "0.1.0"

# In a Lambda function on demand: no garbage collection from here to the first response (coldgc.py).
coldgc.pause_for_cold_start()

# Before anything imports Powertools' event handler or data classes: only the parts used are loaded (lean.py).
lean.install()
