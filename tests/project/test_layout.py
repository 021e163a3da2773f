"""The Python package's architecture, checked from its import statements (read with `ast`, so
imports inside functions count too): each subpackage imports only from layers below it, no two
modules import each other (directly or around a cycle), and no private name (`_x`) is imported
from another subpackage."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "fastcollate"

# Lower numbers are lower layers. Parts on the same layer may not import each other.
LAYERS = {
    "_native": 0,
    "_internal": 1,
    "arrow": 2,
    "collators": 3,
    "sampling": 3,
    # Dataset preparation (pack_dataset, SFT): datasets / pyarrow over the core, no TRL.
    "preparation": 3,
    "integrations": 4,
    "trl": 4,
    "sentence_transformers": 4,
    "__init__": 5,
    # The benchmark is a client of the public API (it times what users call), above it.
    "bench": 6,
    "__main__": 7,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def known_modules() -> set[str]:
    """Every module, the native extension (a stub here, a compiled file when built) included."""
    return set(modules()) | {"fastcollate._native"}


def resolve(current: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name a relative import (`from ..x import y`) refers to."""
    base = current.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imports(name: str, path: Path, known: set[str]) -> list[tuple[str, str | None, int]]:
    """(imported fastcollate module, imported name or None, line) for every import."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "fastcollate":
                    found.append((alias.name, None, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                source = resolve(name, is_package, node.level, node.module)
            elif (node.module or "").split(".")[0] == "fastcollate":
                source = node.module
            else:
                continue
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in known:  # `from . import collators`: a module, not a name
                    found.append((submodule, None, node.lineno))
                else:
                    found.append((source, alias.name, node.lineno))
    return found


def part(module: str) -> str:
    """The layer a module belongs to: its subpackage, or the top-level module's own name."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def graph() -> dict[str, list[tuple[str, str | None, int]]]:
    found = modules()
    known = known_modules()
    return {name: imports(name, path, known) for name, path in found.items()}


def test_every_module_belongs_to_a_layer():
    unplaced = sorted({part(m) for m in modules()} - set(LAYERS))
    assert not unplaced, f"modules outside the layer table: {unplaced}"


def test_imports_only_run_down_the_layers():
    wrong = []
    for module, edges in graph().items():
        here = part(module)
        for target, _, line in edges:
            there = part(target)
            if there == here:
                continue
            if LAYERS[there] >= LAYERS[here]:
                wrong.append(f"{module}:{line} imports {target} ({here} -> {there})")
    assert not wrong, "imports running up (or sideways) the layers:\n" + "\n".join(wrong)


def test_no_import_cycles():
    edges = {m: {t for t, _, _ in e if t != m} for m, e in graph().items()}
    # A package's __init__ loads its modules; a module importing its own package back is a cycle.
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt) :] + [nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_private_name_crosses_a_subpackage():
    wrong = []
    for module, edges in graph().items():
        for target, name, line in edges:
            private = name and name.startswith("_") and not name.endswith("__")
            if private and part(target) != part(module):
                wrong.append(f"{module}:{line} imports {name} from {target}")
    assert not wrong, "private names imported from another subpackage:\n" + "\n".join(wrong)


@pytest.mark.parametrize(
    "source, expected",
    [
        # The checks themselves must be able to fail: a sample of each kind of violation.
        ("from ..integrations.patch import original\n", "up"),
        ("from ..sampling.lengths import as_lengths\n", "sideways"),
        ("from .base import _private\n", None),
        ("from ..arrow.columns import _view\n", "private"),
    ],
)
def test_the_checks_catch_violations(tmp_path, monkeypatch, source, expected):
    fake = tmp_path / "fastcollate"
    (fake / "collators").mkdir(parents=True)
    (fake / "arrow").mkdir()
    (fake / "integrations").mkdir()
    (fake / "sampling").mkdir()
    for init in ("", "collators/", "arrow/", "integrations/", "sampling/"):
        (fake / f"{init}__init__.py").write_text("")
    for stub in ("collators/base.py", "arrow/columns.py", "integrations/patch.py"):
        (fake / stub).write_text("")
    (fake / "sampling" / "lengths.py").write_text("")
    (fake / "collators" / "padding.py").write_text(source)
    monkeypatch.setitem(globals(), "PACKAGE", fake)
    checks = {
        "up": test_imports_only_run_down_the_layers,
        "sideways": test_imports_only_run_down_the_layers,
        "private": test_no_private_name_crosses_a_subpackage,
    }
    if expected is None:
        for check in set(checks.values()):
            check()
        return
    with pytest.raises(AssertionError):
        checks[expected]()


def test_no_class_defines_a_method_twice():
    # A second definition silently replaces the first (a merge once left two `_get_dataloader`
    # overrides in the Trainer, and the first one's checks never ran).
    twice = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            seen: set[str] = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    decorated = any(
                        isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter")
                        for d in item.decorator_list
                    )
                    if item.name in seen and not decorated:
                        twice.append(f"{name}.{node.name}.{item.name} (line {item.lineno})")
                    seen.add(item.name)
    assert not twice, "methods defined twice in one class:\n" + "\n".join(twice)
