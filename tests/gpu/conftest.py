"""GPU tests: every test in this directory is skipped when JAX has no GPU.

jax is imported lazily, inside the hooks, never at the top of this file:
tests/python/conftest.py must set XLA_FLAGS before jax is first imported, and
pytest may load this conftest first (``pytest tests/gpu tests/python``).
"""

import os
import pathlib
import time

import pytest

from gpu_env import gpu_devices
from suite_times import FileTimes, file_of, table

_HERE = pathlib.Path(__file__).resolve().parent

# JAXMG_GPU_WORKER_SETS="0,1 2,3" with pytest-xdist (-n as many workers as
# sets): worker gwK sees only the K-th set of GPUs (CUDA_VISIBLE_DEVICES, set
# here, before anything imports jax), so that one pytest run of the suite on
# 2 GPUs (or 1) runs on disjoint GPUs of a larger machine in parallel, every
# test still seeing the GPUs of its set alone. Workers never share a GPU:
# more workers than sets is an error.
_SETS = os.environ.get("JAXMG_GPU_WORKER_SETS", "").split()
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _SETS and _WORKER.startswith("gw"):
    _index = int(_WORKER[2:])
    if _index >= len(_SETS):
        raise pytest.UsageError(
            f"JAXMG_GPU_WORKER_SETS has {len(_SETS)} GPU sets ({' '.join(_SETS)}) but worker "
            f"{_WORKER} is number {_index + 1}: run with -n {len(_SETS)} at most")
    os.environ["CUDA_VISIBLE_DEVICES"] = _SETS[_index]
    # And its share of the host's cores: the workers' NumPy references,
    # XLA's compiles and the processes the tests start otherwise each take
    # every core (session 21 on 4 x H200: four workers' tests took 3.3x
    # their time alone, two workers' 1.9x). The affinity bounds XLA's thread
    # pools (they size themselves from it) and every child process; the
    # BLAS variables NumPy's, which read the core count, not the mask.
    # JAXMG_GPU_WORKER_CPUS=0 leaves the cores shared.
    if os.environ.get("JAXMG_GPU_WORKER_CPUS", "1") != "0" and hasattr(os, "sched_setaffinity"):
        _cores = sorted(os.sched_getaffinity(0))
        _share = max(1, len(_cores) // len(_SETS))
        _mine_cores = _cores[_index * _share:(_index + 1) * _share] or _cores
        os.sched_setaffinity(0, _mine_cores)
        for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(_var, str(len(_mine_cores)))

# JAXMG_TEST_PROGRESS=FILE: one line per test as it starts and as it ends
# (wall time, outcome, seconds; a failure's last lines), written at once, so that a run cut by a
# device call's bound still says how long each test took and which one it
# was in (pytest's own --durations table comes only at the end).
_PROGRESS = os.environ.get("JAXMG_TEST_PROGRESS", "")


def _progress(line: str) -> None:
    # Under pytest-xdist the controller writes it (it sees every worker's
    # reports); the workers would write each line a second time.
    if _PROGRESS and not _WORKER:
        with open(_PROGRESS, "a") as f:
            f.write(f"{time.strftime('%H:%M:%S')} {line}\n")


def pytest_runtest_logstart(nodeid, location):
    _progress(f"start {nodeid}")


# Seconds per test file of this directory (every phase of every test), the
# table pytest_terminal_summary prints at the end; JAXMG_TEST_SUMMARY=FILE
# writes it there too (and JAXMG_TEST_PROGRESS's file ends with it).
_PER_FILE: dict[str, FileTimes] = {}
_MINE: set[str] = set()  # this directory's node ids (pytest_collection_modifyitems)
_SESSION_START = time.monotonic()


def _mine(nodeid: str) -> bool:
    """Whether a test is of this directory: collected here, or (the
    pytest-xdist controller, which collects nothing itself) named after one
    of this directory's files."""
    if nodeid in _MINE:
        return True
    path = pathlib.PurePosixPath(nodeid.split("::")[0])
    return bool(_WORKER == "" and path.parent.name == _HERE.name and (_HERE / path.name).is_file())


def pytest_runtest_logreport(report):
    # The call phase's outcome, or a setup/teardown that did not pass (a
    # skip, an error); each with the phase's seconds.
    if report.when == "call" or report.outcome != "passed":
        _progress(f"{report.outcome} {report.when} {report.duration:.2f} s {report.nodeid}")
    if _mine(report.nodeid):
        f = _PER_FILE.setdefault(file_of(report.nodeid), FileTimes())
        f.seconds += report.duration
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            f.outcomes[report.outcome] += 1
        elif report.outcome == "failed":  # a teardown's error
            f.outcomes["teardown error"] += 1
    if report.failed:
        # The failure's last lines, since a run cut by its bound never
        # reaches pytest's summary.
        tail = str(report.longrepr).splitlines()[-30:]
        _progress("  | " + "\n  | ".join(tail))


_PROCESS_FILES = {"test_gpu_mpmd.py", "test_gpu_mpmd_faults.py", "test_gpu_shared_gpus.py"}


def pytest_collection_modifyitems(config, items):
    # This hook sees the whole session's items: touch only this directory's.
    mine = [item for item in items if _HERE in pathlib.Path(str(item.path)).resolve().parents]
    _MINE.update(item.nodeid for item in mine)
    if mine and not gpu_devices():
        skip = pytest.mark.skip(reason="no GPU: jax.devices() has no platform 'gpu'")
        for item in mine:
            item.add_marker(skip)
    # Under pytest-xdist (--dist loadgroup), the tests that start a job of
    # processes over the GPUs (NCCL, cuSOLVERMp, shared-memory segments,
    # busy neighbours) run one at a time, on one worker; the others spread.
    for item in mine:
        names = getattr(getattr(item, "function", None), "__code__", None)
        names = names.co_names if names is not None else ()
        if item.path.name in _PROCESS_FILES or {"run_job", "_job", "run_example"} & set(names):
            item.add_marker(pytest.mark.xdist_group("processes"))


@pytest.fixture(scope="session")
def gpus():
    devices = gpu_devices()
    if not devices:  # only reached when a test is run despite the marker
        pytest.skip("no GPU")
    return devices


def pytest_terminal_summary(terminalreporter):
    # Not where every test was skipped (no GPU: the CPU suite's runs).
    if not any(set(f.outcomes) - {"skipped"} for f in _PER_FILE.values()):
        return
    text = table(_PER_FILE, wall_s=time.monotonic() - _SESSION_START)
    terminalreporter.write_sep("=", "GPU tests: seconds per file")
    terminalreporter.write_line(text)
    for line in text.splitlines():
        _progress(f"summary {line}")
    out = os.environ.get("JAXMG_TEST_SUMMARY", "")
    if out:
        pathlib.Path(out).write_text(text + "\n")
