"""An ADK agent whose sessions and memory live in agent memory: run it against `make run`.

    make run                                    # in another terminal: the API on http://127.0.0.1:3000
    python clients/python/examples/adk_agent.py [--url http://127.0.0.1:3000]

The model is scripted (no network, no API key): it calls a tool that remembers a fact in user, app, temp and
session state, then answers; a second session of the same user starts from what the first one stored (user state,
and the first conversation saved to long-term memory and searched). Swap ``ScriptedModel`` for ``"gemini-2.5-flash"``
to use a real model.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from agent_memory_client import AsyncClient
from agent_memory_client.adk import RemoteMemoryService, RemoteSessionService


class ScriptedModel(BaseLlm):
    """A model that answers from a script: each call returns the next response (a function call or text)."""

    model: str = "scripted"
    script: list[types.Part] = []
    requests: list[LlmRequest] = []

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        part = self.script.pop(0)
        usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=0, candidates_token_count=0)
        yield LlmResponse(content=types.Content(role="model", parts=[part]), usage_metadata=usage)


def remember(fact: str, tool_context: ToolContext) -> dict[str, Any]:
    """Remember a fact about the user.

    Args:
        fact: what to remember.
    """
    state = tool_context.state
    state["user:fact"] = fact  # every session of this user sees it
    state["app:facts_remembered"] = int(state.get("app:facts_remembered") or 0) + 1  # every user of the app
    state["temp:draft"] = f"about to confirm {fact!r}"  # this invocation only: never stored
    state["last_tool"] = "remember"  # this session
    return {"status": "remembered", "fact": fact}


def build_agent(script: Sequence[types.Part]) -> LlmAgent:
    """The agent: the scripted model and the ``remember`` tool."""
    return LlmAgent(
        name="assistant",
        model=ScriptedModel(script=list(script)),
        instruction="Remember what the user tells you about themselves.",
        tools=[remember],
    )


def first_session_script(fact: str) -> list[types.Part]:
    """The model's turns in the first session: call ``remember``, then confirm."""
    return [
        types.Part(function_call=types.FunctionCall(name="remember", args={"fact": fact})),
        types.Part(text=f"Noted: you {fact}."),
    ]


async def ask(runner: Runner, user_id: str, session_id: str, text: str) -> list[str]:
    """Run one turn; the agent's text replies."""
    replies: list[str] = []
    message = types.Content(role="user", parts=[types.Part(text=text)])
    async for event in runner.run_async(user_id=user_id, session_id=session_id, new_message=message):
        if event.content and event.content.parts:
            replies.extend(part.text for part in event.content.parts if part.text)
    return replies


async def main(url: str, app_name: str = "adk_example", user_id: str | None = None) -> dict[str, Any]:
    """Two sessions of one user; returns what the second one saw (printed when run as a script)."""
    user_id = user_id or f"user-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    async with AsyncClient(url) as client:
        sessions = RemoteSessionService(client)
        memory = RemoteMemoryService(client)

        # Session 1: the user says something worth remembering.
        runner = Runner(
            app_name=app_name,
            agent=build_agent(first_session_script("like green tea")),
            session_service=sessions,
            memory_service=memory,
        )
        first = await sessions.create_session(app_name=app_name, user_id=user_id)
        replies = await ask(runner, user_id, first.id, "I like green tea, remember that.")
        stored = await sessions.get_session(app_name=app_name, user_id=user_id, session_id=first.id)
        assert stored is not None
        await memory.add_session_to_memory(stored)

        # Session 2: a new conversation starts from the user's state and their long-term memory.
        runner = Runner(
            app_name=app_name,
            agent=build_agent([types.Part(text="You like green tea.")]),
            session_service=sessions,
            memory_service=memory,
        )
        second = await sessions.create_session(app_name=app_name, user_id=user_id)
        user_state = await sessions.get_user_state(app_name=app_name, user_id=user_id)
        recalled = await memory.search_memory(app_name=app_name, user_id=user_id, query="what tea do I like?")
        replies += await ask(runner, user_id, second.id, "What do I like to drink?")
        result = {
            "replies": replies,
            "first_session_state": stored.state,
            "first_session_events": len(stored.events),
            "second_session_state": second.state,
            "user_state": user_state,
            "recalled": [m.content.parts[0].text for m in recalled.memories if m.content.parts],
            "wall_time_s": round(time.perf_counter() - started, 3),
        }
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:3000", help="the API (make run's default)")
    args = parser.parse_args()
    for key, value in asyncio.run(main(args.url)).items():
        print(f"{key}: {value}")
