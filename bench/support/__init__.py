"""Helpers the benchmarks share: the process environment, an AWS request counter, an embedding cache, a synthetic
corpus of memories."""
