"""The Tinker side of debate-kernel: the client protocol, conversion, renderers, rollouts, a fake service.

- :mod:`adapters.tinker.protocol`: ``typing.Protocol``s naming exactly the SDK surface we use; the real
  ``tinker.ServiceClient``, the in-repo fake and the local service (:mod:`adapters.local`) satisfy them.
- :mod:`adapters.tinker.convert`: kernel datums ↔ ``tinker.Datum``, sampling results → trajectories.
- :mod:`adapters.tinker.tokenizers`: ``ByteTokenizer``, UTF-8 bytes plus chat special tokens.
- :mod:`adapters.tinker.futures`: futures satisfying ``protocol.Future`` for in-repo services.
- :mod:`adapters.tinker.renderers`: messages → prompt tokens and stop sequences; tokens → text.
- :mod:`adapters.tinker.rollouts`: many debates at once over the kernel's episode state machine.
- :mod:`adapters.tinker.fake` and :mod:`adapters.tinker.faults`: a seeded offline fake of the service
  returning real SDK types, and a wrapper that injects faults into any service.
"""
