"""The hypothesis profiles the suite runs under, and each test's example count in them.

"default" (what a plain `python -m pytest` loads) runs a tenth of every test's examples, so the
default run takes minutes; "ci" (`--hypothesis-profile=ci`, as .ci/run runs the suite) runs
the full counts, derandomized: the same examples on every run, so CI's verdict on a commit does
not depend on a draw (a test that fails there fails the same way here); "default" and
"thorough" (ten times the full counts, for a long local hunt) draw new examples each run, which
is where new failures are found. A test that asks for its
own count writes `max_examples=examples(N)`: N under "ci", scaled like the profile's
`max_examples` elsewhere (tests that ask nothing get the profile's count itself).
"""

from __future__ import annotations

from hypothesis import settings

# The profile whose counts the tests' own numbers are: its max_examples is hypothesis' default.
FULL = "ci"
PROFILES = {"default": 10, FULL: 100, "thorough": 1000}
# A test never runs fewer examples than this (nor more than its full count) in any profile.
FLOOR = 3


def register() -> None:
    """Registers the profiles and loads "default"; pytest's `--hypothesis-profile NAME`
    (hypothesis' plugin) loads another before any test module is imported."""
    for name, count in PROFILES.items():
        # print_blob: a failure prints the blob that replays it (@reproduce_failure).
        settings.register_profile(name, max_examples=count, print_blob=True,
                                  derandomize=name == FULL)
    settings.load_profile("default")


def examples(full: int) -> int:
    """The example count for a test that runs `full` examples under the "ci" profile, in the
    profile loaded now (read when the test module is imported)."""
    scaled = round(full * settings().max_examples / PROFILES[FULL])
    return max(min(full, FLOOR), scaled)
