"""The Tinker side of debate-kernel: the client protocol, conversion to and from SDK types, renderers.

- :mod:`adapters.tinker.protocol`: ``typing.Protocol``s naming exactly the SDK surface we use; the real
  ``tinker.ServiceClient``, the in-repo fake and the local service (:mod:`adapters.local`) satisfy them.
- :mod:`adapters.tinker.convert`: kernel datums ↔ ``tinker.Datum``, sampling results → trajectories.
- :mod:`adapters.tinker.renderers`: messages → prompt tokens and stop sequences; tokens → text.
"""
