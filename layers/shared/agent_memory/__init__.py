"""Serverless agent memory: the shared layer (models, policy, stores, service)."""

from . import lean

__version__ = "0.1.0"

# Before anything imports Powertools' event handler or data classes: only the parts used are loaded (lean.py).
lean.install()
