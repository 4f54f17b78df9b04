"""Free text of journal entries, stored as texts the entry names rather than holds.

A journal entry's payload is hashed into the chain, so text written into it stays there
for good: no purge can cut it without breaking the chain. The free text an entry carries
(a decision's rationale, a failure's or a reset's reason) is therefore stored as a text
of the ledger, by sha256 as prompts and session steps are, and the payload names it under
``<name>_sha256``; ``forget`` cuts it like any stored text, leaving ``[PURGED]``. Entries
written before hold it inline under ``<name>``, and every read takes either form.
"""

from __future__ import annotations

from collections.abc import Callable

from indexers import sha256_text
from ledger import JSON

__all__ = ["FREE_TEXTS", "name_text", "payload_text", "shown_payload"]

FREE_TEXTS = ("rationale", "reason")  # the free texts a journal entry names by sha256


def name_text(payload: dict[str, JSON], name: str, text: str | None) -> list[str]:
    """Name ``text`` in ``payload`` by its sha256 (under ``<name>_sha256``) and return the
    texts to store with the entry: none, and nothing named, when it is None or empty."""
    if not text:
        return []
    payload[f"{name}_sha256"] = sha256_text(text)
    return [text]


def payload_text(payload: JSON, name: str, read: Callable[[str], str]) -> str | None:
    """The free text ``name`` of an entry's ``payload``: the stored text it names
    (``read`` gives it by sha256, or what a purge left of it), else the text an entry
    written before holds inline; None when it has none."""
    if not isinstance(payload, dict):
        return None
    sha = payload.get(f"{name}_sha256")
    if isinstance(sha, str):
        return read(sha)
    inline = payload.get(name)
    return inline if isinstance(inline, str) else None


def shown_payload(payload: JSON, read: Callable[[str], str]) -> JSON:
    """``payload`` with each free text it names also under its name, as entries written
    before held it (what a record shows, as feedback shows its stored summaries)."""
    if not isinstance(payload, dict) or not any(f"{n}_sha256" in payload for n in FREE_TEXTS):
        return payload
    shown = dict(payload)
    for name in FREE_TEXTS:
        if f"{name}_sha256" in payload:
            shown[name] = payload_text(payload, name, read)
    return dict(sorted(shown.items()))  # in the order of the stored (canonical) payload
