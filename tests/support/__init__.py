"""Helpers shared by the tests, and the scripts the tests run in child processes (python,
torchrun, Ray workers). A child imports them as `tests.support.NAME`, so the repository root is
on its PYTHONPATH (`repository.child_env`)."""
