"""cusolverdn-local on GPUs: the local model's one-GPU path (rank 0 gathers
A over NCCL, cuSOLVERDn runs there, the results go back), with one process
per GPU (jax.distributed, ``local_device_ids=[i]``), launched as
test_gpu_mpmd.py and test_gpu_cusolvermp.py launch theirs
(tests/python/mpmd_launch.py, tests/python/mpmd_worker.py).

- Named (``JAXMG_ENGINE=cusolverdn-local``): every case the CPU local model
  runs through lapack-local (tests/python/mpmd_local.py: every op and dtype
  against float64/complex128 NumPy references, eigenvectors by residual
  and orthogonality, the 1 x P line and the r x c grids, padded and not, a
  failure on the last rank's rows, jit/grad/vmap, the ctx forms, qr and
  polar).
- Chosen by default: every process says it is on a node of its own, so
  that the job's groups span "nodes" and the local model is the default;
  at small N the choice is cusolverdn-local, and every op is checked
  (mpmd_local.default_cases). With cuSOLVERMp installed, syevd and
  eigh_generalized under ``JAXMG_ENGINE=cusolvermp`` at small N (2, 8
  and 64 rows a GPU), which run on rank 0's gathered copy.

Skipped without GPUs (conftest) and below the GPUs a test needs."""

from __future__ import annotations

import os

import pytest

jax = pytest.importorskip("jax")

from mpmd_launch import assert_all_passed, report_outputs, run_job  # noqa: E402

from gpu_env import gpu_devices  # noqa: E402

GPUS = gpu_devices()
pytestmark = pytest.mark.skipif(not GPUS, reason="no GPU")

import jaxmg  # noqa: E402

HAS_MP = bool(GPUS) and jaxmg.cusolvermp_available()[0]


def _env(**extra: str) -> dict[str, str]:
    # The default choice of cusolverdn-local and cuSOLVERMp's eigensolvers
    # routed to it (on by default since these tests passed on 2 H200, 11-27;
    # JAXMG_LOCAL_GATHER=0 turns it off): a JAXMG_LOCAL_GATHER of the
    # caller's is not passed on.
    env = {"JAXMG_TEST_HANG_S": "200", "NCCL_DEBUG": os.environ.get("NCCL_DEBUG", "WARN"),
           "JAXMG_LOCAL_GATHER": ""}
    env.update(extra)
    return env


@pytest.mark.parametrize("nproc", [2, 4])
def test_one_process_per_gpu_runs_the_local_model_cases_on_cusolverdn_local(gpus, nproc):
    if len(gpus) < nproc:
        pytest.skip(f"needs {nproc} GPUs")
    import mpmd_local

    expect = len(mpmd_local.cases(nproc))
    results = run_job("local", nproc, platform="cuda", timeout_s=120.0, bound_s=220.0,
                      extra_env=_env(JAXMG_ENGINE="cusolverdn-local"))
    report_outputs(results, nproc, expect=expect)
    assert_all_passed(results, nproc, expect=expect)


@pytest.mark.parametrize("nproc", [2])
def test_local_model_default_runs_small_problems_on_one_gpu(gpus, nproc):
    if len(gpus) < nproc:
        pytest.skip(f"needs {nproc} GPUs")
    import mpmd_local

    extra = {"JAXMG_ENGINE": ""}
    if not HAS_MP:
        extra["JAXMG_TEST_NO_CUSOLVERMP"] = "1"
    os.environ.pop("JAXMG_TEST_NO_CUSOLVERMP", None)
    if not HAS_MP:
        os.environ["JAXMG_TEST_NO_CUSOLVERMP"] = "1"
    try:
        expect = len(mpmd_local.default_cases(nproc))
    finally:
        os.environ.pop("JAXMG_TEST_NO_CUSOLVERMP", None)
    results = run_job("local-default", nproc, platform="cuda", timeout_s=120.0, bound_s=220.0,
                      extra_env=_env(**extra))
    report_outputs(results, nproc, expect=expect)
    assert_all_passed(results, nproc, expect=expect)
