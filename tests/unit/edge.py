"""What a handler does with a body before the service sees it, for unit tests of the services."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from agent_memory.edge.api import field_path
from agent_memory.errors import UnprocessableInput


def through_edge(body: Any, adapter: TypeAdapter[Any]) -> Any:
    """Validate ``body`` as the handler's request model does; a failure is the 422 the API would answer."""
    try:
        return adapter.validate_python(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = field_path(first["loc"]) or "body"
        raise UnprocessableInput(f"{field}: {first['msg']}", field=field) from exc
