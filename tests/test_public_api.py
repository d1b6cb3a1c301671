"""The public API: every exported name imports and is documented."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

PUBLIC_MODULES = [
    "kernel",
    "kernel.checks",
    "kernel.jax",
    "kernel.testing",
    "adapters.bridges.scoring",
    "adapters.bridges.verl",
    "adapters.bridges.trl",
]


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_exported_name_imports_and_has_a_docstring(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__doc__, f"{module_name} has no module docstring"
    missing = []
    for name in module.__all__:
        obj = getattr(module, name)  # raises if __all__ lies
        if inspect.isfunction(obj) or inspect.isclass(obj):
            if not (obj.__doc__ or "").strip():
                missing.append(name)
    assert not missing, f"{module_name}: names without a docstring: {missing}"


# the adapter modules the README's API map names, and the training loop's process settings (memory): their
# functions are public too
ADAPTER_MODULES = [
    "adapters.transcripts",
    "adapters.pipeline",
    "adapters.report",
    "adapters.tinker",
    "adapters.training",
    "adapters.training.checkpoint",
    "adapters.training.config",
    "adapters.tinker.contract",
    "adapters.tinker.convert",
    "adapters.training.credit",
    "adapters.training.dataset",
    "adapters.tinker.fake",
    "adapters.tinker.faults",
    "adapters.tinker.memory",
    "adapters.training.planner",
    "adapters.tinker.renderers",
    "adapters.training.rollouts",
    "adapters.tokenizers",
    "adapters.tinker.tokens",
    "adapters.answers",
    "adapters.local",
]


@pytest.mark.parametrize("module_name", PUBLIC_MODULES + ADAPTER_MODULES)
def test_every_exported_function_has_an_example(module_name: str) -> None:
    """Every public function defined under its own name shows a doctest (``>>>``); pytest runs them.

    Functions a factory made (``adapters.bridges.trl.peer_vote_reward`` is ``debate_reward("peer_vote")``)
    carry a generated docstring, and their factory's example covers them.
    """
    module = importlib.import_module(module_name)
    assert module.__doc__, f"{module_name} has no module docstring"
    missing = [
        name
        for name in module.__all__
        if inspect.isfunction(obj := getattr(module, name))
        and obj.__name__ == name
        and ">>>" not in (obj.__doc__ or "")
    ]
    assert not missing, f"{module_name}: functions without an example: {missing}"


def test_all_is_sorted_and_unique() -> None:
    import kernel

    assert list(kernel.__all__) == sorted(set(kernel.__all__))


def test_kernel_imports_without_jax_or_tinker() -> None:
    import subprocess
    import sys

    code = (
        "import sys, builtins\n"
        "real = builtins.__import__\n"
        "def guard(name, *a, **k):\n"
        "    if name.split('.')[0] in {'jax', 'jaxlib', 'tinker', 'torch', 'hypothesis'}:\n"
        "        raise ImportError('blocked ' + name)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = guard\n"
        "import kernel\n"
        "print(len(kernel.__all__))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 0


def test_every_shape_suffix_in_the_kernel_is_in_the_readme_table() -> None:
    """Each axis letter group used as a suffix (``rewards_PG``, ``tokens_D_T``, ``offsets_D1``) is defined."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("## Shape suffixes") :]
    table = table[: table.index("\n## ")]
    defined = set(re.findall(r"^\| `_([A-Z]+)` \|", table, flags=re.MULTILINE))
    used: dict[str, str] = {}
    for path in sorted((root / "kernel").rglob("*.py")):
        for name in re.findall(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)*((?:_[A-Z]+1?)+)\b", path.read_text("utf-8")):
            for axis in name.strip("_").split("_"):
                used.setdefault(axis.rstrip("1"), path.name)
    missing = {axis: where for axis, where in used.items() if axis not in defined}
    assert not missing, f"suffixes used in kernel/ but not in the README table: {missing}"


_USER_FACING = [
    "kernel",
    "kernel.jax",
    "adapters.pipeline",
    "adapters.transcripts",
    "adapters.tinker.convert",
    "adapters.tinker.tokens",
    "adapters.training.dataset",
    "adapters.report.html",
    "adapters.bridges.scoring",
    "adapters.bridges.verl",
]


@pytest.mark.parametrize("module_name", _USER_FACING)
def test_no_public_function_crashes_deep_inside_on_junk(
    module_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every public function called with junk in each required argument (None, a string, a float, a
    list of None, a dict) either works or raises TypeError / ValueError / KeyError (OSError for a
    path) naming what was wrong: never an AttributeError or IndexError from deep inside."""
    monkeypatch.chdir(tmp_path)  # a junk path argument writes nowhere that matters
    module = importlib.import_module(module_name)
    crashes = []
    for name in module.__all__:
        f = getattr(module, name)
        if inspect.iscoroutinefunction(f) or (
            not inspect.isfunction(f) and not (callable(f) and hasattr(f, "__wrapped__"))
        ):
            continue
        try:
            params = inspect.signature(f).parameters.values()
        except (TypeError, ValueError):
            continue
        positional = [
            p
            for p in params
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        keywords = {p.name: 1 for p in params if p.default is p.empty and p.kind == p.KEYWORD_ONLY}
        for junk in (None, "x", 3.5, [None], [[None]], {"a": 1}, -1):
            try:
                f(*([junk] * len(positional)), **keywords)
            except (TypeError, ValueError, KeyError, OSError):  # OSError: a junk path, named
                pass
            except Exception as e:  # the point: anything else is a crash
                crashes.append(f"{name}({junk!r}): {type(e).__name__}: {e}")
    assert crashes == []


ROOT = Path(__file__).resolve().parents[1]


def _private(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "kernel" and any(p.startswith("_") and not p.startswith("__") for p in parts[1:])


def _private_kernel_imports(source: str) -> list[str]:
    """``kernel._…`` modules or names a source imports or reads (``import kernel._x``, ``from kernel._x import
    y``, ``from kernel import _x``, ``kernel._x`` as an attribute)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _private(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if _private(node.module):
                found.append(node.module)
            else:
                found += [n for a in node.names if _private(n := f"{node.module}.{a.name}")]
        elif (
            isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "kernel"
        ):
            found += [f"kernel.{node.attr}"] if _private(f"kernel.{node.attr}") else []
    return found


def test_code_outside_the_kernel_uses_only_its_public_names() -> None:
    """The adapters, tools and benchmarks import ``kernel``'s public names only (its ``__all__``, and the
    public modules ``kernel.checks``, ``kernel.jax`` and ``kernel.testing``); tests may test private ones."""
    files = [p for d in ("adapters", "tools", "benchmarks") for p in sorted((ROOT / d).rglob("*.py"))]
    assert len(files) > 50
    hits = [
        f"{p.relative_to(ROOT)}: {name}"
        for p in files
        for name in _private_kernel_imports(p.read_text("utf-8"))
    ]
    assert hits == []


def test_the_private_import_check_sees_each_form() -> None:
    code = (
        "import kernel._groups\nfrom kernel._checks import check_int\nfrom kernel import _rewards\n"
        "from kernel.jax._advantages import _core\nimport kernel\nkernel._datums.checked_batch\n"
        "from kernel import checks, build_datums\nfrom kernel.checks import check_type\nkernel.__all__\n"
    )
    assert _private_kernel_imports(code) == [
        "kernel._groups",
        "kernel._checks",
        "kernel._rewards",
        "kernel.jax._advantages",
        "kernel._datums",
    ]


def _code_spans(markdown: str) -> list[str]:
    """The inline code spans of a Markdown text, fenced blocks left out."""
    import re

    prose = re.sub(r"^```.*?^```", "", markdown, flags=re.MULTILINE | re.DOTALL)
    return re.findall(r"`([^`\n]+)`", prose)


def _resolves(dotted: str) -> bool:
    """``kernel.x.y`` / ``adapters.x.y``: the longest prefix that imports as a module, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _api_maps() -> dict[str, str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## API map") :]
    return {
        "README.md (API map)": section[: section.index("\n## ")],
        "docs/api.md": (ROOT / "docs" / "api.md").read_text(encoding="utf-8"),
    }


@pytest.mark.parametrize("doc", ["README.md (API map)", "docs/api.md"])
def test_every_dotted_name_in_the_api_maps_exists(doc: str) -> None:
    import re

    dotted = re.compile(r"\b(?:kernel|adapters)(?:\.\w+)+")
    named = {m for span in _code_spans(_api_maps()[doc]) for m in dotted.findall(span)}
    assert len(named) > 10
    assert sorted(n for n in named if not _resolves(n)) == []


def test_the_full_api_map_names_every_kernel_name() -> None:
    import re

    import kernel
    import kernel.jax

    listed = {w for span in _code_spans(_api_maps()["docs/api.md"]) for w in re.findall(r"\w+", span)}
    missing = sorted({*kernel.__all__, *kernel.jax.__all__} - listed)
    assert missing == []
