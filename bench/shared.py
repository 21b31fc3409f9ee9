"""What the benchmark scripts share that needs no jax (bench/run.py,
bench/engines.py, bench/scaling.py, bench/report.py): stopping on SIGTERM
with what was measured, the commit a run measured, and a CSV cell."""

from __future__ import annotations

import math
import os
import pathlib
import subprocess
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent


class Interrupted(Exception):
    """SIGTERM (from `timeout` or the device tool's bound): stop measuring,
    write what was measured."""


def on_sigterm(signum: int, frame: Any) -> None:
    """The SIGTERM handler a script installs while it measures."""
    raise Interrupted()


def commit() -> str:
    """The commit measured: JAXMG_COMMIT, else git's HEAD of this tree, else
    "unknown"."""
    if os.environ.get("JAXMG_COMMIT"):
        return os.environ["JAXMG_COMMIT"]
    try:
        return subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def csv_cell(v: Any) -> str:
    """A value as a results.csv cell: "" for None and NaN, floats to 6
    significant digits."""
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.6g}"
    return str(v)
