"""The minimal reference scorer of ``python -m benchmarks score_scale``, run as a child process.

``python -m benchmarks._score_peer IN.jsonl OUT.jsonl``. What a script built from the reference
recipe's own steps does with a transcript file, one debate at a time: ``json.loads`` the line; parse
every turn with the v1 parser (``bench_parse.reference_peer``, a regex-for-regex transcription of
REFERENCE.md §1, since tinker-cookbook 0.5.8 does not ship the debate recipe) until one fails (step
reward −1, the episode ends); the leave-one-out win rates of REFERENCE.md §2
(``bench_rewards.reference_rewards``); total return = step rewards + win rate; centering in float32
with torch as tinker-cookbook's ``compute_advantages`` does; tinker-cookbook's own
``trajectory_to_data`` for each agent whose turns carry tokens; one JSON record per debate. It does
not replay the stop rule, validate the file or count anything for a summary: less work than ours.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    import tinker
    import torch
    from tinker_cookbook.completers import TokensWithLogprobs
    from tinker_cookbook.rl.data_processing import trajectory_to_data
    from tinker_cookbook.rl.types import Trajectory, Transition

    from benchmarks.bench_parse import reference_peer
    from benchmarks.bench_rewards import reference_rewards

    src, dst = argv
    with open(src, "rb") as f, open(dst, "w", encoding="utf-8") as out:
        for line in f:
            if not line.strip():
                continue
            rec = json.loads(line)
            n = int(rec["num_agents"])
            step = [0.0] * n
            votes: list[tuple[int, int, str, int]] = []
            transitions: list[list[Transition]] = [[] for _ in range(n)]
            for turn in rec["turns"]:
                agent = int(turn["agent"])
                if "action_tokens" in turn:
                    transitions[agent].append(
                        Transition(
                            ob=tinker.ModelInput.from_ints(turn["observation_tokens"]),
                            ac=TokensWithLogprobs(
                                tokens=turn["action_tokens"], maybe_logprobs=turn["logprobs"]
                            ),
                            reward=0.0,
                            episode_done=False,
                        )
                    )
                try:
                    fields = reference_peer(turn["text"], agent)
                except ValueError:
                    step[agent] -= 1.0
                    break
                votes.extend((agent, a, op, b) for a, op, b in fields["votes"])
            rewards = reference_rewards([(n, votes)])
            returns = torch.tensor([s + r for s, r in zip(step, rewards, strict=True)])
            advantages = returns - returns.mean()
            datums = 0
            for i, trs in enumerate(transitions):
                if trs:
                    traj = Trajectory(transitions=trs, final_ob=tinker.ModelInput.empty())
                    datums += len(trajectory_to_data(traj, float(advantages[i])))
            record = {
                "id": rec["id"],
                "rewards": rewards,
                "returns": returns.tolist(),
                "advantages": advantages.tolist(),
                "votes": len(votes),
                "datums": datums,
            }
            out.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
