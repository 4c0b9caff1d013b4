"""Use cases: what the API does, independent of HTTP and of the storage adapters."""
