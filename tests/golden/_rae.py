"""Golden checker for ``rae.jsonl``: legos and SPIRAL RAE baselines, replayed batch by batch.

legos: one :class:`RAEState` carried across batches, ``order="legos"``, ``policy="reference"``
(legos' order of processing, so an inconsistent batch raises after earlier episode types were
updated); an expected ``ValueError`` must be our :class:`InconsistentRewardKeysError` at the same
batch, and ``policy="strict"`` must raise there too, leaving the state untouched.
SPIRAL: keyed by player only, both players' baselines exist from the start (SPIRAL creates its EMAs
up front), ``reward_scaling`` applied. Floats compare exactly: both references compute in float64.
"""

from __future__ import annotations

from typing import Any

from kernel import InconsistentRewardKeysError, RAEGame, RAEState, rae_batch


def _games(batch: list[dict[str, Any]]) -> list[RAEGame]:
    return [RAEGame(g["episode_type"], g["rewards"], g["step_actors"]) for g in batch]


def _nested(state: RAEState) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for (etype, actor), value in state.as_dict().items():
        out.setdefault(str(etype), {})[actor] = value
    return {t: dict(sorted(v.items())) for t, v in sorted(out.items())}


def _check_legos(inp: dict[str, Any], expected: list[dict[str, Any]]) -> str | None:
    state = RAEState.empty()
    batches = inp["batches"]
    if len(expected) > len(batches):
        return f"legos: {len(expected)} expected entries for {len(batches)} batches"
    for b, exp in enumerate(expected):
        games = _games(batches[b])
        if "error" in exp:
            if exp["error"]["type"] != "ValueError":
                return f"legos batch {b}: unexpected reference error type {exp['error']['type']}"
            for policy in ("reference", "strict"):
                try:
                    rae_batch(games, state, decay=inp["decay"], order="legos", policy=policy)
                except InconsistentRewardKeysError as e:
                    if policy == "strict" and e.state is not state:
                        return f"legos batch {b}: strict policy changed the state before raising"
                else:
                    return f"legos batch {b}: expected ValueError (inconsistent keys), policy={policy} passed"
            if b != len(expected) - 1:
                return f"legos batch {b}: the reference stops at its error"
            return None
        out = rae_batch(games, state, decay=inp["decay"], order="legos", policy="reference")
        strict = rae_batch(games, state, decay=inp["decay"], order="legos", policy="strict")
        got = [a.tolist() for a in out.step_advantages]
        if got != exp["advantages"]:
            return f"legos batch {b}: advantages {got} != {exp['advantages']}"
        if _nested(out.state) != exp["baselines"]:
            return f"legos batch {b}: baselines {_nested(out.state)} != {exp['baselines']}"
        if [a.tolist() for a in strict.step_advantages] != got or _nested(strict.state) != _nested(out.state):
            return f"legos batch {b}: policy='strict' differs from policy='reference'"
        state = out.state
    return None


def _check_spiral(inp: dict[str, Any], expected: list[dict[str, Any]] | dict[str, Any] | None) -> str | None:
    if expected is None:  # the reference applies only to games rewarding exactly players "0" and "1"
        return None
    decay, scaling = inp["decay"], inp["reward_scaling"]
    if isinstance(expected, dict):
        try:
            rae_batch([], RAEState.empty(), decay=decay, order="spiral")
        except ValueError:
            return None
        return f"spiral: expected a decay error for decay={decay}"
    state = RAEState.from_dict({(None, "0"): 0.0, (None, "1"): 0.0})
    for b, (batch, exp) in enumerate(zip(inp["batches"], expected, strict=True)):
        out = rae_batch(_games(batch), state, decay=decay, order="spiral", reward_scaling=scaling)
        got_games = [
            {p: {"baseline_before": base[p], "advantage": adv[p]} for p in ("0", "1")}
            for adv, base in zip(out.advantages, out.baselines, strict=True)
        ]
        if got_games != exp["games"]:
            return f"spiral batch {b}: games {got_games} != {exp['games']}"
        got_base = {actor: v for (_, actor), v in out.state.as_dict().items()}
        if got_base != exp["baselines"]:
            return f"spiral batch {b}: baselines {got_base} != {exp['baselines']}"
        state = out.state
    return None


def check(record: dict[str, Any]) -> str | None:
    """None when ``record`` matches both the legos and the SPIRAL replays, else a short message."""
    inp, exp = record["input"], record["expected"]
    message = _check_legos(inp, exp["legos"])
    if message is None:
        message = _check_spiral(inp, exp["spiral"])
    return message
