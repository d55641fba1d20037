"""Token parity for generations: per request, where the two outputs part and how far the drift goes after it."""

from __future__ import annotations

import json
from dataclasses import dataclass

from promote.accel.results import ParityResult, RequestParity
from promote.core.bounded_json import JsonRejected, loads

Request = str | int
NEITHER = 'is not an array (.npy, .npz, .safetensors), a JSON list of token ids or JSON lines {"request", "tokens"}'


class TokenError(ValueError):
    """Token output that cannot be read or paired; the message is one line naming the output by its role."""


@dataclass(frozen=True)
class Generations:
    """One run's token ids per request, in its order; `flat` when it wrote one list of ids (one request)."""

    requests: tuple[tuple[Request, tuple[int, ...]], ...]
    flat: bool = False
    lines: bool = False  # JSON lines {"request": ..., "tokens": [...]}, paired by request


def _ids(value: object) -> tuple[int, ...] | None:
    if not isinstance(value, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        return None
    return tuple(value)


def _key(request: object) -> Request:
    """A request as a key: a string or an integer as it is, anything else as canonical JSON."""
    if isinstance(request, (str, int)) and not isinstance(request, bool):
        return request
    return json.dumps(request, sort_keys=True)


def _lines(text: str, role: str) -> Generations:
    out: dict[Request, tuple[int, ...]] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = loads(line, line=n)
        except JsonRejected:
            raw = None
        ids = _ids(raw.get("tokens")) if isinstance(raw, dict) and "request" in raw else None
        if ids is None or not isinstance(raw, dict):
            raise TokenError(f'{role}: line {n} is not {{"request": ..., "tokens": [token ids]}}')
        key = _key(raw["request"])
        if key in out:
            raise TokenError(f"{role}: request {json.dumps(key)} appears twice")
        out[key] = ids
    if not out:
        raise TokenError(f"{role} is empty")
    return Generations(tuple(out.items()), lines=True)


def read_tokens(text: str, role: str) -> Generations:
    """A list of token ids, a list of token-id lists (ragged allowed), or JSON lines of requests and their tokens."""
    try:
        value = loads(text)
    except JsonRejected as e:
        if e.kind == "syntax" and text.lstrip().startswith("{"):
            return _lines(text, role)
        raise TokenError(f"{role} {NEITHER}" if e.kind == "syntax" else f"{role}: {e}") from None
    if isinstance(value, dict):
        return _lines(text, role)
    flat = _ids(value)
    if flat is not None:
        return Generations(((0, flat),), flat=True)
    nested = [_ids(v) for v in value] if isinstance(value, list) else [None]
    if not all(ids is not None for ids in nested):
        raise TokenError(f"{role} is JSON but not a list of token ids, or of token-id lists (one per request)")
    return Generations(tuple((i, ids) for i, ids in enumerate(nested) if ids is not None))


def diverge(request: Request, off: tuple[int, ...], on: tuple[int, ...]) -> RequestParity:
    """Where two generations part, and how many positions differ from there (a position only one has differs)."""
    common = min(len(off), len(on))
    first = next((i for i in range(common) if off[i] != on[i]), None)
    if first is None and len(off) != len(on):
        first = common
    if first is None:
        return RequestParity(request, None, 0, len(off), len(on))
    differing = sum(off[i] != on[i] for i in range(first, common)) + abs(len(off) - len(on))
    return RequestParity(request, first, differing, len(off), len(on))


def _paired(off: Generations, on: Generations) -> list[tuple[Request, tuple[int, ...], tuple[int, ...]]]:
    if off.lines or on.lines:
        keys_off, keys_on = dict(off.requests), dict(on.requests)
        for way, mine, other in (("off", keys_off, keys_on), ("on", keys_on, keys_off)):
            only = [k for k in mine if k not in other]
            if only:
                raise TokenError(f"request {json.dumps(only[0])} is only in the parity output with the switch {way}")
        return [(k, ids, keys_on[k]) for k, ids in off.requests]
    if len(off.requests) != len(on.requests):
        raise TokenError(f"the parity outputs hold {len(off.requests)} requests off and {len(on.requests)} on")
    return [(k, a, b) for (k, a), (_, b) in zip(off.requests, on.requests, strict=True)]


def compare_tokens(off: Generations, on: Generations) -> ParityResult:
    """identical (every request, every position) or differs, per request and in total."""
    requests = tuple(diverge(k, a, b) for k, a, b in _paired(off, on))
    total = sum(max(r.length_off, r.length_on) for r in requests)
    mismatched = sum(r.differing for r in requests)
    first = next((r for r in requests if r.first_divergence is not None), None)
    where = None
    if first is not None:
        if off.flat:
            where = f"[{first.first_divergence}]"
        elif off.lines:
            where = f"request {json.dumps(first.request)}, token {first.first_divergence}"
        else:
            where = f"[{first.request}, {first.first_divergence}]"
    return ParityResult(
        verdict="differs" if first is not None else "identical", total=total, mismatched=mismatched,
        first_mismatch=where, tokens=True, tokens_flipped=mismatched, requests=requests,
    )  # fmt: skip
