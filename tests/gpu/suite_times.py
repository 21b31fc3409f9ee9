"""Where a GPU test run's time went: seconds and outcomes per test file.

conftest.py adds every test's phases (setup, call, teardown) as pytest
reports them and prints the table at the end of the run (and, with
JAXMG_TEST_SUMMARY=FILE, writes it there). A run cut by a device call's
bound never reaches its end: its JAXMG_TEST_PROGRESS file still has every
test's start and outcome, and

    python tests/gpu/suite_times.py PROGRESS_FILE [--top K]

makes the same table from it, each test's time the wall clock from its
start to the next test's (setup and teardown, module fixtures' jobs of
processes among them), with the K dearest tests.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import pathlib
import re
import sys


@dataclasses.dataclass
class FileTimes:
    """One test file's seconds and its tests' outcomes."""

    seconds: float = 0.0
    outcomes: collections.Counter = dataclasses.field(default_factory=collections.Counter)


def file_of(nodeid: str) -> str:
    """The test file's name of a pytest node id ("tests/gpu/test_x.py::t[p]")."""
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1]


def table(per_file: dict[str, FileTimes], wall_s: float | None = None,
          title: str = "GPU tests: seconds per file") -> str:
    """The per-file table, dearest first, with the total (and the run's wall
    clock where given)."""
    total = sum(f.seconds for f in per_file.values())
    lines = [title]
    for name, f in sorted(per_file.items(), key=lambda kv: -kv[1].seconds):
        counts = ", ".join(f"{n} {k}" for k, n in sorted(f.outcomes.items()))
        lines.append(f"{f.seconds:8.1f} s  {name}  ({counts})")
    lines.append(f"{total:8.1f} s  total of {len(per_file)} files"
                 + (f"; {wall_s:.1f} s of wall clock" if wall_s is not None else ""))
    return "\n".join(lines)


_START = re.compile(r"^(\d\d):(\d\d):(\d\d) start (\S+)$")
_OUTCOME = re.compile(r"^(\d\d):(\d\d):(\d\d) (passed|failed|skipped) (setup|call|teardown) "
                      r"[\d.]+ s (\S+)$")


def _seconds(h: str, m: str, s: str) -> int:
    return int(h) * 3600 + int(m) * 60 + int(s)


def from_progress(lines: list[str]) -> tuple[dict[str, FileTimes], list[tuple[float, str, str]]]:
    """The per-file table's rows from a JAXMG_TEST_PROGRESS file's lines, and
    every test's (seconds, outcome, node id): its seconds from its start to
    the next test's start (to its own last line for the last test), to the
    second; "cut" where no outcome came (the run ended inside it)."""
    starts: list[tuple[int, str]] = []
    outcome: dict[str, str] = {}
    last: dict[str, int] = {}
    for line in lines:
        m = _START.match(line)
        if m:
            starts.append((_seconds(*m.groups()[:3]), m[4]))
            continue
        m = _OUTCOME.match(line)
        if m:
            nodeid = m[6]
            last[nodeid] = _seconds(*m.groups()[:3])
            if m[5] == "call" or m[4] != "passed":
                outcome.setdefault(nodeid, m[4])
    per_file: dict[str, FileTimes] = {}
    tests = []
    for k, (t, nodeid) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else last.get(nodeid, t)
        took = float((end - t) % 86400)  # past midnight
        what = outcome.get(nodeid, "cut")
        f = per_file.setdefault(file_of(nodeid), FileTimes())
        f.seconds += took
        f.outcomes[what] += 1
        tests.append((took, what, nodeid))
    return per_file, tests


def main(argv: list[str]) -> int:
    """The table (and the dearest tests) of each progress file named."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("progress", nargs="+", type=pathlib.Path)
    p.add_argument("--top", type=int, default=30, help="the dearest tests to list")
    args = p.parse_args(argv)
    for path in args.progress:
        per_file, tests = from_progress(path.read_text().splitlines())
        wall = sum(t for t, _, _ in tests)
        print(table(per_file, title=f"{path}: seconds per file (start to next start)"))
        print(f"dearest {min(args.top, len(tests))} of {len(tests)} tests ({wall:.0f} s in all):")
        for took, what, nodeid in sorted(tests, reverse=True)[:args.top]:
            print(f"{took:6.0f} s  {what:7s} {nodeid}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
