"""Faults across processes in the local model on GPUs: one process per GPU,
JAXMG_ENGINE=cusolvermp, whose ranks meet over NCCL (cuda/comm_nccl.c). The
CPU local model's failure scenarios (tests/python/test_mpmd_local.py, worker
tests/python/mpmd_worker.py local_failure) with platform "cuda": a process
that raises before a call and ends, one killed inside a call, one killed
before its first call in the local model, one that never arrives. The others
return an error naming the op and rank 1 (its pid where its process is gone)
within JAXMG_RENDEZVOUS_TIMEOUT, never hang: NCCL cannot time out by itself,
so a watchdog thread (comm/watchdog.c) watches every guarded call and
revokes or aborts the communicator. Then a fresh job ("loop") on the same
GPUs works. 2 processes where 2 GPUs are there, 3 where 3 are.

Not yet run on GPUs when written (2026-11-27): the watchdog's decision and
thread are tested on CPU (tests/c/test_comm_watchdog.c), NCCL's side is
not."""

from __future__ import annotations

import re

import pytest

from gpu_env import gpu_devices  # noqa: E402
from mpmd_launch import assert_all_passed, run_job  # noqa: E402

GPUS = gpu_devices()
pytestmark = [pytest.mark.skipif(not GPUS, reason="no GPU"),
              pytest.mark.xdist_group("processes")]

# The local model on cuSOLVERMp; "local-kill-first"'s first call runs in the
# leader model (cuSOLVERMg), which publishes every process's pid.
MP = {"JAXMG_ENGINE": "cusolvermp", "JAXMG_TEST_LEADER_ENGINE": "cusolvermg"}
TIMEOUT_S = 30.0


def _needs(nproc: int) -> None:
    if len(GPUS) < nproc:
        pytest.skip(f"needs {nproc} GPUs")
    import jaxmg
    ok, why = jaxmg.cusolvermp_available()
    if not ok:
        pytest.skip(f"cuSOLVERMp not available: {why}")


_NOISE = re.compile(r"^\s*(@ |[EWIF]\d{4} |=== |external/|\*\*\* |Additional GRPC|:UNAVAILABLE|\. This is)")


def _own_lines(out: str) -> str:
    """A process's output less the lines of JAX's coordination-service
    teardown."""
    return "\n".join(ln for ln in out.splitlines() if not _NOISE.match(ln))


def _failed_within(results, i: int, bound_s: float, *says: str) -> str:
    """Process i raised (and nothing else failed) within bound_s, with every
    text of says in its error. Where process i gave no result, the message
    is its output without JAX's coordination-service teardown (glog lines,
    stack frames), whose last lines say nothing of where it waited."""
    assert i in results, _own_lines(results["outputs"][i])[-4000:]
    assert not results[i]["failed"], results[i]["failed"]
    (line,) = results[i]["done"]
    assert line.startswith("raised after "), line
    took = float(line.split("after ")[1].split(" s")[0])
    assert took < bound_s, line
    for text in says:
        assert text in line, (text, line)
    return line


def _fresh_job_works() -> None:
    """The next job on the same GPUs: new processes, new communicators."""
    assert_all_passed(run_job("loop", 2, platform="cuda", timeout_s=120.0, bound_s=300.0,
                              extra_env=MP), 2, expect=4)


def _job(scenario: str, nproc: int, timeout_s: float = TIMEOUT_S):
    return run_job(scenario, nproc, platform="cuda", timeout_s=timeout_s, bound_s=300.0,
                   extra_env=dict(MP, JAXMG_TEST_HANG_S="280"))


@pytest.mark.parametrize("nproc", [2, 3])
def test_gpu_local_a_process_that_raises_before_a_call_and_ends(nproc):
    """The others wait inside the call's first agreement (an NCCL
    all-reduce) when process 1 exits: the watchdog sees its pid gone and
    they fail at once, not after the 30 s timeout."""
    _needs(nproc)
    results = _job("local-raise", nproc)
    assert results[1]["done"] == ["raised: process 1 fails before the call"], results[1]
    for i in [0] + list(range(2, nproc)):
        _failed_within(results, i, 10.0, "jaxmg.potri", "rank 1 (pid", "exited or was killed")
    _fresh_job_works()


@pytest.mark.parametrize("nproc", [2, 3])
def test_gpu_local_a_process_killed_inside_a_call(nproc):
    """Process 1 is killed 1 s into the call while the others wait in it
    (with 3 processes, for process 2, 3 s late; with 2, for process 1
    itself, 3 s late): each fails within seconds naming rank 1 and its pid."""
    _needs(nproc)
    results = _job("local-kill", nproc)
    assert 1 not in results  # killed
    for i in [0] + list(range(2, nproc)):
        _failed_within(results, i, 10.0, "jaxmg.potri", "rank 1 (pid")
    _fresh_job_works()


@pytest.mark.parametrize("nproc", [2, 3])
def test_gpu_local_a_process_killed_before_its_first_call(nproc):
    """Process 1 dies after a call in the leader model (which published
    every pid) and before the first call in the local model: the others'
    communicator set-up (ncclCommInitRank, on a helper thread) is given up
    at once, naming rank 1, instead of waiting for it forever."""
    _needs(nproc)
    results = _job("local-kill-first", nproc)
    assert 1 not in results
    for i in [0] + list(range(2, nproc)):
        _failed_within(results, i, 10.0, "jaxmg.potri", "rank 1 (pid", "exited or was killed")
    _fresh_job_works()


@pytest.mark.parametrize("nproc", [2, 3])
def test_gpu_local_a_process_that_never_arrives(nproc):
    """Process 1 comes JAXMG_RENDEZVOUS_TIMEOUT + 2 s late: the others fail
    after the timeout saying a rank did not arrive; process 1, whose peers
    aborted their communicator, fails soon after it comes: NCCL cannot tell
    it that the others gave up (the CPU communicator does at once), so its
    watchdog reads their quit marks (comm/quit_mark.h), and its first
    agreement compares when the ranks entered the call. The next job
    works."""
    _needs(nproc)
    # T = 5 s (8 s on CPU, tests/python/test_mpmd_local.py): the job waits
    # about 3 T + 12 s after its first call (mpmd_worker.py: the late
    # process comes T + 2 s late; process 0 stays until 2 T + 6 s after its
    # call began, then T + 6 s more for the coordination service), and the
    # test took 44 s at T = 8 on 2 H200 (docs/gpu-runs/2026-11-28-s19,
    # call3). The first call, made together, should stay far from the
    # arrival check (ranks more than T apart fail): both processes reach it
    # after the same start-up, and rank 1's whole first call took 0.9 s on
    # 2 H200 (its trace, 2026-11-28-s19 call1).
    timeout = 5.0
    results = _job("local-absent", nproc, timeout_s=timeout)
    for i in [0] + list(range(2, nproc)):
        _failed_within(results, i, timeout + 5.0, "jaxmg.potri", "did not arrive",
                       "JAXMG_RENDEZVOUS_TIMEOUT")
    _failed_within(results, 1, timeout + 5.0, "jaxmg.potri")
    _fresh_job_works()
