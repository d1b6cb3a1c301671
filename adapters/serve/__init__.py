"""``debate-kernel serve``: the local JAX training service behind Tinker's HTTP API.

The unmodified ``tinker`` SDK talks to it as to Tinker itself
(``tinker.ServiceClient(base_url="http://127.0.0.1:PORT", api_key="tml-local")``, or
``TINKER_BASE_URL`` and ``TINKER_API_KEY``). :mod:`adapters.serve.state` maps the SDK's requests onto
:class:`adapters.local.LocalServiceClient` with no HTTP of its own; :mod:`adapters.serve.app` is the
Starlette shell; :mod:`adapters.serve.wire` the protobuf bodies; :mod:`adapters.serve.tokenizer` the
byte tokenizer in Hugging Face's format, for the SDK's ``get_tokenizer()``.
"""

from __future__ import annotations

__all__ = ["FAKE"]

FAKE = "fake"
"""The model name that selects the fake engine (:mod:`adapters.serve.engine`); here, where checking a
``--model`` imports neither the SDK nor JAX."""
