"""Sample debates: a seeded generator of realistic-looking transcripts, and the shipped sample file.

``python -m tools.samples`` rewrites ``adapters/data/sample_debates.jsonl`` (``--check`` only
verifies that the file is up to date). The questions come from the shipped bank
``adapters/data/sample_bank.jsonl``. ``debate-kernel score`` with no file scores those samples.

The generated outputs imitate what instruction-tuned models write in the debate recipe: solutions
with reasoning, evaluations, comparisons in many styles (``Agent 1 > Agent 2``, ``agent 2 = Agent 0``,
chains, ``<`` votes, markdown emphasis), Qwen3-style think blocks (with and without the opening tag,
with tag mentions and draft answers inside), code fences, preambles, repeated answer blocks, consensus
spelled in several ways, and malformed outputs (missing tags, renamed tags, a think block cut off by
the token limit, a final tag left open because the sampler stripped the stop string). Some debates
carry synthetic token ids (one id per UTF-8 byte) and sampler logprobs so that datums are exercised.

Every debate is built so that its recorded end agrees with both parse policies: an output that only
one policy rejects is always the debate's last turn, and consensus spellings that the policies read
differently appear only where the debate ends anyway. ``meta.features`` lists what each debate
exercises; ``meta.plan`` is how the generator meant it to end (``consensus``, ``max_rounds``,
``parse_failure``, or ``stop_string``: the last output lost its closing tag).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from adapters import data

__all__ = [
    "DEFAULT_COUNT",
    "DEFAULT_SEED",
    "SAMPLE_FILE",
    "generate_debates",
    "main",
    "sample_path",
    "sample_text",
]

DEFAULT_SEED = 20251121
"""Seed of the shipped sample file."""
DEFAULT_COUNT = 120
"""Number of debates in the shipped sample file."""
SAMPLE_FILE = data.SAMPLE_DEBATES
"""File name of the shipped samples inside ``adapters/data``."""


class Wrong(NamedTuple):
    """A wrong answer with the flawed derivation an agent might write and the rebuttal another gives."""

    answer: str
    reasoning: str
    rebuttal: str


class Question(NamedTuple):
    """A bank question: its correct answer and derivation, and wrong answers."""

    topic: str
    question: str
    answer: str
    reasoning: str
    wrong: tuple[Wrong, ...]


def load_bank() -> tuple[Question, ...]:
    """The question bank shipped in ``adapters/data/sample_bank.jsonl``."""
    return tuple(
        Question(
            r["topic"], r["question"], r["answer"], r["reasoning"], tuple(Wrong(**w) for w in r["wrong"])
        )
        for r in data.read_jsonl(data.SAMPLE_BANK)
    )


BANK = load_bank()


def sample_text() -> str:
    """The shipped sample debates (JSON Lines text)."""
    return data.read_text(SAMPLE_FILE)


def sample_path() -> Path:
    """Path of the sample file in the source tree (where ``python -m tools.samples`` writes it)."""
    return data.path(SAMPLE_FILE)


# ------------------------------------------------------------------------------------------------
# Field texts


def _final_answer(rng: random.Random, answer: str) -> str:
    return rng.choice(
        (
            f"Final answer: {answer}",
            f"**Answer: {answer}**",
            f"The answer is {answer}.",
            f"So the answer is **{answer}**.",
            f"$\\boxed{{{answer}}}$",
            f"Answer: {answer}",
        )
    )


def _solution(rng: random.Random, q: Question, answer: str, *, changed: bool, kept: bool) -> str:
    reasoning = (
        q.reasoning if answer == q.answer else next(w.reasoning for w in q.wrong if w.answer == answer)
    )
    lead = ""
    if changed:
        lead = rng.choice(
            (
                "After reading the other solutions I am revising my answer. ",
                "I made a mistake in the previous round. ",
                "Revised: ",
                "On reflection the others are right. ",
            )
        )
    elif kept:
        lead = rng.choice(("I stand by my previous answer. ", "Re-checking my work: ", "", ""))
    if rng.random() < 0.5:
        return f"{lead}{reasoning}\n\n{_final_answer(rng, answer)}"
    steps = [s.strip() for s in reasoning.replace("; ", ". ").split(". ") if s.strip()]
    numbered = "\n".join(f"{k}. {s.rstrip('.')}." for k, s in enumerate(steps, start=1))
    return f"{lead}\n{numbered}\n\n{_final_answer(rng, answer)}".strip()


def _rebuttal(q: Question, answer: str) -> str:
    for w in q.wrong:
        if w.answer == answer:
            return w.rebuttal
    return "I cannot reproduce that derivation"


def _evaluation(rng: random.Random, q: Question, me: int, mine: str, seen: dict[int, str]) -> str:
    if not seen:
        return "N/A"
    style = rng.choice(("paragraph", "bullets", "bold"))
    parts = []
    for j, ans in sorted(seen.items()):
        if ans == mine:
            body = rng.choice(
                (
                    f"answers {ans}, which matches my result; the steps check out.",
                    f"gets {ans} with a correct derivation.",
                    f"is right ({ans}), and the explanation is clear.",
                    f"also arrives at {ans}. I verified each step.",
                )
            )
        elif mine == q.answer:
            body = f"answers {ans}, but {_rebuttal(q, ans)}."
        else:
            body = rng.choice(
                (
                    f"answers {ans}, which I think is wrong; my derivation gives {mine}.",
                    f"claims {ans}. I get {mine}, so one of us slipped, and I do not see my error.",
                )
            )
        if style == "paragraph":
            parts.append(f"Agent {j} {body}")
        elif style == "bullets":
            parts.append(f"- Agent {j} {body}")
        else:
            parts.append(f"**Agent {j}** {body}")
    return ("\n" if style != "paragraph" else " ").join(parts)


def _pairs(rng: random.Random, me: int, mine: str, seen: dict[int, str]) -> list[tuple[int, str, int]]:
    """Comparisons agent ``me`` would make among the others it has seen: agreeing agents beat the rest."""
    others = sorted(seen)
    cands = []
    for x in range(len(others)):
        for y in range(x + 1, len(others)):
            a, b = others[x], others[y]
            good_a, good_b = seen[a] == mine, seen[b] == mine
            if good_a and not good_b:
                cands.append((a, ">", b))
            elif good_b and not good_a:
                cands.append((b, ">", a))
            elif seen[a] == seen[b]:
                cands.append((a, "=", b) if rng.random() < 0.7 else (b, "=", a))
            else:
                cands.append((a, ">", b) if rng.random() < 0.5 else (b, ">", a))
    rng.shuffle(cands)
    k = min(len(cands), rng.choice((1, 2, 2, 3, 3)))
    return cands[:k]


def _vote_line(rng: random.Random, style: str, a: int, op: str, b: int) -> str:
    if style == "lt" and op == ">":
        return f"Agent {b} < Agent {a}"
    if style == "lower":
        return f"agent {a} {op} Agent {b}" if rng.random() < 0.5 else f"agent {a} {op} agent {b}"
    if style == "bold":
        return f"**Agent {a}** {op} **Agent {b}**"
    if style == "nospace":
        return f"Agent{a} {op} Agent{b}"
    if style == "bullet":
        return f"- Agent {a} {op} Agent {b}"
    if style == "prose":
        why = "better reasoning" if op == ">" else "same answer"
        return f"Agent {a} {op} Agent {b} ({why})"
    if style == "ge" and op == ">":
        return f"Agent {a} >= Agent {b}"
    return f"Agent {a} {op} Agent {b}"


def _comparison(
    rng: random.Random, pairs: list[tuple[int, str, int]], me: int, num_agents: int, features: set[str]
) -> tuple[str, str]:
    """Returns (comparison text, vote style) for the chosen pairs, sometimes with odd extra lines."""
    style = rng.choices(
        ("plain", "bullet", "prose", "lt", "chain", "lower", "bold", "nospace", "ge"),
        weights=(40, 12, 8, 8, 8, 6, 6, 3, 2),
    )[0]
    lines = []
    if not pairs:
        if num_agents == 2 and rng.random() < 0.35:
            other = 1 - me
            lines.append(
                f"Agent {other} = Agent {me}" if rng.random() < 0.5 else f"Agent {me} > Agent {other}"
            )
            features.add("self_vote")
        else:
            return (rng.choice(("N/A", "N/A", "", "None yet.")), "none")
    if style == "chain":
        wins = [(a, b) for a, op, b in pairs if op == ">"]
        chained = False
        for a, b in wins:
            nxt = [c for c2, c in wins if c2 == b]
            if nxt:
                lines.append(f"Agent {a} > Agent {b} > Agent {nxt[0]}")
                pairs = [p for p in pairs if (p[0], p[2]) not in {(a, b), (b, nxt[0])}]
                chained = True
                features.add("vote_chain")
                break
        if not chained:
            style = "plain"
    for a, op, b in pairs:
        lines.append(_vote_line(rng, style, a, op, b))
    if style not in ("plain", "none"):
        features.add(f"vote_{style}")
    r = rng.random()
    if r < 0.04:
        lines.append(f"Agent {num_agents + 2} > Agent 0")
        features.add("vote_out_of_range")
    elif r < 0.07:
        x = rng.randrange(num_agents)
        lines.append(f"Agent {x} = Agent {x}")
        features.add("vote_self_pair")
    elif r < 0.10 and num_agents > 2:
        lines.append(f"Agent {me} > Agent {(me + 1) % num_agents}")
        features.add("self_vote")
    return "\n".join(lines), style


_YES_CANONICAL = ("YES", "YES", "YES", "yes", "Yes")
_YES_ANY = ("YES", "Yes.", "**YES**", "YES - we agree", "yes", "Yes")
_NO_ANY = ("NO", "NO", "NO", "No", "no", "NO.", "Not yet")


def _consensus_reason(rng: random.Random, yes: bool, mine: str, seen: dict[int, str]) -> str:
    if yes:
        return rng.choice(
            (
                f"All agents now give {mine}.",
                f"Everyone agrees on {mine} and the derivations are consistent.",
                f"The solutions converge on {mine}; no remaining objections.",
                "We all reached the same answer with sound reasoning.",
            )
        )
    differ = sorted(j for j, ans in seen.items() if ans != mine)
    if not seen:
        return "This is the first solution; nothing to agree with yet."
    if differ:
        j = differ[0]
        return rng.choice(
            (
                f"Agent {j} still answers {seen[j]}.",
                f"Not everyone agrees yet: answers are {', '.join(sorted(set(seen.values()) | {mine}))}.",
                f"I disagree with Agent {j}.",
            )
        )
    return rng.choice(
        (
            "The answers match so far, but not every agent has confirmed.",
            "I want one more round to double-check.",
            "Agreement is likely but not yet confirmed by everyone.",
        )
    )


# ------------------------------------------------------------------------------------------------
# Whole responses


def _assemble(rng: random.Random, fields: dict[str, str], *, stop_stripped: bool = False) -> str:
    layout = rng.choice(("lines", "lines", "compact", "spaced"))
    order = ("solution", "evaluation", "comparison", "consensus", "consensus_reason")
    blocks = []
    for tag in order:
        body = fields[tag]
        close = f"</{tag}>"
        if stop_stripped and tag == "consensus_reason":
            close = ""
        if layout == "compact" or tag == "consensus":
            blocks.append(f"<{tag}>{body}{close}")
        else:
            blocks.append(f"<{tag}>\n{body}\n{close}".rstrip())
    sep = "\n\n" if layout == "spaced" else "\n"
    return sep.join(blocks)


def _think(rng: random.Random, q: Question, mine: str, seen: dict[int, str]) -> str:
    lines = [
        rng.choice(
            (
                "Okay, let me work through this carefully.",
                "Let me think about the question first.",
                "Alright, I need to solve this and then look at the others.",
            )
        ),
        f"The question: {q.question}",
        rng.choice(("Computing:", "Working:", "Step by step:")) + " " + q.reasoning,
    ]
    if mine != q.answer:
        lines.append(f"Hmm, but I keep getting {mine} my way. I'll go with {mine}.")
    for j, ans in sorted(seen.items())[:2]:
        lines.append(
            f"Agent {j} said {ans}. " + ("Same as mine." if ans == mine else "That differs from mine.")
        )
    lines.append(rng.choice(("Now write the answer.", "Let me format the response.", "OK.")))
    return "\n".join(lines)


def _response(
    rng: random.Random,
    q: Question,
    *,
    me: int,
    num_agents: int,
    mine: str,
    seen: dict[int, str],
    yes_text: str,
    changed: bool,
    kept: bool,
    wrapper: str,
    features: set[str],
    stop_stripped: bool = False,
) -> str:
    pairs = _pairs(rng, me, mine, seen)
    comparison, _ = _comparison(rng, list(pairs), me, num_agents, features)
    yes = yes_text.strip("*. ").upper().startswith("YES")
    fields = {
        "solution": _solution(rng, q, mine, changed=changed, kept=kept),
        "evaluation": _evaluation(rng, q, me, mine, seen),
        "comparison": comparison,
        "consensus": yes_text,
        "consensus_reason": _consensus_reason(rng, yes, mine, seen),
    }
    answer = _assemble(rng, fields, stop_stripped=stop_stripped)
    if stop_stripped:
        features.add("stop_string")
        answer = answer.rstrip()
    if wrapper == "plain":
        return answer
    features.add(wrapper)
    if wrapper == "fence":
        return f"```xml\n{answer}\n```"
    if wrapper == "preamble":
        return (
            rng.choice(("Here is my response for this round.\n\n", "Sure! Below is my answer.\n\n")) + answer
        )
    if wrapper == "duplicate" and pairs:
        flipped = [(b, op, a) for a, op, b in pairs]
        draft = dict(fields, comparison="\n".join(f"Agent {a} {op} Agent {b}" for a, op, b in flipped))
        first = _assemble(rng, draft)
        return f"{first}\n\nWait, I got the comparison backwards. Corrected response:\n\n{answer}"
    if wrapper == "duplicate":
        features.discard("duplicate")
        return answer
    think = _think(rng, q, mine, seen)
    extra = rng.random()
    if extra < 0.3:
        think += (
            "\nThe format needs <solution>, <evaluation>, <comparison>, <consensus> "
            "and <consensus_reason> tags."
        )
        features.add("think_tag_mention")
    elif extra < 0.6 and pairs:
        reversed_votes = "\n".join(f"Agent {b} {op} Agent {a}" for a, op, b in pairs)
        think += f"\nDraft:\n<comparison>\n{reversed_votes}\n</comparison>\nNo wait, that is reversed."
        features.add("draft_comparison")
    if wrapper == "think_open":
        return f"<think>\n{think}\n</think>\n\n{answer}"
    return f"{think}\n</think>\n\n{answer}"


def _malformed(rng: random.Random, q: Question, mine: str, kind: str) -> str:
    if kind == "no_tags":
        return f"{q.reasoning}\n\nSo my final answer is {mine}, and I agree with the majority."
    if kind == "renamed_tags":
        return (
            f"<answer>\n{q.reasoning}\nFinal answer: {mine}\n</answer>\n<evaluation>\nN/A\n</evaluation>\n"
            "<consensus>NO</consensus>\n<consensus_reason>\nStill checking.\n</consensus_reason>"
        )
    if kind == "missing_evaluation":
        return (
            f"<solution>\n{q.reasoning}\nFinal answer: {mine}\n</solution>\n"
            "<comparison>\nN/A\n</comparison>\n"
            "<consensus>NO</consensus>\n<consensus_reason>\nNeed another round.\n</consensus_reason>"
        )
    if kind == "missing_consensus":
        return (
            f"<solution>\nFinal answer: {mine}\n</solution>\n"
            "<evaluation>\nThe others look fine.\n</evaluation>\n"
            "<comparison>\nN/A\n</comparison>\n<consensus_reason>\nI think we agree.\n</consensus_reason>"
        )
    # "truncated_think": the token limit hit inside the reasoning
    cut = q.reasoning[: max(10, len(q.reasoning) // 2)]
    return f"<think>\nOkay, let me work through this. {q.question}\n{cut}"


# ------------------------------------------------------------------------------------------------
# Debates


def _observation(
    question: str, me: int, num_agents: int, rnd: int, history: Sequence[tuple[int, str]]
) -> str:
    lines = [
        f"<|system|>You are Agent {me} of {num_agents} in a debate. Reply with <solution>, <evaluation>, "
        "<comparison>, <consensus> and <consensus_reason>.",
        f"<|user|>Question: {question}",
    ]
    for j, text in history:
        short = text if len(text) <= 120 else text[:120] + "…"
        lines.append(f"[Agent {j}] {short}")
    lines.append(f"Round {rnd + 1}. Your turn, Agent {me}.<|assistant|>")
    return "\n".join(lines)


def _tokens(rng: random.Random, obs: str, text: str) -> dict[str, Any]:
    action = list(text.encode("utf-8"))
    return {
        "observation_tokens": list(obs.encode("utf-8")),
        "action_tokens": action,
        "logprobs": [-round(max(rng.expovariate(3.0), 1e-3), 3) for _ in action],
    }


def _debate(rng: random.Random, index: int, *, with_tokens: bool) -> dict[str, Any]:
    q = rng.choice(BANK)
    n = rng.choices((2, 3, 4, 5), weights=(2, 5, 3, 2))[0]
    rounds = rng.choices((1, 2, 3), weights=(3, 4, 3) if n < 5 else (4, 4, 1))[0]
    if with_tokens:
        n, rounds = rng.choice((2, 3)), rng.choice((1, 2))
    ending = rng.choices(
        ("consensus", "max_rounds", "parse_failure", "stop_string"), weights=(45, 35, 12, 8)
    )[0]
    if ending == "consensus":
        max_rounds: int | None = rng.choice((rounds, rounds, rounds + 1, 3 if rounds < 3 else 4, None))
    elif ending == "parse_failure":
        max_rounds = rng.choice((rounds, rounds + 1, None))
    else:
        max_rounds = rounds
    features: set[str] = set()

    # Answers by round: agents drift toward the plurality, and agree in a consensus ending.
    wrongs = [w.answer for w in q.wrong]
    answers: list[list[str]] = []
    for r in range(rounds):
        if r == 0:
            p_ok = 0.85 if (ending == "consensus" and rounds == 1) else 0.55
            row = [q.answer if rng.random() < p_ok else rng.choice(wrongs) for _ in range(n)]
        else:
            prev = answers[-1]
            counts = {a: prev.count(a) for a in prev}
            top = max(counts, key=lambda a: (counts[a], a == q.answer))
            row = [a if a == top or rng.random() < 0.5 else top for a in prev]
        if ending == "consensus" and r == rounds - 1:
            counts = {a: row.count(a) for a in row}
            top = max(counts, key=lambda a: (counts[a], a == q.answer))
            row = [top] * n
        answers.append(row)

    fail_at = -1
    last = rounds * n - 1
    if ending == "parse_failure":
        fail_at = (rounds - 1) * n + rng.randrange(n)
        last = fail_at
    turns: list[dict[str, Any]] = []
    texts: list[str] = []
    for k in range(last + 1):
        r, i = divmod(k, n)
        mine = answers[r][i]
        seen = {j: answers[r][j] for j in range(i)}
        if r > 0:
            seen.update({j: answers[r - 1][j] for j in range(i + 1, n)})
        final_round = r == rounds - 1
        # Consensus: a round that must not end the debate keeps at least one clear NO.
        if final_round and ending == "consensus":
            choices = _YES_ANY if max_rounds == rounds else _YES_CANONICAL
            yes_text = rng.choice(choices)
        elif final_round and ending in ("max_rounds", "stop_string"):
            agree = all(a == mine for a in seen.values())
            yes_text = rng.choice(_YES_ANY) if agree and rng.random() < 0.7 else rng.choice(_NO_ANY)
        else:
            agree = all(a == mine for a in seen.values()) and bool(seen)
            yes_text = "YES" if agree and rng.random() < 0.4 else rng.choice(_NO_ANY)
            if i == n - 1 and all(t["_yes"] for t in turns[r * n : r * n + i]) and yes_text == "YES":
                yes_text = "NO"
        if k == fail_at:
            kind = rng.choice(
                ("no_tags", "renamed_tags", "missing_evaluation", "missing_consensus", "truncated_think")
            )
            text = _malformed(rng, q, mine, kind)
            features.add(f"malformed_{kind}")
        else:
            wrapper = rng.choices(
                ("plain", "think_open", "think_noopen", "fence", "preamble", "duplicate"),
                weights=(58, 12, 12, 5, 5, 8),
            )[0]
            text = _response(
                rng,
                q,
                me=i,
                num_agents=n,
                mine=mine,
                seen=seen,
                yes_text=yes_text,
                changed=r > 0 and answers[r - 1][i] != mine,
                kept=r > 0 and answers[r - 1][i] == mine,
                wrapper=wrapper,
                features=features,
                stop_stripped=ending == "stop_string" and k == last,
            )
            if yes_text not in ("YES", "NO") and final_round:
                features.add("consensus_variant")
        turn: dict[str, Any] = {
            "agent": i,
            "text": text,
            "_yes": yes_text.strip("*. ").upper().startswith("YES"),
        }
        texts.append(text)
        turns.append(turn)

    for k, turn in enumerate(turns):
        turn.pop("_yes")
        r = k // n
        if index % 2 == 0:
            turn["round"] = r
        if with_tokens:
            hist_start = max(0, k - 2)
            history = [(j % n, texts[j]) for j in range(hist_start, k)]
            obs = _observation(q.question, k % n, n, r, history)
            turn.update(_tokens(rng, obs, turn["text"]))
    if with_tokens:
        features.add("tokens")
    if n == 2:
        features.add("two_agents")
    record: dict[str, Any] = {
        "format": "debate-transcript/1",
        "id": f"sample-{index:03d}-{q.topic.replace(' ', '-')}",
        "question": q.question,
        "num_agents": n,
    }
    if max_rounds is not None:
        record["max_rounds"] = max_rounds
    record["turns"] = turns
    record["meta"] = {"features": sorted(features), "plan": ending, "correct_answer": q.answer}
    return record


def generate_debates(
    count: int = DEFAULT_COUNT, *, seed: int = DEFAULT_SEED, token_every: int = 15
) -> list[dict[str, Any]]:
    """Generates ``count`` debate records (``debate-transcript/1`` dicts), deterministically from ``seed``.

    Args:
      count: number of debates.
      seed: the seed; the same (count, seed) always gives the same records.
      token_every: every ``token_every``-th debate (starting with the 4th) carries tokens and logprobs;
        0 disables tokens.

    Returns:
      A list of JSON-ready dicts, ids ``sample-<index>-<topic>``.

    Examples:
      >>> recs = generate_debates(3, seed=1)
      >>> [r["num_agents"] >= 2 for r in recs]
      [True, True, True]
      >>> generate_debates(3, seed=1) == recs
      True
    """
    rng = random.Random(seed)
    out = []
    for index in range(count):
        with_tokens = token_every > 0 and index % token_every == 3
        out.append(_debate(rng, index, with_tokens=with_tokens))
    return out


def render_file(count: int = DEFAULT_COUNT, seed: int = DEFAULT_SEED) -> str:
    """The text of the sample file for ``(count, seed)``: compact JSON by ``json`` (the shipped file's floats
    in Python's own notation, ``-1.2e-05``)."""
    lines = (
        json.dumps(rec, ensure_ascii=False, separators=(",", ":"))
        for rec in generate_debates(count, seed=seed)
    )
    return "".join(line + "\n" for line in lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tools.samples [--check] [--count N] [--seed S] [--out PATH]``."""
    parser = argparse.ArgumentParser(prog="python -m tools.samples", description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=DEFAULT_COUNT)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, default=None, help="where to write (default: the shipped file)")
    parser.add_argument("--check", action="store_true", help="only verify the shipped file is up to date")
    args = parser.parse_args(argv)
    text = render_file(args.count, args.seed)
    path = args.out or sample_path()
    if args.check:
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            print(f"{path} is out of date; run python -m tools.samples", file=sys.stderr)
            return 1
        print(f"{path} is up to date ({args.count} debates)")
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="\n")
    print(f"wrote {args.count} debates to {path} ({len(text.encode()):,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
