"""The Rust layers' architecture, checked from their `use` paths and inline `crate::py::` /
`crate::core::` / `super::` paths: the files of the core (`rust/core`) and of the binding
layer (`rust/py`) each form no module cycle; in the binding layer `convert/` (Python rows in)
and `output/` (buffers out) never reach into `bindings/` (the exported functions), the
root holds only `mod.rs` (registration) and `error.rs`, and numpy arrays are made only in
`output/` (one way out: no rust-numpy array constructor, or numpy's C constructors, anywhere
else)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

RUST = Path(__file__).resolve().parents[2] / "rust"
BINDING_LAYER = RUST / "py"
CORE = RUST / "core"

# Layers that may not use the named folders.
FORBIDDEN = {"convert": {"bindings"}, "output": {"bindings"}}
ROOT_FILES = {"mod.rs", "error.rs"}

_COMMENT = re.compile(r"//.*")
_USE = re.compile(r"\buse\s+([^;]+);", re.S)
_PATH = re.compile(r"\b(?:crate::\w+|super)(?:::\w+)+")


# A numpy array made from Rust: rust-numpy's constructors (`PyArray1::from_vec`,
# `PyArray::zeros`, `Array2::into_pyarray`, `slice.to_pyarray`, ...) and numpy's C ones.
_ARRAY_CONSTRUCTORS = re.compile(
    r"\bPyArray\w*\s*(?:::\s*<[^>]*>\s*)?::\s*"
    r"(?:from_\w+|zeros|new|arange|linspace|borrow_from_array)\b"
    r"|\.\s*(?:into_pyarray|to_pyarray)\b"
    r"|\b(?:IntoPyArray|ToPyArray)\b"
    r"|\bPyArray_(?:New\w*|SimpleNew\w*|Empty|Zeros|FromAny|FromArray|Arange\w*)\b"
)
OUTPUT_FOLDER = "output"


def module_of(root: Path, path: Path) -> tuple[str, ...]:
    """`rust/py/convert/read.rs` -> ("convert", "read"); a folder's `mod.rs` is the folder."""
    parts = path.relative_to(root).with_suffix("").parts
    return parts[:-1] if parts[-1] == "mod" else parts


def expand(tree: str) -> list[str]:
    """A `use` tree's paths: `a::{b, c::{d, e}}` -> a::b, a::c::d, a::c::e."""
    tree = re.sub(r"\s+", "", tree)
    if "{" not in tree:
        return [tree.split(" as ")[0]]
    start = tree.index("{")
    prefix, inner = tree[:start], tree[start + 1 : tree.rindex("}")]
    items, depth, current = [], 0, ""
    for char in inner:
        if char == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        depth += {"{": 1, "}": -1}.get(char, 0)
        current += char
    items.append(current)
    return [prefix + path for item in items if item for path in expand(item)]


def used_paths(text: str) -> list[str]:
    code = _COMMENT.sub("", text)
    paths = [p for tree in _USE.findall(code) for p in expand(tree)]
    return paths + _PATH.findall(_USE.sub("", code))


def resolve(root: Path, module: tuple[str, ...], is_folder: bool, path: str):
    """The module a `crate::<layer>::...` or `super::...` path names, where `<layer>` is the
    folder `root` (`py`, `core`), or None (outside that layer)."""
    segments = path.split("::")
    if segments[:2] == ["crate", root.name]:
        base, rest = (), segments[2:]
    elif segments[0] == "super":
        # The parent of the file's module (a folder's mod.rs is the folder), one more per `super`.
        base, rest = module[:-1], segments[1:]
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    else:
        return None
    found: tuple[str, ...] = ()
    current = base
    for segment in rest:
        candidate = (*current, segment)
        if (root.joinpath(*candidate).with_suffix(".rs")).is_file() or (
            root.joinpath(*candidate, "mod.rs")
        ).is_file():
            current = found = candidate
        else:
            break
    return found or base


def dependency_graph(root: Path) -> dict[tuple[str, ...], set[tuple[str, ...]]]:
    graph: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
    for file in sorted(root.rglob("*.rs")):
        module = module_of(root, file)
        is_folder = file.name == "mod.rs"
        edges = graph.setdefault(module, set())
        for path in used_paths(file.read_text()):
            target = resolve(root, module, is_folder, path)
            # A folder's mod.rs declaring or registering its own files is not a dependency.
            inside = is_folder and target is not None and target[: len(module)] == module
            if target is not None and target != module and not inside:
                edges.add(target)
    return graph


def find_cycle(graph: dict[tuple[str, ...], set[tuple[str, ...]]]) -> list[str] | None:
    state: dict[tuple[str, ...], int] = {}
    stack: list[tuple[str, ...]] = []

    def visit(node: tuple[str, ...]) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :] + [nxt]
                return ["/".join(m) or "py" for m in cycle]
            if state.get(nxt) is None and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if state.get(node) is None and (found := visit(node)):
            return found
    return None


def forbidden_uses(graph: dict[tuple[str, ...], set[tuple[str, ...]]]) -> list[str]:
    return [
        f"{'/'.join(module)} uses {'/'.join(target)}"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if module and target and target[0] in FORBIDDEN.get(module[0], set())
    ]


@pytest.mark.parametrize("layer", [BINDING_LAYER, CORE], ids=["py", "core"])
def test_rust_layer_has_no_module_cycle(layer):
    graph = dependency_graph(layer)
    assert len(graph) > 15, f"the files of {layer} were not found"
    assert find_cycle(graph) is None, f"module cycle: {' -> '.join(find_cycle(graph) or [])}"


def test_convert_and_output_never_use_bindings():
    assert forbidden_uses(dependency_graph(BINDING_LAYER)) == []


def test_root_holds_only_registration_and_errors():
    assert {p.name for p in BINDING_LAYER.glob("*.rs")} == ROOT_FILES
    assert {p.name for p in BINDING_LAYER.iterdir() if p.is_dir()} == {
        "bindings",
        "convert",
        "output",
    }


def array_constructors_outside_output(root: Path) -> list[str]:
    """`file:line: text` for each numpy array constructor written outside `output/`."""
    found = []
    for file in sorted(root.rglob("*.rs")):
        if file.relative_to(root).parts[0] == OUTPUT_FOLDER:
            continue
        for number, line in enumerate(file.read_text().splitlines(), 1):
            if _ARRAY_CONSTRUCTORS.search(_COMMENT.sub("", line)):
                found.append(f"{file.relative_to(root).as_posix()}:{number}: {line.strip()}")
    return found


def test_arrays_are_made_only_in_output():
    found = array_constructors_outside_output(BINDING_LAYER)
    assert not found, (
        "numpy arrays made outside rust/py/output/; hand the buffer to "
        "output::numpy_arrays (vector, matrix, owned_array, output_to_py) instead:\n"
        + "\n".join(found)
    )


_PYCLASS = re.compile(r"#\[pyclass(?:\(([^\]]*)\))?\]\s*(?:#\[[^\]]*\]\s*)*pub struct (\w+)")
_PYTHON_NAME = re.compile(r"\bname\s*=\s*\"(\w+)\"")


def misnamed_pyclasses(root: Path) -> list[str]:
    """Each `#[pyclass]` whose Rust type is not `Py` + its Python name (`name = "..."`): the
    `Py` prefix keeps a Python-facing type apart from the core type it wraps."""
    found = []
    for file in sorted(root.rglob("*.rs")):
        for options, rust_name in _PYCLASS.findall(_COMMENT.sub("", file.read_text())):
            python_name = _PYTHON_NAME.search(options or "")
            if python_name is None or rust_name != "Py" + python_name.group(1):
                found.append(f"{file.relative_to(root).as_posix()}: {rust_name}")
    return found


def test_python_facing_types_are_named_py_and_their_python_name():
    assert misnamed_pyclasses(BINDING_LAYER) == []


def _tree(tmp_path: Path, files: dict[str, str], layer: str = "py") -> Path:
    """The files under `tmp_path/<layer>` (the folder's name is the layer `crate::` names)."""
    root = tmp_path / layer
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize(
    "files",
    [
        # a -> b -> a, through `super::` in one and `crate::py::` in the other
        {
            "mod.rs": "mod convert;\n",
            "convert/mod.rs": "pub mod a;\npub mod b;\n",
            "convert/a.rs": "use super::b::thing;\n",
            "convert/b.rs": "use crate::py::convert::{a::{self, other}};\n",
        },
        # a -> b -> c -> a, one edge an inline path
        {
            "convert/mod.rs": "pub mod a;\npub mod b;\npub mod c;\n",
            "convert/a.rs": "use super::b;\n",
            "convert/b.rs": "fn f() { crate::py::convert::c::g() }\n",
            "convert/c.rs": "use super::{a, b};\n",
        },
    ],
)
def test_the_check_finds_a_cycle(tmp_path, files):
    assert find_cycle(dependency_graph(_tree(tmp_path, files))) is not None


def test_the_check_finds_a_core_cycle(tmp_path):
    # error -> sizes (a helper) and sizes -> error (the error type): the circle once in rust/core
    files = {
        "mod.rs": "pub mod error;\npub mod sizes;\n",
        "error.rs": "use crate::core::sizes::human_bytes;\n",
        "sizes.rs": "fn f() -> Result<(), crate::core::error::CollateError> { Ok(()) }\n",
    }
    graph = dependency_graph(_tree(tmp_path, files, layer="core"))
    assert find_cycle(graph) == ["error", "sizes", "error"]
    # The same paths seen from another layer name nothing of it.
    assert find_cycle(dependency_graph(_tree(tmp_path, files, layer="py"))) is None


def test_the_check_finds_convert_using_bindings(tmp_path):
    root = _tree(
        tmp_path,
        {
            "convert/mod.rs": "pub mod read;\n",
            "convert/read.rs": "// use crate::py::bindings::x; (a comment does not count)\n"
            "use crate::py::output::numpy_arrays::f;\n",
            "output/mod.rs": "pub mod numpy_arrays;\n",
            "output/numpy_arrays.rs": "use crate::py::bindings::collate::g;\n",
            "bindings/mod.rs": "pub mod collate;\n",
            "bindings/collate.rs": "use crate::py::output::numpy_arrays;\n",
        },
    )
    graph = dependency_graph(root)
    assert forbidden_uses(graph) == ["output/numpy_arrays uses bindings/collate"]
    assert find_cycle(graph) is not None  # numpy_arrays <-> collate


def test_the_check_finds_arrays_made_outside_output(tmp_path):
    lines = [
        "Ok(PyArray1::from_vec(py, indices))",
        "PyArray1::<i64>::zeros(py, [3], false)",
        "PyArray2::from_owned_array(py, array)",
        "Array2::from_shape_vec((1, 2), values)?.into_pyarray(py)",
        "values\n        .to_pyarray(py)",
        "use numpy::{IntoPyArray, PyArray1};",
        "PY_ARRAY_API.PyArray_NewFromDescr(py, t, d, 1, s, s, p, 0, o)",
    ]
    files = {f"bindings/b{i}.rs": f"fn f() {{ {line} }}\n" for i, line in enumerate(lines)}
    files |= {
        # Reading arrays, comments, and output/ itself are fine.
        "bindings/ok.rs": "use numpy::{PyArray1, PyReadonlyArray1};\n"
        "// PyArray1::from_vec(py, v) in a comment\n"
        "fn g(a: &Bound<'_, PyArray1<i64>>) { a.cast::<PyArray1<i64>>(); }\n",
        "output/numpy_arrays.rs": "fn h() { PyArray1::from_vec(py, v) }\n",
    }
    found = array_constructors_outside_output(_tree(tmp_path, files))
    assert [entry.split(":")[0] for entry in found] == [
        f"bindings/b{i}.rs" for i in range(len(lines))
    ]


def test_the_check_finds_misnamed_pyclasses(tmp_path):
    root = _tree(
        tmp_path,
        {
            "a.rs": '#[pyclass(frozen, name = "PadGroup", module = "m")]\n'
            "pub struct PyPadGroup {}\n"
            '#[pyclass(frozen)]\n#[derive(Clone)]\npub struct CollatePlan {}\n',
            "b.rs": '#[pyclass(name = "ArrowColumn")]\npub struct ArrowColumnHandle {}\n'
            "#[pyclass]\npub struct PyThing {}\n",
        },
    )
    assert misnamed_pyclasses(root) == [
        "a.rs: CollatePlan",
        "b.rs: ArrowColumnHandle",
        "b.rs: PyThing",
    ]
