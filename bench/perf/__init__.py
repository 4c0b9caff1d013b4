"""Speed and cost: AWS requests and items per operation, cold starts, latency ratios, the cost model."""
