"""Count AWS API requests per service and operation with a botocore event hook (machine-independent)."""

from __future__ import annotations

from typing import Any


class RequestCounter:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.items_read = 0

    def _before(self, model: Any, **_: Any) -> None:
        self.calls.append((model.service_model.service_name, model.name))

    def _after(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in {"Query", "Scan"}:
            self.items_read += int(parsed.get("Count", 0))
        elif model.name == "GetItem":
            self.items_read += 1 if parsed.get("Item") else 0
        elif model.name == "BatchGetItem":
            self.items_read += sum(len(v) for v in parsed.get("Responses", {}).values())

    def attach(self, *clients: Any) -> RequestCounter:
        for c in clients:
            c.meta.events.register("before-call.*.*", self._before)
            c.meta.events.register("after-call.*.*", self._after)
        return self

    def count(self, service: str | None = None, operation: str | None = None) -> int:
        return sum(
            1 for s, o in self.calls if (service is None or s == service) and (operation is None or o == operation)
        )

    def reset(self) -> None:
        self.calls.clear()
        self.items_read = 0
