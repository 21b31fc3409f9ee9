"""Memory on one GPU (issue 25): every op with A held as an array and
donated works in A's own buffer, and jaxmg.memory_estimate says beforehand
what the GPU's allocator then reports.

Each case runs in a fresh process (bench/largest.py's child, which also
checks the answer by residuals against A regenerated blockwise) that sees
one GPU alone, so that XLA's peak_bytes_in_use counts that call alone: A
and b generated on the GPU, the call, its outputs and workspaces. The
children spread over the GPUs, one a GPU at a time (run_children, also
test_gpu_syevd_tridiagonal.py's). Skipped without GPUs.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import pathlib
import queue
import subprocess
import sys

import pytest

from gpu_env import cuda_ordinal, gpu_devices

GPUS = gpu_devices()
pytestmark = pytest.mark.skipif(not GPUS, reason="no GPU")

ROOT = pathlib.Path(__file__).resolve().parents[2]
N = 8192

# The most the peak less cuSOLVER's workspace may be, in units of A, with A
# donated: A in place, plus the op's outputs that A's buffer does not hold,
# plus b and x. A copy of A would add 1. On one GPU syevd's V is A's buffer
# (the eigenvectors conjugate-transposed in place; 2.05 before, when V was a
# second matrix; not yet run on a GPU since). (cuSOLVER's own workspace is
# whatever it asks: cusolverDnXsyevd's, eigenvalues only, was 4 A for
# complex64 at N = 8192 on an H200, 2026-11-25.)
PEAK_OVER_A = {"potrs": 1.05, "lu_solve": 1.05, "potri": 1.05, "syevd": 1.05,
               "syevd_values": 1.05}


# A case: (op, dtype, N, rows of A or None, environment): the environment's
# (name, value) pairs are set in the child, a value None removing the name.
Case = tuple[str, str, int, int | None, tuple[tuple[str, str | None], ...]]


def _run_child(case: Case, gpu: str | None = None) -> dict | str:
    """One case in a fresh process (on the GPU whose CUDA_VISIBLE_DEVICES
    entry is ``gpu``, alone; where None, the first this process sees): its
    LARGEST record, or what it printed where it gave none."""
    op, dtype, n, rows, extra = case
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    for name, value in extra:
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "largest.py"), "--one", str(n), "--op", op,
         "--lib", "jaxmg", "--dtype", dtype, "--gpus", "1"]
        + (["--rows", str(rows)] if rows else []),
        capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("LARGEST ")]
    if not lines:
        return out.stdout[-2000:] + out.stderr[-3000:]
    return json.loads(lines[-1][len("LARGEST "):])


# Children per GPU at once (JAXMG_TEST_CHILDREN, default 1). Each child sees
# one GPU alone, and the children spread over this process's GPUs: on 2 GPUs
# two run at once, each with a GPU to itself (one after the other, the 16
# took 85-90 s of a device call on an H200: docs/gpu-runs/2026-11-27-s18
# call1, 2026-11-28-s19 call3).
# Each process's peak is its own allocator's, so sharing a GPU changes no
# figure; more than one a GPU is not the default until a run shows that
# jaxmg processes sharing a GPU do not stall (two did there, in other tests,
# not diagnosed).
CHILDREN = max(1, int(os.environ.get("JAXMG_TEST_CHILDREN", "1") or "1"))


def run_children(cases: list[Case]) -> dict[Case, dict | str]:
    """Every case in a fresh process of its own, CHILDREN at a time on each
    of this process's GPUs (in the order given: the longest first spreads
    them best); each case's record."""
    slots: queue.Queue[str | None] = queue.Queue()
    for gpu in [cuda_ordinal(d) for d in GPUS] or [None]:
        for _ in range(CHILDREN):
            slots.put(gpu)

    def one(case: Case) -> dict | str:
        gpu = slots.get()
        try:
            return _run_child(case, gpu)
        finally:
            slots.put(gpu)

    with concurrent.futures.ThreadPoolExecutor(slots.qsize()) as pool:
        return dict(zip(cases, pool.map(one, cases)))


# Every case of this file, run when the first test asks; the two potri
# cases of N = 46,400 (8 and 16 GiB) first, the longest.
_CASES: list[Case] = (
    [("potri", dtype, 46400, None, ()) for dtype in ("float32", "complex64")]
    + [(op, dtype, N, None, ()) for op in sorted(PEAK_OVER_A) for dtype in ("float64", "complex64")]
    + [("qr", dtype, N, m, ()) for dtype in ("float64", "complex64") for m in (N, 4 * N)])
_results: dict[Case, dict | str] = {}


def _child(op: str, dtype: str, n: int, rows: int | None = None) -> dict:
    key: Case = (op, dtype, n, rows, ())
    if not _results:
        _results.update(run_children(_CASES))
    r = _results[key] if key in _results else _run_child(key)
    assert isinstance(r, dict), r
    return r


@pytest.mark.parametrize("dtype", ["float64", "complex64"])
@pytest.mark.parametrize("op", sorted(PEAK_OVER_A))
def test_donated_call_peak_is_a_and_the_estimate_knows_it(op, dtype):
    r = _child(op, dtype, N)
    print(json.dumps(r))
    assert r["status"] == "ok", r
    peak = r["peak_bytes_in_use"][0]
    a_bytes = r["matrix_bytes_per_gpu"]
    assert r["estimate_workspace"] is not None, r
    beside = peak - r["estimate_workspace"]
    assert beside <= PEAK_OVER_A[op] * a_bytes, (beside / a_bytes, r)
    assert abs(r["estimate_peak"] - peak) <= 0.1 * peak, (r["estimate_peak"], peak, r)


@pytest.mark.parametrize("dtype", ["float32", "complex64"])
def test_potri_past_the_32_bit_routine(dtype):
    """N = 46,400: N*N passes INT_MAX, where cusolverDn<t>potri fails; the
    engine's 64-bit path (Xtrtri and a blocked LAUUM) inverts in place:
    sampled columns of A A^-1 - I, and the peak beside the workspace A."""
    r = _child("potri", dtype, 46400)
    print(json.dumps(r))
    assert r["status"] == "ok", r
    beside = r["peak_bytes_in_use"][0] - r["estimate_workspace"]
    assert beside <= 1.05 * r["matrix_bytes_per_gpu"], r


@pytest.mark.parametrize("dtype", ["float64", "complex64"])
@pytest.mark.parametrize("m,n", [(N, N), (4 * N, N)], ids=["square", "tall"])
def test_qr_estimate_knows_the_workspace_of_an_m_x_n_a(m, n, dtype):
    """qr on cuSOLVERDn, A (M x N) donated: Q takes A's buffer, R (N x N)
    is new, and the engine's workspace (geqrf's and orgqr's, and the
    transposed copy of A it works on) is what memory_estimate asked of
    cuSOLVER for this M and N: the peak beside it is A and R, and the
    estimate is the peak. (The check is A Y against Q (R Y) and Q's sampled
    columns orthonormal, bench/largest.py.)"""
    r = _child("qr", dtype, n, rows=m)
    print(json.dumps(r))
    assert r["status"] == "ok", r
    assert r["engine"] == "cusolverdn", r
    peak = r["peak_bytes_in_use"][0]
    a_bytes = r["matrix_bytes_per_gpu"]
    assert r["estimate_workspace"] is not None, r
    assert r["estimate_workspace"] >= a_bytes, r  # the copy of A is in it
    beside = peak - r["estimate_workspace"]
    assert beside <= (1.05 + n / m) * a_bytes, (beside / a_bytes, r)
    assert abs(r["estimate_peak"] - peak) <= 0.1 * peak, (r["estimate_peak"], peak, r)
