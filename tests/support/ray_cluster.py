"""A local Ray cluster for the tests (`ray.init(num_cpus=2)`), whose workers import fastcollate
and `tests.support` from where the test process does, and which leaves no session folder
behind when it ends."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import ray

import fastcollate
from tests.support.repository import child_pythonpath


@contextlib.contextmanager
def local_cluster(**env_vars: str) -> Iterator[None]:
    package_root = str(Path(fastcollate.__file__).resolve().parent.parent)
    path = os.pathsep.join([package_root, child_pythonpath()])
    context = ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": path, **env_vars}},
    )
    try:
        yield
    finally:
        ray.shutdown()
        remove_session(Path(context.address_info["session_dir"]))


def remove_session(session: Path) -> None:
    """Removes the session folder a local cluster left under Ray's temp folder (logs, sockets,
    spilled objects: megabytes a run), and Ray's `session_latest` link when it still points
    there. Other sessions (other runs on the machine) are left alone."""
    latest = session.parent / "session_latest"
    if latest.is_symlink() and Path(os.readlink(latest)).name == session.name:
        latest.unlink()
    shutil.rmtree(session, ignore_errors=True)
