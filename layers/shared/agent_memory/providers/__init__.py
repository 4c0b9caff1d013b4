"""Model providers behind ports: summarizers (and, later, embedders)."""
