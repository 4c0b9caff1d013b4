"""Agent memory from plain Python, no framework: run it against `make run`, it prints what it did.

    make run                                    # in another terminal: the API on http://127.0.0.1:3000
    make example-python                         # or: python clients/python/examples/plain_python.py [--url URL]

A user tells a travel assistant where she lives and what she wants, over a few turns of a session (state by
scope, a conditional append); the assistant reads the context for its model (within a token budget), asks for a
compaction, saves the user's turns to long-term memory and, in a second session, finds them again by a
question and reads what is known about her (the profile).
"""

from __future__ import annotations

import argparse
import json
import uuid
from typing import Any

from agent_memory_client import Client
from agent_memory_client.errors import PreconditionFailed

TURNS = [
    ("user", "Hi, I live in Lisbon and I'm planning a trip to Porto in May."),
    ("assistant", "Lovely. What kind of place would you like to stay in?"),
    ("user", "A quiet hotel near the river, please. I'm allergic to cats."),
    ("assistant", "Noted: quiet, by the Douro, no cats. Any budget?"),
    ("user", "Under 150 euros a night."),
    ("assistant", "I'll look for quiet hotels by the river under 150 euros."),
]


def main(url: str, app_name: str = "plain-python-example", user_id: str | None = None) -> dict[str, Any]:
    """Two sessions of one user; returns what each step answered (printed when run as a script)."""
    user_id = user_id or f"user-{uuid.uuid4().hex[:8]}"
    done: dict[str, Any] = {}
    with Client(url) as client:
        session = client.create_session(app_name, user_id, state={"user:home": "Lisbon", "trip": "Porto"})
        done["session"] = {"id": session.id, "state": session.state}

        version = session.version
        for role, text in TURNS:
            # Conditional on the version this writer holds: another writer's append in between is a 412.
            result = client.append_event(
                app_name, user_id, session.id, {"role": role, "content": text}, if_match=version
            )
            version = result.version
        try:
            client.append_event(app_name, user_id, session.id, {"role": "user", "content": "late"}, if_match=0)
            done["stale_append"] = "stored"
        except PreconditionFailed:
            done["stale_append"] = "refused: the session moved on since version 0"

        context = client.get_context(app_name, user_id, session.id, format="openai", max_tokens=2000)
        done["context"] = [f"{m['role']}: {m['content']}" for m in context.messages]
        # On demand (a schedule does it too); a session this short keeps its raw events and says why.
        compacted = client.compact(app_name, user_id, session.id)
        done["compaction"] = "summarised" if compacted.compacted else compacted.reason

        saved = client.save_memories(app_name, user_id, session_id=session.id)
        done["memories_saved"] = saved.saved

        # A new session of the same user: the user: state carries over, the memories are found by a question.
        later = client.create_session(app_name, user_id)
        done["second_session_state"] = later.state
        hits = client.search_memories(app_name, user_id, "Is the user allergic to any animal?", top_k=3)
        done["recalled"] = [hit.text for hit in hits]
        done["profile"] = [f"{fact.category}: {fact.text}" for fact in client.get_profile(app_name, user_id).facts]
    return done


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:3000", help="the API (default: make run's)")
    for step, answer in main(parser.parse_args().url).items():
        print(f"{step}: {json.dumps(answer, ensure_ascii=False)}")
