"""Bridges that let other RL trainers call the kernel: :mod:`adapters.bridges.verl` and
:mod:`adapters.bridges.trl`.

Each bridge only converts the trainer's batch to our arrays and back; the estimators, the parser and the
rewards are the kernel's. :mod:`adapters.bridges.scoring` is the one piece both share: a flat batch of
agent outputs (debate key, agent id, text) → parse results and leave-one-out pairwise rewards. The
trainer-specific modules import their trainer lazily, so this package imports with numpy alone; install
the extra to use one (``pip install "debate-kernel[verl]"`` / ``"debate-kernel[trl]"``).
"""

__all__: list[str] = []
