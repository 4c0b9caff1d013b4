"""Serverless agent memory: the shared layer (models, policy, stores, service)."""

import os

from .runtime import coldgc, lean

__version__ = "0.1.0"

# In a Lambda function: numpy's OpenBLAS starts with one thread (unless the function's environment says otherwise).
# Left to itself it starts a pool of a thread per core at ``import numpy``, whose start and spinning cost the search
# function's first response about 60 CPU ms of its 135 for that import; no function here has work for
# the pool (the query's forward pass runs on one thread anyway, ``minilm_numpy.one_blas_thread``; onnxruntime has
# its own pool). Outside Lambda (tests, the local server, benchmarks) numpy is left as it is.
if os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# In a Lambda function on demand: no garbage collection from here to the first response (coldgc.py).
coldgc.pause_for_cold_start()

# Before anything imports Powertools' event handler or data classes: only the parts used are loaded (lean.py).
lean.install()
