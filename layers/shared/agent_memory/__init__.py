"""Serverless agent memory: the shared layer (models, policy, stores, service)."""

__version__ = "0.1.0"
