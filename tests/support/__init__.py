"""Helpers shared by the test tiers: names, clients, builders and probes that several test modules use.

Test modules import from here, never from one another, and never from a conftest module: a conftest holds
fixtures and hooks only. A helper that one tier alone uses (``tests/faults/injector.py``) stays in its tier.
"""
