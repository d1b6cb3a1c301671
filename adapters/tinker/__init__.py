"""The Tinker SDK side of debate-kernel: the client protocol, conversion to SDK types, renderers, the
service boundary and contract, a fake service and a fault injector.

- :mod:`adapters.tinker.protocol`: ``typing.Protocol``s naming exactly the SDK surface we use; the real
  ``tinker.ServiceClient``, the in-repo fake and the local service (:mod:`adapters.local`) satisfy them.
- :mod:`adapters.tinker.convert`: kernel datums ↔ ``tinker.Datum``, sampling results → trajectories;
  :mod:`adapters.tinker.tokens`: ``TokenArray``, the read-only token view a datum's input holds.
- :mod:`adapters.tinker.renderers`: messages → prompt tokens and stop sequences; tokens → text.
- :mod:`adapters.tinker.boundary`: every call's deadline, retries and reply check, the SDK's errors mapped
  in one place; :mod:`adapters.tinker.contract`: the start-of-run check of a service's contract.
- :mod:`adapters.tinker.fake` and :mod:`adapters.tinker.faults`: a seeded offline fake of the service
  returning real SDK types, and a wrapper that injects faults into any service.
- :mod:`adapters.tinker.memory`: the loop's ``malloc`` settings.

Training itself (the loop, its config, rollouts, checkpoints) is :mod:`adapters.training`; futures and the
byte tokenizer shared with the local service are :mod:`adapters.futures` and :mod:`adapters.tokenizers`.
"""

__all__: list[str] = []
