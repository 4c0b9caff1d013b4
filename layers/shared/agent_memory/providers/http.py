"""POSTing JSON to an OpenAI-compatible endpoint: timeouts, retries with backoff, a bearer key.

Shared by the OpenAI-compatible summarizer and embedder. Retries timeouts, connection errors, 408, 429 and
5xx; any other 4xx, an unusable URL or an unreadable key raise ``error`` at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import httpx


class JsonEndpoint:
    def __init__(
        self,
        url: str,
        *,
        what: str,
        error: type[Exception],
        api_key_provider: Callable[[], str | None] | None = None,
        timeout: float = 30.0,
        max_retries: int = 2,
        backoff: float = 0.5,
        transport: Any = None,
    ) -> None:
        self.url = url
        self._what = what
        self._error = error
        self._api_key_provider = api_key_provider
        self._timeout = timeout
        self._max_retries = max(0, max_retries)
        self._backoff = backoff
        self._transport = transport
        self._client: httpx.Client | None = None

    def _http(self) -> httpx.Client:
        if self._client is None:
            import httpx  # lazily: importing the layer must stay light

            self._client = httpx.Client(timeout=self._timeout, transport=self._transport)
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
                raise self._error(f"could not read the {self._what} API key: {type(exc).__name__}") from exc
            if key:
                headers["Authorization"] = f"Bearer {key}"
        return headers

    def post(self, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
        """The first successful (2xx/3xx) response, after retries."""
        import httpx

        last_error = "no attempt made"
        for attempt in range(self._max_retries + 1):
            if attempt:
                time.sleep(self._backoff * 2 ** (attempt - 1))
            try:
                response = self._http().post(self.url, json=body, headers=headers)
            except httpx.UnsupportedProtocol as exc:
                raise self._error(f"{self._what} endpoint {self.url!r} is not usable: {exc}") from exc
            except httpx.TransportError as exc:  # timeouts, connection and protocol errors
                last_error = f"{type(exc).__name__}: {exc}"
                continue
            status = response.status_code
            if status in (408, 429) or status >= 500:
                last_error = f"HTTP {status}: {response.text[:200]}"
                continue
            if status >= 400:
                raise self._error(f"{self._what} endpoint answered HTTP {status}: {response.text[:200]}")
            return response
        raise self._error(f"{self._what} failed after {self._max_retries + 1} attempt(s): {last_error}")
