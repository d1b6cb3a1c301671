"""The in-repo fake service in process, or served by ``debate-kernel serve --model fake`` and reached through
the unmodified ``tinker`` SDK: the two backends the training loop's tests run on.

Through the SDK every call crosses the real wire path (JSON and protobuf bodies, futures polled with
``retrieve_future``, sessions and heartbeats), and the server computes what an in-process
:class:`~adapters.tinker.fake.FakeServiceClient` of the same seed computes, so a test's figures are the
same on both. The server is started once per test process (``tests/conftest.py``: ``served_fake``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.serve.engine import FAKE
from adapters.tinker.fake import FakeServiceClient, ModelState, load_state_file

__all__ = ["BACKENDS", "MODEL", "SEED", "Backend", "ServedFake", "served_fake"]

MODEL = FAKE
"""The base model of the tests' runs: the name the fake engine serves (the in-process fake takes any)."""

SEED = 0
"""The seed of the served fake, and of the in-process fakes it is compared with."""

BACKENDS = ("inprocess", "sdk")
"""The backends a test can be parametrized over (``fake_backend``)."""


@dataclass
class ServedFake:
    """A running ``serve --model fake``: its URL and root; SDK clients of it, each a "process"."""

    url: str
    root: Path
    clients: list[Any] = field(default_factory=list)

    def client(self) -> Any:
        """A new ``tinker.ServiceClient`` of the server (its own session, as a new process would have);
        closed when the server stops."""
        import tinker

        from adapters.serve.process import API_KEY

        made = tinker.ServiceClient(base_url=self.url, api_key=API_KEY)
        self.clients.append(made)
        return made

    def state_file(self, path: str) -> Path:
        """The server's file of a saved state ``tinker://RUN/weights/NAME``."""
        from tinker import types

        parsed = types.ParsedCheckpointTinkerPath.from_tinker_path(path)
        kind, name = parsed.checkpoint_id.split("/", 1)
        assert kind == "weights", f"{path} is not a saved training state"
        return self.root / "runs" / parsed.training_run_id / "states" / f"{name}.json"

    def load_state(self, path: str) -> ModelState:
        """The fake model state saved at ``path`` (a ``tinker://`` path of this server)."""
        return load_state_file(str(self.state_file(path)))

    def close(self) -> None:
        """Ends every client's session (a server already gone has nothing left to free)."""
        closing = []
        for made in self.clients:
            with contextlib.suppress(Exception):
                closing.append(made.close("success"))
        for future in closing:  # asked all at once, then awaited
            with contextlib.suppress(Exception):
                future.result(timeout=30)
        self.clients.clear()


def _load_tokenizer(root: Path) -> None:
    """Loads the served byte tokenizer with ``transformers``, as the SDK's ``get_tokenizer()`` does: its
    imports (seconds of CPU) then happen once, here, rather than in a test's first run."""
    from transformers import AutoTokenizer

    from adapters.serve.tokenizer import write_tokenizer

    AutoTokenizer.from_pretrained(str(write_tokenizer(root)))


@contextlib.contextmanager
def served_fake(root: Path) -> Iterator[ServedFake]:
    """``debate-kernel serve --model fake`` (seed :data:`SEED`) for the ``with`` block, its log in
    ``root/serve.log``; ready once it said so, stopped with SIGTERM and joined at the end. While the
    server starts, this process loads the tokenizer the SDK will ask for."""
    from adapters.serve.process import served

    warm = threading.Thread(target=_load_tokenizer, args=(root / "warm",), name="warm-tokenizer", daemon=True)
    warm.start()
    with served(MODEL, root=root, log=root / "serve.log", seed=SEED) as url:
        warm.join()
        server = ServedFake(url, root)
        try:
            yield server
        finally:
            server.close()


@dataclass(frozen=True)
class Backend:
    """Where a test's runs train: ``service(root)`` is the service one process of the run uses (a new
    one per call: a crash and its resume are two processes), ``load_state(path)`` reads a state it
    saved."""

    name: str
    service: Callable[..., Any]
    load_state: Callable[[str], ModelState]

    @staticmethod
    def inprocess() -> Backend:
        """The in-process fake; saved states under ``root`` (in memory when it is None)."""

        def service(root: Path | None = None) -> Any:
            return FakeServiceClient(seed=SEED, root=root)

        return Backend("inprocess", service, load_state_file)

    @staticmethod
    def sdk(server: ServedFake) -> Backend:
        """The served fake through the SDK (``root`` is unused: the server keeps the saved states)."""

        def service(root: Path | None = None) -> Any:
            return server.client()

        return Backend("sdk", service, server.load_state)
