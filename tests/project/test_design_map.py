"""docs/design.md is the map of the source tree, and stays exact: every source file is named
there, every path it names exists, and its Python <-> Rust table agrees with the code (which
module calls which `_native` name, which binding file defines it, which core module it uses).
Read from the files themselves (`ast` for Python, text for Rust), so nothing needs building."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
PACKAGE = ROOT / "python" / "fastcollate"
STUB = PACKAGE / "_native.pyi"
TABLE_HEADING = "## Python ↔ Rust"
FILES_HEADING = "## Source files"
FILE_LINE = re.compile(r"^- `([^`\s]+)` —\s", re.MULTILINE)

# Folders that hold build outputs or caches, never sources.
NOT_SOURCES = {"__pycache__", "target", "build", "dist", ".mypy_cache", ".ruff_cache"}
# A backticked token is a path when it starts with one of these folders or ends with one of
# these extensions; it is read from the repository root.
PATH_FOLDERS = ("rust/", "python/", "tests/", "benches/", "docs/", "examples/", ".ci/",
                ".github/")
PATH_EXTENSIONS = (".rs", ".py", ".pyi", ".toml", ".md", ".json", ".yml", ".yaml")
BACKTICKED = re.compile(r"`([^`\s]+)`")


def source_files(root: Path = ROOT) -> list[str]:
    """Every source file, relative to the root: `rust/**/*.rs` and the package's `.py` /
    `.pyi` files, build outputs left out."""
    found = [*(root / "rust").rglob("*.rs")]
    package = root / "python" / "fastcollate"
    found += [*package.rglob("*.py"), *package.rglob("*.pyi")]
    return sorted(
        path.relative_to(root).as_posix()
        for path in found
        if not NOT_SOURCES.intersection(path.relative_to(root).parts)
    )


def named_paths(text: str) -> set[str]:
    """Every path the page names in backticks."""
    named = set()
    for token in BACKTICKED.findall(text):
        if "*" in token or "://" in token:
            continue
        if token.startswith(PATH_FOLDERS) or token.endswith(PATH_EXTENSIONS):
            named.add(token)
    return named


def exists(path: Path, folder: bool) -> bool:
    return path.is_dir() if folder else path.is_file()


def listed_files(text: str) -> set[str]:
    """The files with a line of their own under '## Source files': `- `path` — purpose`."""
    start = text.find(FILES_HEADING)
    if start == -1:
        return set()
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    return set(FILE_LINE.findall(section))


def map_problems(text: str, root: Path = ROOT) -> list[str]:
    """What is wrong with the page as a map of the tree under `root`, every problem at once."""
    named = named_paths(text)
    listed = listed_files(text)
    missing = [path for path in source_files(root) if path not in listed]
    stale = sorted(path for path in named if not exists(root / path, path.endswith("/")))
    problems = []
    if missing:
        problems.append(
            "source files without a line of their own in docs/design.md; add a line "
            "'- `<path>` — <what it is for>' under the heading of its folder in "
            f"'{FILES_HEADING}' for each:\n" + "\n".join(f"  {path}" for path in missing)
        )
    if stale:
        problems.append(
            "paths docs/design.md names that do not exist (moved, renamed or deleted?); "
            "write each path from the repository root, and update or remove these:\n"
            + "\n".join(f"  {path}" for path in stale)
        )
    return problems


def test_design_names_every_source_file_and_only_real_paths():
    problems = map_problems(DESIGN.read_text("utf-8"))
    assert not problems, "\n\n".join(problems)


# --- the Python <-> Rust table ---


def table_rows(text: str) -> list[list[str]]:
    """The cells of each body row of the table under TABLE_HEADING."""
    start = text.index(TABLE_HEADING)
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert len(rows) > 2, f"no table under '{TABLE_HEADING}' in docs/design.md"
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def table() -> dict[str, list[str]]:
    """Each `_native` name in the table's first column -> the cells of its row."""
    by_name: dict[str, list[str]] = {}
    for cells in table_rows(DESIGN.read_text("utf-8")):
        for name in BACKTICKED.findall(cells[0]):
            assert name not in by_name, f"`{name}` has two rows in the Python <-> Rust table"
            by_name[name] = cells
    return by_name


def exported_names() -> set[str]:
    """The extension's exports, as its stub's `__all__` lists them (`mypy.stubtest` holds the
    stub to the built module)."""
    for node in ast.parse(STUB.read_text("utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return set(ast.literal_eval(node.value))
    raise AssertionError("_native.pyi has no __all__")


def native_uses() -> dict[str, set[str]]:
    """Each `_native` name the package's code uses -> the files (from the root) using it:
    `_native.name` after `from .. import _native`, and `from .._native import name`.
    Docstrings and comments do not count."""
    uses: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if NOT_SOURCES.intersection(path.parts):
            continue
        where = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text("utf-8"), filename=str(path))):
            names = []
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "_native"
            ):
                names = [node.attr]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] == (
                "_native"
            ):
                names = [alias.name for alias in node.names]
            for name in names:
                uses.setdefault(name, set()).add(where)
    return uses


def defines(source: str, name: str) -> bool:
    """Whether Rust `source` exports `name` to Python: a `#[pyfunction]` of that name, a
    `#[pyclass]` struct of that name (or `name = "..."`), or a value added to the module."""
    escaped = re.escape(name)
    patterns = (
        rf"#\[pyfunction\][^{{;]*?\bfn {escaped}\b",
        rf"#\[pyclass(?:\((?:(?!name =)[^\]])*\))?\]\s*(?:#\[[^\]]*\]\s*)*pub struct {escaped}\b",
        rf"#\[pyclass\([^\]]*\bname = \"{escaped}\"",
        rf"\.add\(\s*\"{escaped}\"",
    )
    return any(re.search(pattern, source) for pattern in patterns)


def test_every_native_name_in_use_has_a_row_naming_its_callers():
    rows, uses = table(), native_uses()
    problems = []
    for name, files in sorted(uses.items()):
        if name not in rows:
            problems.append(
                f"`_native.{name}` is used by {sorted(files)} but has no row in the table: "
                "add one (name, callers, binding file, core modules)"
            )
            continue
        callers = set(BACKTICKED.findall(rows[name][1]))
        for where in sorted(files - callers):
            problems.append(
                f"{where} uses `_native.{name}`: add `{where}` to the 'called from' cell of "
                f"the row for `{name}`"
            )
    # A row may hold several names; each caller it lists must use one of them.
    row_names: dict[tuple[str, ...], list[str]] = {}
    for name, cells in rows.items():
        row_names.setdefault(tuple(cells), []).append(name)
    for cells, names in row_names.items():
        for where in BACKTICKED.findall(cells[1]):
            if where.startswith("python/") and not any(
                where in uses.get(name, ()) for name in names
            ):
                problems.append(
                    f"the row for {', '.join(f'`{n}`' for n in names)} says `{where}` calls "
                    "it, but that file uses none of its names: remove it from the 'called from' "
                    "cell"
                )
    assert not problems, "docs/design.md, Python <-> Rust table:\n" + "\n".join(problems)


def test_the_table_names_every_export_and_only_exports():
    rows, exported = table(), exported_names()
    problems = [
        f"`{name}` is in the table but not exported by the native module (_native.pyi "
        "__all__): rename or remove its row"
        for name in sorted(set(rows) - exported)
    ] + [
        f"the native module exports `{name}` (_native.pyi __all__) but the table has no row "
        "for it: add one"
        for name in sorted(exported - set(rows))
    ]
    assert not problems, "docs/design.md, Python <-> Rust table:\n" + "\n".join(problems)


def test_each_row_names_the_binding_that_defines_it_and_the_core_it_uses():
    problems = []
    for name, cells in sorted(table().items()):
        bindings = [p for p in BACKTICKED.findall(cells[2]) if p.startswith("rust/py/")]
        sources = {p: (ROOT / p).read_text("utf-8") for p in bindings if (ROOT / p).is_file()}
        if not any(defines(source, name) for source in sources.values()):
            problems.append(
                f"the row for `{name}` names {bindings or 'no rust/py/ file'} as its binding, "
                f"but none of them exports `{name}`: name the file that defines it"
            )
        for core in BACKTICKED.findall(cells[3]):
            if not core.startswith("rust/core/"):
                continue
            module = Path(core).stem
            if not any(re.search(rf"\bcore::{module}\b", s) for s in sources.values()):
                problems.append(
                    f"the row for `{name}` names `{core}`, but none of its binding files "
                    f"({', '.join(bindings)}) uses `core::{module}`: correct the core cell"
                )
    assert not problems, "docs/design.md, Python <-> Rust table:\n" + "\n".join(problems)


# --- the checks themselves can fail ---


@pytest.fixture
def tiny_tree(tmp_path):
    for path in ("rust/lib.rs", "rust/core/pad.rs", "python/fastcollate/__init__.py",
                 "python/fastcollate/_native.pyi", "python/fastcollate/__pycache__/x.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    return tmp_path


def test_a_complete_map_passes(tiny_tree):
    text = ("## Source files\n\n- `rust/lib.rs` — root\n- `rust/core/pad.rs` — pad\n"
            "- `python/fastcollate/__init__.py` — names\n"
            "- `python/fastcollate/_native.pyi` — stub\nUnder `rust/core/`.")
    assert map_problems(text, tiny_tree) == []


def test_every_missing_and_every_stale_path_is_listed_at_once(tiny_tree):
    text = ("## Source files\n\n- `rust/lib.rs` — root\n- `rust/core/bfd.rs` — gone\n"
            "- `rust/py/` — gone\n- `python/fastcollate/_native.pyi` — stub\n"
            "- `padding.py` — not from the root\n\n"
            "## Elsewhere\n\nNamed in prose only: `rust/core/pad.rs`.\n")
    missing, stale = map_problems(text, tiny_tree)
    # A file named only outside its own line is still missing from the list.
    assert "rust/core/pad.rs" in missing and "python/fastcollate/__init__.py" in missing
    assert "__pycache__" not in missing  # build outputs are not sources
    for path in ("rust/core/bfd.rs", "rust/py/", "padding.py"):
        assert f"  {path}\n" in stale + "\n"


def test_binding_definitions_are_recognised():
    source = (
        '#[pyfunction]\n#[pyo3(signature = (a, *, b=None))]\npub fn collate<\'py>(a: i64) {}\n'
        '#[pyclass(frozen, name = "ArrowColumn", module = "m")]\npub struct PyArrowColumn {}\n'
        '#[pyclass(frozen)]\npub struct CollatePlan {}\nm.add("__version__", "1")?;\n'
    )
    for name in ("collate", "ArrowColumn", "CollatePlan", "__version__"):
        assert defines(source, name), name
    for name in ("collate_planned", "PyArrowColumn", "build_profile"):
        assert not defines(source, name), name


# --- Rust identifiers the page names, and the raw-read table ---

RAW_READS_HEADING = "## Every raw read, and what guards it"
RUST_PATH = re.compile(r"^(?:[A-Za-z_]\w*::)+[A-Za-z_]\w*$")
# Paths into other crates are not this page's to check.
EXTERNAL_CRATES = {"std", "core_foundation", "pyo3", "numpy", "ndarray", "libc", "mimalloc"}
# Rust's primitive types (`isize::MAX`) are not this page's to check either.
PRIMITIVES = {"isize", "usize", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64"}
_RUST_COMMENT = re.compile(r"//.*")
_UNSAFE_BLOCK = re.compile(r"\bunsafe\s*\{")


def rust_paths(text: str) -> set[str]:
    """Every `module::name` (or `Type::method`) path the page writes in backticks."""
    return {
        token
        for token in BACKTICKED.findall(text)
        if RUST_PATH.match(token) and token.split("::")[0] not in EXTERNAL_CRATES | PRIMITIVES
    }


def binding_module_files(root: Path, module: str) -> list[Path]:
    """The binding layer's files of module `module` (`ints` -> rust/py/convert/ints.rs)."""
    py = root / "rust" / "py"
    return sorted([*py.glob(f"*/{module}.rs"), *py.glob(f"{module}.rs")])


def defines_rust(source: str, name: str) -> bool:
    """Whether Rust `source` defines `name`: a fn, type, trait, const, static, module or an
    enum's variant (a line of an enum's body that starts with the name)."""
    kinds = r"fn|struct|enum|trait|type|const|static|mod|union"
    if re.search(rf"\b(?:{kinds})\s+{re.escape(name)}\b", source) is not None:
        return True
    variant = re.compile(rf"^\s+{re.escape(name)}\s*(?:[{{(,]|$)", re.MULTILINE)
    return any(
        variant.search(body) is not None
        for body in re.findall(r"\benum\s+\w+[^{]*\{(.*?)\n\}", source, re.DOTALL)
    )


def rust_path_problem(path: str, root: Path = ROOT) -> str | None:
    """Why `path` names nothing in the tree, or None. `core::m::x` is rust/core/m.rs's `x`;
    `m::x` the binding layer's module `m` or the core's; `Type::method` a file that
    defines both; each name after the module must be defined in the same file."""
    segments = path.split("::")
    if segments[0] == "crate":
        segments = segments[1:]
    if segments[:1] == ["py"]:
        segments = segments[1:]
    if len(segments) > 1 and (root / "rust" / "py" / segments[0]).is_dir():
        segments = segments[1:]  # a folder of the binding layer: `convert::ints`
    if segments[0] == "core" and len(segments) > 1:
        candidates = [root / "rust" / "core" / f"{segments[1]}.rs"]
        names = segments[2:]
    elif segments[0][:1].islower():
        candidates = [
            *binding_module_files(root, segments[0]),
            root / "rust" / "core" / f"{segments[0]}.rs",
        ]
        names = segments[1:]
    else:
        candidates = sorted((root / "rust").rglob("*.rs"))
        names = segments
    existing = [file for file in candidates if file.is_file()]
    if not existing:
        return f"`{path}`: no module file {candidates[0].relative_to(root).as_posix()}"
    for file in existing:
        source = _RUST_COMMENT.sub("", file.read_text("utf-8"))
        if all(defines_rust(source, name) for name in names):
            return None
    wanted = " and ".join(names)
    if len(existing) > 2:
        return f"`{path}`: no file under rust/ defines {wanted}"
    where = ", ".join(file.relative_to(root).as_posix() for file in existing)
    return f"`{path}`: {where} does not define {wanted}"


def rust_path_problems(text: str, root: Path = ROOT) -> list[str]:
    return sorted(filter(None, (rust_path_problem(path, root) for path in rust_paths(text))))


def test_every_rust_path_the_page_names_exists():
    problems = rust_path_problems(DESIGN.read_text("utf-8"))
    assert not problems, (
        "docs/design.md names Rust items that do not exist (renamed, moved or removed?); "
        "update the page:\n" + "\n".join(problems)
    )


def files_with_unsafe_blocks(root: Path = ROOT) -> set[str]:
    """The binding layer's files holding an `unsafe { ... }` block (comments left out)."""
    return {
        file.relative_to(root).as_posix()
        for file in (root / "rust" / "py").rglob("*.rs")
        if _UNSAFE_BLOCK.search(_RUST_COMMENT.sub("", file.read_text("utf-8")))
    }


def raw_read_sites(text: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Each row of the raw-read table (its first cell) -> the binding-layer files its sites
    name: the `module::name` paths of the cell, outside parentheses (which only say where a
    site is used)."""
    start = text.find(RAW_READS_HEADING)
    assert start != -1, f"docs/design.md has no '{RAW_READS_HEADING}' section"
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]
    sites: dict[str, set[str]] = {}
    for row in rows:
        cell = row.strip("|").split("|")[0].strip()
        files = set()
        for path in BACKTICKED.findall(re.sub(r"\([^)]*\)", "", cell)):
            if RUST_PATH.match(path):
                found = binding_module_files(root, path.split("::")[0])
                files |= {file.relative_to(root).as_posix() for file in found}
        sites[cell] = files
    return sites


def raw_read_problems(text: str, root: Path = ROOT) -> list[str]:
    sites = raw_read_sites(text, root)
    unsafe_files = files_with_unsafe_blocks(root)
    named = set().union(*sites.values()) if sites else set()
    problems = [
        f"{file} holds an `unsafe` block but no row of the raw-read table names a site in it: "
        "add a row (site, pointer, guard)"
        for file in sorted(unsafe_files - named)
    ]
    for cell, files in sites.items():
        if not files:
            problems.append(f"the row '{cell}' names no binding-layer `module::name` site")
        for file in sorted(files - unsafe_files):
            problems.append(
                f"the row '{cell}' names {file}, which holds no `unsafe` block any more: "
                "update or remove the row"
            )
    return problems


def test_the_raw_read_table_covers_every_unsafe_block():
    problems = raw_read_problems(DESIGN.read_text("utf-8"))
    assert not problems, f"docs/design.md, '{RAW_READS_HEADING}':\n" + "\n".join(problems)


@pytest.fixture
def rust_tree(tmp_path):
    files = {
        "rust/core/pad.rs": "pub struct Plan {}\nimpl Plan { pub fn fill(&self) {} }\n"
        "pub fn target_length() {}\n"
        "pub enum Error {\n    TooLarge { key: String },\n    Empty,\n}\n",
        "rust/py/convert/ints.rs": "unsafe fn items() {}\nfn read() { unsafe { items() } }\n"
        "pub struct SmallInts;\n",
        "rust/py/convert/rows.rs": "// unsafe { in a comment }\npub fn keys() {}\n",
        "rust/py/output/numpy_arrays.rs": "pub fn owned_array() { let _ = unsafe { 1 }; }\n",
    }
    for path, source in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(source)
    return tmp_path


def test_rust_paths_are_resolved_and_missing_ones_listed(rust_tree):
    text = (
        "`core::pad::target_length`, `core::pad::Plan`, `Plan::fill`, `ints::SmallInts`, "
        "`crate::py::convert::rows`, `convert::rows::keys`, `std::mem::swap` (another crate), "
        "`ints::gone`, `core::grouping::group`, `Plan::missing`, `nothing::here`, `a.b`, "
        "`Error::TooLarge`, `Error::Empty`, `Error::Missing`, `isize::MAX` (a primitive)"
    )
    problems = rust_path_problems(text, rust_tree)
    assert [p.split("`")[1] for p in problems] == [
        "Error::Missing",
        "Plan::missing",
        "core::grouping::group",
        "ints::gone",
        "nothing::here",
    ]


def test_the_raw_read_table_check_finds_missing_and_stale_rows(rust_tree):
    table = (
        f"{RAW_READS_HEADING}\n\n| site | pointer | guard |\n|---|---|---|\n"
        "| `ints::read` (used by `numpy_arrays::owned_array`) | items | attached |\n"
        "| `rows::keys` | none | none |\n"
        "| a site without a path | ? | ? |\n\n## Next\n"
    )
    problems = raw_read_problems(table, rust_tree)
    # numpy_arrays.rs is named only inside parentheses, so it has no row.
    assert len(problems) == 3
    assert problems[0].startswith("rust/py/output/numpy_arrays.rs holds an `unsafe` block")
    assert "names rust/py/convert/rows.rs, which holds no `unsafe` block" in problems[1]
    assert "names no binding-layer" in problems[2]
    complete = table.replace("`rows::keys`", "`numpy_arrays::owned_array`").replace(
        "| a site without a path | ? | ? |\n", ""
    )
    assert raw_read_problems(complete, rust_tree) == []


# --- the table's core column, and the glossary's code names ---

CORE_CELL_PATH = re.compile(r"`(rust/core/[^`\s]+)`(?:\s*\(([^)]*)\))?")
IDENTIFIER = re.compile(r"^[A-Za-z_]\w*(?:(?:\.|::)[A-Za-z_]\w*)*$")
WORDS_HEADING = "## Words"


def core_cell_problems(name: str, cell: str, root: Path = ROOT) -> list[str]:
    """What is wrong with a row's core cell: each `rust/core/...` path must exist, and each
    name in backticks in the parentheses after it (`Type::method`: both) be defined there."""
    problems = []
    for path, named in CORE_CELL_PATH.findall(cell):
        file = root / path
        if not file.is_file():
            problems.append(f"the row for `{name}` names `{path}`, which does not exist")
            continue
        source = _RUST_COMMENT.sub("", file.read_text("utf-8"))
        for item in BACKTICKED.findall(named):
            if not IDENTIFIER.match(item):
                continue
            missing = [part for part in item.split("::") if not defines_rust(source, part)]
            if missing:
                problems.append(
                    f"the row for `{name}` names `{item}` in `{path}`, which does not define "
                    f"{' and '.join(missing)}: correct the core cell"
                )
    return problems


def table_core_problems(text: str, root: Path = ROOT) -> list[str]:
    problems = []
    for cells in table_rows(text):
        name = ", ".join(BACKTICKED.findall(cells[0])) or cells[0]
        problems += core_cell_problems(name, cells[3], root)
    return problems


def test_the_core_column_names_real_files_and_functions():
    problems = table_core_problems(DESIGN.read_text("utf-8"))
    assert not problems, "docs/design.md, Python <-> Rust table:\n" + "\n".join(problems)


def glossary_entries(text: str) -> dict[str, str]:
    """Each entry of the '## Words' list (`- **word** ...`, continued by indented lines) ->
    its text."""
    start = text.find(WORDS_HEADING)
    assert start != -1, f"docs/design.md has no '{WORDS_HEADING}' section"
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    entries: dict[str, str] = {}
    word = None
    for line in section.splitlines():
        found = re.match(r"^- \*\*([^*]+)\*\*", line)
        if found:
            word = found.group(1)
            entries[word] = line
        elif word is not None and line.startswith("  "):
            entries[word] += "\n" + line
        else:
            word = None
    return entries


def _source_text(file: Path) -> str:
    text = file.read_text("utf-8")
    return _RUST_COMMENT.sub("", text) if file.suffix == ".rs" else text


def glossary_problems(text: str, root: Path = ROOT) -> list[str]:
    """Each code name in backticks in a glossary entry (the last part of `a::b` or `a.b`) must
    occur in a file the entry names, or else in some source under rust/ or python/."""
    everything: str | None = None
    problems = []
    for word, entry in glossary_entries(text).items():
        tokens = BACKTICKED.findall(entry)
        files = [root / t for t in tokens if t.startswith(PATH_FOLDERS) and (root / t).is_file()]
        named = "\n".join(_source_text(file) for file in files)
        for token in tokens:
            if token.startswith(PATH_FOLDERS) or not IDENTIFIER.match(token):
                continue
            name = re.split(r"\.|::", token)[-1]
            found = re.compile(rf"\b{re.escape(name)}\b")
            if found.search(named):
                continue
            if everything is None:
                sources = [*(root / "rust").rglob("*.rs"), *(root / "python").rglob("*.py*")]
                everything = "\n".join(
                    _source_text(file)
                    for file in sources
                    if file.suffix in (".rs", ".py", ".pyi")
                    and not NOT_SOURCES.intersection(file.relative_to(root).parts)
                )
            if not found.search(everything):
                problems.append(
                    f"the glossary's '{word}' names `{token}`, which no file it names and no "
                    "source under rust/ or python/ holds: rename or remove it"
                )
    return problems


def test_every_code_name_in_the_glossary_exists():
    problems = glossary_problems(DESIGN.read_text("utf-8"))
    assert not problems, f"docs/design.md, '{WORDS_HEADING}':\n" + "\n".join(problems)


def test_the_core_column_check_finds_wrong_paths_and_functions(rust_tree):
    header = f"{TABLE_HEADING}\n\n| name | from | binding | core |\n|---|---|---|---|\n"
    right = "| `collate` | x | y | `rust/core/pad.rs` (`target_length`, `Plan::fill`) |\n"
    assert table_core_problems(header + right, rust_tree) == []
    wrong = (
        "| `collate` | x | y | `rust/core/pad.rs` (`target_length`, `fill_in_place`), "
        "`rust/core/gone.rs` (`gone`) |\n"
        "| `plan` | x | y | `rust/core/pad.rs` (`Plan::missing`) |\n"
    )
    problems = table_core_problems(header + wrong, rust_tree)
    assert len(problems) == 3
    assert "`fill_in_place` in `rust/core/pad.rs`" in problems[0]
    assert "`rust/core/gone.rs`, which does not exist" in problems[1]
    assert "`Plan::missing`" in problems[2] and "define missing" in problems[2]


def test_the_glossary_check_finds_names_that_live_nowhere(rust_tree):
    right = (
        f"{WORDS_HEADING}\n\n- **plan** — `core::pad::Plan` in `rust/core/pad.rs`, and\n"
        "  `SmallInts` (found elsewhere under rust/).\n- **keys** — `rows::keys`.\n\n## Next\n"
    )
    assert glossary_problems(right, rust_tree) == []
    wrong = right.replace("`SmallInts`", "`BigInts`").replace("`rows::keys`", "`rows::values`")
    problems = glossary_problems(wrong, rust_tree)
    assert len(problems) == 2
    assert "'plan' names `BigInts`" in problems[0]
    assert "'keys' names `rows::values`" in problems[1]
