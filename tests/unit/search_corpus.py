"""A small corpus of memories for the search index's unit tests, and the ids of a result."""

from __future__ import annotations

from agent_memory.search import Doc

DOCS = [
    Doc("m1", "Caroline: I went to the LGBTQ support group yesterday and it was powerful.", "8 May, 2023"),
    Doc("m2", "Melanie: I painted that lake sunrise last year, it is special to me."),
    Doc("m3", "Caroline: I'm researching adoption agencies, I want to give kids a loving home."),
    Doc("m4", "Melanie: We went camping in the mountains with the kids last weekend."),
    Doc("m5", "Caroline: My car broke down on the highway, so I took the bus to work."),
    Doc("m6", "Melanie: Running keeps me sane; I ran a charity race for mental health."),
]


def ids(results: list[tuple[str, float]]) -> list[str]:
    return [doc_id for doc_id, _ in results]
