"""POSTing JSON to an OpenAI-compatible endpoint: within a time budget, retries with backoff, a bearer key.

Shared by the OpenAI-compatible summarizer and embedder. Attempts, their timeouts and the pauses between them
come from the use's ``budget.ModelBudget`` and never pass the invocation's deadline. Retries timeouts,
connection errors, 408, 429 and 5xx; any other 4xx, an unusable URL or an unreadable key fail at once. Every
failure is a ``ModelFailure`` (the ``error`` class given, a subclass) of kind ``timeout`` (the last attempt
timed out, or no time was left), ``busy`` (429) or ``error``; its message names the provider and the host,
never the key nor what the endpoint answered (that goes to the log, with the key masked).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agent_memory.errors import ModelFailure
from agent_memory.limits import MIN_ATTEMPT_S
from agent_memory.runtime import budget as budgets

if TYPE_CHECKING:  # pragma: no cover
    import httpx

logger = logging.getLogger(__name__)


class JsonEndpoint:
    def __init__(
        self,
        url: str,
        *,
        what: str,
        error: type[ModelFailure],
        api_key_provider: Callable[[], str | None] | None = None,
        budget: budgets.ModelBudget | None = None,
        transport: Any = None,
        provider: str = "openai",
    ) -> None:
        self.url = url
        self._what = what
        self._error = error
        self._api_key_provider = api_key_provider
        self._budget = budget  # None: the budget of the use being served (budget.current())
        self._transport = transport
        self._client: httpx.Client | None = None
        self._key: str | None = None
        self._label = f"{what} {provider} ({urlsplit(url).hostname or '?'})"

    @property
    def budget(self) -> budgets.ModelBudget:
        return self._budget or budgets.current()

    def deadline(self) -> float:
        """When a call starting now must be over (see ``budget.deadline``)."""
        return budgets.deadline(self._budget)

    def _http(self) -> httpx.Client:
        if self._client is None:
            import httpx  # lazily: importing the layer must stay light

            self._client = httpx.Client(transport=self._transport)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key_provider is not None:
            try:
                key = self._api_key_provider()
            except Exception as exc:
                raise self._error(f"could not read the {self._label} API key: {type(exc).__name__}") from exc
            if key:
                self._key = key
                headers["Authorization"] = f"Bearer {key}"
        return headers

    def _masked(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def post(self, body: dict[str, Any], headers: dict[str, str], deadline: float | None = None) -> httpx.Response:
        """The first successful (2xx/3xx) response, after retries, by ``deadline`` (default: the budget's)."""
        import httpx

        use = self.budget
        end = self.deadline() if deadline is None else deadline
        last_error, kind, attempts = "no time left in the budget", "timeout", 0
        for attempt in range(use.attempts):
            pause = use.backoff_before(attempt)
            timeout = min(use.attempt_timeout_s, end - time.monotonic() - pause)
            if timeout < MIN_ATTEMPT_S:  # no time for (another) attempt: what failed last is the answer
                break
            if pause:
                time.sleep(pause)
            attempts += 1
            limits = httpx.Timeout(timeout, connect=min(timeout, budgets.CONNECT_TIMEOUT_S))
            try:
                response = self._http().post(self.url, json=body, headers=headers, timeout=limits)
            except httpx.UnsupportedProtocol as exc:
                raise self._error(f"{self._label} endpoint is not usable: {exc}") from exc
            except httpx.TimeoutException as exc:
                last_error, kind = f"{type(exc).__name__} after {timeout:.1f} s", "timeout"
                continue
            except httpx.TransportError as exc:  # connection and protocol errors
                last_error, kind = type(exc).__name__, "error"
                continue
            status = response.status_code
            if status in (408, 429) or status >= 500:
                last_error = f"HTTP {status}"
                kind = "busy" if status == 429 else "timeout" if status in (408, 504) else "error"
                logger.warning("%s answered HTTP %s: %s", self._label, status, self._masked(response.text[:200]))
                continue
            if status >= 400:
                logger.warning("%s answered HTTP %s: %s", self._label, status, self._masked(response.text[:200]))
                raise self._error(f"{self._label} answered HTTP {status}")
            return response
        raise self._error(
            f"{self._label} failed within the {use.name} budget of {use.total_s:g} s "
            f"after {attempts} attempt(s): {last_error}",
            kind=kind,
        )
