"""``debate-kernel serve``: the local JAX training service behind Tinker's HTTP API.

Binds ``--host`` (loopback by default) and ``--port`` (0: a free port), prints exactly one line,
``serving on http://HOST:PORT``, once the server accepts requests, and serves until SIGINT or SIGTERM
(then exits 0). Point the unmodified ``tinker`` SDK at it with
``tinker.ServiceClient(base_url=URL, api_key="tml-local")`` or ``TINKER_BASE_URL=URL`` and
``TINKER_API_KEY=tml-local``. Checkpoints (``tinker://RUN/...``) live under ``--root`` (default: a
fresh temporary folder). JAX's persistent compilation cache is on as in ``debate-kernel train``.

``--model PATH`` of a Hugging Face checkpoint directory (dense Llama 3.x or Qwen3: ``config.json``, the
safetensors weights, ``tokenizer.json`` and ``tokenizer_config.json``; :mod:`adapters.local.hf`) serves
that model, its weights checked before the ready line, and reports the directory as the tokenizer, so the
SDK's ``get_tokenizer()`` loads the checkpoint's own (with its chat template).

``--dtype bfloat16`` rounds the operands of every matrix product to bfloat16 (accumulated in float32),
for a GPU's tensor cores; the weights, LoRA adapters, optimizer state, norms and softmax stay float32, and
saved files are the same either way. On CPU it gains little (training 1.08-1.11 × float32's tokens/s on
the 2-core machine, ``python -m benchmarks local --dtype bfloat16``) and costs agreement.

``--model fake`` serves the in-repo fake service instead (:mod:`adapters.serve.engine`: a scripted
debate policy and the byte tokenizer, without JAX): a test and demo engine, whose model learns nothing,
for trying the SDK path quickly; the training loop's tests run through the SDK against it.

Hidden flags, for tests only (not in ``--help``):

- ``--try-again-first N``: every future answers ``try_again`` N times before its result.
- ``--stop-with-parent``: stop when stdin closes (:mod:`adapters.serve.process` starts children so).
- ``--misbehave KIND[=NAME]`` (repeatable): clients of the served base-model name NAME (every name when
  none is given; add names with ``--served-name``) break one of the training loop's assumptions: KIND is
  ``unfrozen``, ``reloads``, ``short-logprobs``, ``ignore-stops``, ``few-samples`` or ``out-of-vocab``
  (:mod:`adapters.serve.misbehave`).
- ``--fault CALL:KIND:COUNT[:AFTER]`` (repeatable): requests AFTER + 1 … AFTER + COUNT of CALL (``sample``,
  ``compute_logprobs``, ``forward_backward``, ``optim_step``, ``save_state``, ``retrieve_future`` …) get
  KIND: HTTP ``429``, ``500`` or ``503``, a ``drop``ped connection, or a future that fails
  (``failed-server``, ``failed-user``); each one injected is logged on stderr
  (:mod:`adapters.serve.faults`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "run"]

_GRACE_SECONDS = 3
"""On SIGINT / SIGTERM, requests still open after this many seconds (a ``retrieve_future`` long poll)
are cancelled."""


def _event_loop() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop to serve on: uvloop's where it is installed (``serve`` extra), else asyncio's own
    (None). With uvloop and httptools (uvicorn's HTTP parser, which it picks whenever installed) the
    server spent 600-675 µs of CPU per SDK ``sample`` call (its request and its ``retrieve_future``; the
    fake engine, 400 concurrent calls, 6 interleaved rounds) against 775-1025 µs on asyncio's loop and
    uvicorn's pure-Python h11 parser."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Registers ``serve``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="serve the local JAX training service over Tinker's HTTP API",
        description="Serve the local JAX training service behind Tinker's HTTP API, for the tinker SDK "
        "(TINKER_BASE_URL=http://HOST:PORT TINKER_API_KEY=tml-local).",
    )
    p.add_argument(
        "--model",
        required=True,
        metavar="NAME_OR_PATH",
        help="tiny, small, base, a .safetensors file, or a Hugging Face checkpoint directory (Llama 3.x, "
        "Qwen3); or fake, the in-repo fake service (a scripted policy that learns nothing, without JAX: "
        "for tests and demos)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port to bind (default: 0, a free port)")
    p.add_argument(
        "--root", type=Path, metavar="DIR", help="folder for runs and checkpoints (default: a temp dir)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the base model, LoRA init and sampling")
    p.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="the operands of every matrix product, accumulated in float32 (default: float32). bfloat16 is "
        "for GPUs (on CPU it gains little); weights, optimizer state, norms and softmax stay float32",
    )
    p.add_argument(
        "--served-name",
        action="append",
        default=[],
        metavar="NAME",
        help="another base-model name for the served model (repeatable), e.g. the hub name a "
        "tinker-cookbook recipe sends as its model_name",
    )
    # fault injection for tests: every future answers try_again this many times before its result
    p.add_argument("--try-again-first", type=int, default=0, help=argparse.SUPPRESS)
    # for a parent that started the server (adapters.serve.process): stop when its stdin closes, which
    # the system does when the parent exits, even one killed with SIGKILL
    p.add_argument("--stop-with-parent", action="store_true", help=argparse.SUPPRESS)
    # deliberately broken behaviour for tests (adapters.serve.misbehave, adapters.serve.faults)
    p.add_argument("--misbehave", action="append", default=[], help=argparse.SUPPRESS)
    p.add_argument("--fault", action="append", default=[], help=argparse.SUPPRESS)
    p.set_defaults(func=run)
    return p


def url(host: str, port: int) -> str:
    """The base URL of a bound address (IPv6 hosts in brackets).

    Examples:
        >>> url("127.0.0.1", 8000), url("::1", 8000)
        ('http://127.0.0.1:8000', 'http://[::1]:8000')
    """
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@contextlib.contextmanager
def _quiet_stop_signals() -> Iterator[None]:
    """While serving, SIGINT and SIGTERM only stop the server: uvicorn catches them, shuts down, and
    raises them again once it has put back these handlers, which ignore them, so the command exits 0."""
    stops = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, lambda *_: None) for s in stops}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def run(args: argparse.Namespace) -> int:
    """Serves until SIGINT or SIGTERM; 0 then, 2 for an unknown model or an address that cannot be bound."""
    from adapters.local_models import served_locally, unserved
    from adapters.serve import FAKE

    if args.model != FAKE and not served_locally(args.model):  # before JAX's import: a typo, at once
        print(f"debate-kernel serve: {unserved(args.model)}, or {FAKE!r} (the in-repo fake)", file=sys.stderr)
        return 2
    import socket

    import uvicorn

    from adapters.serve.app import create_app
    from adapters.serve.faults import FaultMiddleware, FaultPlan, parse_fault
    from adapters.serve.misbehave import MisbehavingCore, parse_misbehaviour
    from adapters.serve.state import ServeCore
    from adapters.serve.tokenizer import write_tokenizer
    from adapters.tinker.memory import one_malloc_arena

    if args.model != FAKE:  # the fake engine computes without JAX (and starts without importing it)
        from adapters.local.devices import compilation_cache, split_cpu

        compilation_cache(0.2)
        one_malloc_arena()  # XLA's threads allocate from glibc's main arena (adapters.tinker.memory)
        split_cpu()  # training calls run data-parallel over the cores (before JAX's first computation)
    root: Path = args.root if args.root is not None else Path(tempfile.mkdtemp(prefix="debate-kernel-serve-"))
    try:
        misbehaviours = [parse_misbehaviour(text) for text in args.misbehave]
        faults = FaultPlan([parse_fault(text) for text in args.fault])
        options: dict[str, Any] = dict(
            model=args.model,
            root=root,
            seed=args.seed,
            served_names=args.served_name,
            compute_dtype=args.dtype,
        )
        core = (
            MisbehavingCore(misbehaviours=misbehaviours, **options) if misbehaviours else ServeCore(**options)
        )
        core.tokenizer_id = _tokenizer_id(args.model, root, write_tokenizer)
        family, kind, proto, _, address = socket.getaddrinfo(args.host, args.port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)  # proto: asyncio sets TCP_NODELAY only on TCP sockets
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except (ValueError, OSError) as exc:
        print(f"debate-kernel serve: {exc}", file=sys.stderr)
        return 2
    host, port = sock.getsockname()[:2]

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                print(f"serving on {url(host, port)}", flush=True)

    app: Any = create_app(core, try_again_first=args.try_again_first)
    if faults.faults:
        app = FaultMiddleware(app, faults, log=lambda line: print(line, file=sys.stderr, flush=True))
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        proxy_headers=False,  # no proxy in front: each request skips uvicorn's proxy-headers middleware
        timeout_graceful_shutdown=_GRACE_SECONDS,
    )
    with _quiet_stop_signals():
        if args.stop_with_parent:
            _stop_at_end_of_stdin()
        with asyncio.Runner(loop_factory=_event_loop()) as runner:
            runner.run(Server(config).serve(sockets=[sock]))
    return 0


def _tokenizer_id(model: str, root: Path, write_tokenizer: Any) -> str:
    """What ``get_info`` reports as the tokenizer: a checkpoint's own directory (its tokenizer checked
    here), else the byte tokenizer written under ``root``."""
    if (Path(model) / "config.json").is_file():  # the fake engine starts without importing JAX
        from adapters.local import hf

        hf.CheckpointTokenizer(model)  # no tokenizer.json, or one that does not load: a clear error now
        return str(Path(model).resolve())
    return str(write_tokenizer(root))


def _stop_at_end_of_stdin() -> None:
    """A thread that waits for the end of stdin, then stops the server as SIGTERM does."""
    import threading

    def wait() -> None:
        with contextlib.suppress(OSError):  # the raw descriptor: no buffer lock held at shutdown
            while os.read(0, 4096):
                pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait, name="stop-with-parent", daemon=True).start()
