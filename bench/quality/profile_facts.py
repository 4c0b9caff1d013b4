"""Precision and recall of the offline fact extractor (``policy/facts.py``) on labelled LoCoMo turns.

    .venv/bin/python -m bench.quality.profile_facts [--show]

Data: /work/shared/data/locomo/*.json (see its README). The labelled set: 30 turns drawn at random from each of
the five conversations (``random.Random(f"profile-{name}")``, either speaker: each states facts about
themself), labelled by hand, before the extractor was run on them, with the stable facts each states about its
speaker (``category:keyword``; most turns state none). Events ("we went biking"), plans, moods, and facts about
someone else are not labelled.

Tuning / validation split by conversation: the patterns may be tuned on conversations 26, 30 and 41 only;
conversations 42 and 43 are the validation half and were never used to change the extractor. "validation 2" is a
second, disjoint sample of 40 turns from each of 42 and 43, drawn and labelled after the first was measured.

Matching: an extracted fact matches a label when their categories agree (``preference`` and ``other`` count as
one: a hobby is either) and the label's keyword appears in the fact's text (case-insensitive). Precision: the
share of extracted facts that match a label of their turn; recall: the share of labels some extracted fact of
their turn matches. ``--show`` lists every miss and every false positive.
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "layers" / "shared"))

from agent_memory.policy.facts import extract_facts
from bench.quality.locomo import Conversation, load_conversations

PER_CONVERSATION = 30
TUNING = ("26", "30", "41")
VALIDATION = ("42", "43")
_LOOSE = frozenset({"preference", "other"})

# The hand labels of the sampled turns (turns not listed state no stable fact about their speaker).
LABELS: dict[str, dict[str, list[str]]] = {
    "26": {
        "D1:2": ["person:kids"],
        "D5:12": ["preference:pottery"],
        "D7:11": ["preference:becoming nicole"],
        "D13:3": ["person:oscar"],
        "D13:15": ["preference:art"],
        "D15:2": ["person:kids"],
        "D15:12": ["preference:live music"],
        "D15:26": ["preference:clarinet"],
        "D17:16": ["preference:blue"],
    },
    "30": {
        "D1:3": ["work:door dash"],
        "D3:6": ["work:store"],
        "D5:2": ["preference:danc"],
        "D6:12": ["work:biz"],
        "D9:5": ["preference:danc"],
        "D11:1": ["work:dance studio"],
        "D14:3": ["work:business"],
    },
    "41": {
        "D1:3": ["other:homeless shelter", "preference:aerial yoga"],
        "D6:10": ["other:food drive"],
        "D18:15": ["preference:aerial yoga"],
    },
    "42": {
        "D1:14": ["preference:drama", "preference:romcom"],
        "D4:10": ["work:screenplay"],
        "D8:16": ["preference:icecream"],
        "D15:4": ["preference:iron man"],
        "D22:18": ["work:gam"],
        "D27:10": ["preference:writing"],
    },
    "43": {
        "D1:5": ["work:minnesota wolves"],
        "D2:1": ["preference:fantasy"],
        "D8:16": ["preference:harry potter"],
        "D19:10": ["work:basketball"],
        "D27:19": ["preference:harry potter"],
    },
}

# A second held-out sample of the validation conversations (40 turns each, none of the first sample's; seed
# ``profile-v2-{name}``), drawn and labelled after the first validation was measured, so that the extractor is
# also scored on turns no decision about it could have seen.
PER_CONVERSATION_V2 = 40
LABELS_V2: dict[str, dict[str, list[str]]] = {
    "42": {
        "D4:6": ["preference:sweet"],
        "D11:3": ["preference:hik"],
        "D12:8": ["allergy:allergic"],
        "D15:1": ["work:screenplay"],
        "D16:1": ["work:screenplay"],
        "D19:1": ["work:gam"],
        "D21:1": ["work:writer"],
        "D28:25": ["preference:turtle"],
        "D28:28": ["allergy:allergic"],
    },
    "43": {
        "D8:14": ["preference:piano"],
        "D19:14": ["preference:fantasy"],
        "D21:1": ["other:travel"],
        "D21:9": ["other:travel", "preference:instrument"],
        "D21:11": ["preference:violin", "preference:classical"],
    },
}


@dataclass(frozen=True)
class Labelled:
    conversation: str
    dia_id: str
    text: str
    labels: tuple[tuple[str, str], ...]


def sample(conversation: Conversation, second: bool = False) -> list[Labelled]:
    """The labelled sample of ``conversation`` (``second``: the second held-out sample, disjoint from the first)."""
    first = random.Random(f"profile-{conversation.name}").sample(range(len(conversation.turns)), PER_CONVERSATION)
    if second:
        rest = [i for i in range(len(conversation.turns)) if i not in set(first)]
        picked = sorted(random.Random(f"profile-v2-{conversation.name}").sample(rest, PER_CONVERSATION_V2))
    else:
        picked = sorted(first)
    labels = (LABELS_V2 if second else LABELS).get(conversation.name, {})
    out = []
    for i in picked:
        turn = conversation.turns[i]
        pairs = tuple(tuple(label.split(":", 1)) for label in labels.get(turn.dia_id, []))
        out.append(Labelled(conversation.name, turn.dia_id, turn.text, pairs))  # type: ignore[arg-type]
    unknown = set(labels) - {t.dia_id for t in out}
    assert not unknown, f"labels of turns not in the sample of {conversation.name}: {unknown}"
    return out


def matches(category: str, text: str, label: tuple[str, str]) -> bool:
    same = category == label[0] or {category, label[0]} <= _LOOSE
    return same and label[1].lower() in text.lower()


@dataclass
class Score:
    extracted: int = 0
    correct: int = 0
    labels: int = 0
    found: int = 0

    @property
    def precision(self) -> float:
        return self.correct / self.extracted if self.extracted else 1.0

    @property
    def recall(self) -> float:
        return self.found / self.labels if self.labels else 1.0


def score(turns: list[Labelled], show: bool) -> Score:
    total = Score()
    for turn in turns:
        facts = [(f["category"], f["text"]) for f in extract_facts(turn.text)]
        total.extracted += len(facts)
        total.labels += len(turn.labels)
        for category, text in facts:
            if any(matches(category, text, label) for label in turn.labels):
                total.correct += 1
            elif show:
                print(
                    f"  false positive {turn.conversation} {turn.dia_id}: {category}: {text!r} <- {turn.text[:100]!r}"
                )
        for label in turn.labels:
            if any(matches(c, t, label) for c, t in facts):
                total.found += 1
            elif show:
                print(f"  missed {turn.conversation} {turn.dia_id}: {label} <- {turn.text[:100]!r}")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--show", action="store_true", help="list misses and false positives")
    args = parser.parse_args()
    conversations = {c.name: c for c in load_conversations()}
    print(f"{'split':<12} {'turns':>5} {'labels':>6} {'facts':>5} {'precision':>9} {'recall':>6}")
    splits = (("tuning", TUNING, False), ("validation", VALIDATION, False), ("validation 2", VALIDATION, True))
    for name, split, second in splits:
        if args.show:
            print(f"{name}:")
        turns = [t for c in split for t in sample(conversations[c], second)]
        s = score(turns, args.show)
        print(f"{name:<12} {len(turns):>5} {s.labels:>6} {s.extracted:>5} {s.precision:>9.2f} {s.recall:>6.2f}")


if __name__ == "__main__":
    main()
