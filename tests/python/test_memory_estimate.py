"""jaxmg.memory_estimate (issue 25): what a call would take on each device,
asked before running it, on 4 CPU devices. XLA's part is XLA's own buffer
assignment of the program the call runs; on CPU devices the LAPACK engine
tells its workspace ahead of a call for potrs and lu_solve only (the
gathered A; with precision="mixed" its float32 copy and the refinement's
vectors too: test_mixed_precision.py), not for the other ops (the GPU test,
tests/gpu/test_gpu_memory.py, checks cuSOLVERDn's against the GPU's peak)."""

import re

import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import jaxmg
import jaxmg_testing as jt

N = 64


def _shard(dtype) -> int:
    return N * N // 4 * np.dtype(dtype).itemsize


@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=["f32", "c128"])
@pytest.mark.parametrize("op", ["potrs", "lu_solve", "potri", "syevd", "gesvd", "qr",
                                "least_squares"])
def test_donated_estimate_has_a_in_place(mesh, op, dtype):
    e = jaxmg.memory_estimate(op, (N, N), dtype, mesh, nrhs=3)
    assert isinstance(e, jaxmg.MemoryEstimate)
    assert (e.op, e.engine, e.T_A, e.padded, e.donated) == (op, "lapack", N // 4, False, True)
    b = N * 3 * np.dtype(dtype).itemsize if op in ("potrs", "lu_solve", "least_squares") else 0
    assert e.arguments == _shard(dtype) + b
    assert e.aliased >= _shard(dtype)  # A's buffer is an output's: the solver's
    if not (op == "syevd" and jt.is_complex(dtype)) and op != "least_squares":
        # No copy of A beside it. (XLA:CPU writes a complex V = conj(U)^T in
        # a transposed layout and copies it once more: a temporary of V's
        # size, not A's; test_donation.py checks that the solver takes A's
        # buffer itself. least_squares holds R, N x N, whole on every
        # device: test_tall_qr_and_least_squares_estimates checks it on a
        # tall A, where R is small.)
        assert e.temporaries < _shard(dtype)
    if op in ("potrs", "lu_solve"):  # the gathered A (and LU's pivots), N x N on the host
        pivots = N * 4 if op == "lu_solve" else 0
        assert e.workspace == N * N * np.dtype(dtype).itemsize + pivots
        assert e.peak == e.xla_bytes + e.workspace
    else:
        assert e.workspace is None and e.peak is None
    assert "lapack" in e.workspace_note or op in e.workspace_note
    assert e.xla_bytes == e.arguments + e.outputs - e.aliased + e.temporaries


@pytest.mark.parametrize("op", ["potrs", "lu_solve", "syevd"])
def test_kept_a_is_copied(mesh, op):
    """Without donation A is kept: the solver works on a temporary copy."""
    e = jaxmg.memory_estimate(op, (N, N), np.float64, mesh, donate=False)
    assert e.aliased == 0
    assert e.temporaries >= _shard(np.float64)


def test_tall_qr_and_least_squares_estimates(mesh):
    """An M x N A (M >= N): A's shard in place; least_squares's b has M rows;
    N need not divide into the devices for least_squares (its R stays inside)."""
    e = jaxmg.memory_estimate("qr", (2 * N, N), np.float64, mesh)
    assert e.arguments == 2 * _shard(np.float64) and e.aliased >= 2 * _shard(np.float64)
    e = jaxmg.memory_estimate("least_squares", (4 * N, 16), np.float64, mesh, nrhs=2)
    a_shard = 4 * N * 16 * 8 // 4
    assert e.arguments == a_shard + 4 * N * 2 * 8 and e.aliased >= a_shard
    assert e.temporaries < a_shard  # no copy of A (R is 16 x 16)
    e = jaxmg.memory_estimate("least_squares", (2 * N, 3), np.float64, mesh)
    assert e.engine == "lapack"  # N = 3 on 4 devices: R stays inside the call
    with pytest.raises(ValueError, match="R has N=3 rows, not divisible"):
        jaxmg.memory_estimate("qr", (2 * N, 3), np.float64, mesh)
    with pytest.raises(ValueError, match="wider than tall"):
        jaxmg.memory_estimate("qr", (N, 2 * N), np.float64, mesh)


def test_padded_call_says_so(mesh):
    e = jaxmg.memory_estimate("syevd", (N, N), np.float64, mesh, T_A=5)
    assert e.padded and e.T_A == 5
    assert e.temporaries >= _shard(np.float64)  # the padded copy


def test_estimate_names_what_the_call_runs(mesh, rng, capfd, monkeypatch):
    """The engine and T_A of the estimate are the call's, as its trace says."""
    e = jaxmg.memory_estimate("potrs", (N, N), np.float64, mesh, in_specs=(P("x", None),))
    monkeypatch.setenv("JAXMG_TRACE", "1")
    a = jt.make_hpd(rng, N, np.float64)
    jaxmg.potrs(jt.shard_rows(a, mesh), jt.make_rhs(rng, N, 1, np.float64)).block_until_ready()
    err = capfd.readouterr().err
    line = [ln for ln in err.splitlines() if ln.startswith("jaxmg trace potrs")]
    assert len(line) == 1, err
    assert f"T_A={e.T_A} " in line[0] and f"engine {e.engine}," in line[0], line[0]
    # The trace's workspace: what the call asked the allocator for.
    assert re.search(r", workspace \d+ bytes \(\d+\.\d MiB\) in \d+ allocations?$", line[0])


def test_misuse_is_refused_before_anything(mesh):
    with pytest.raises(ValueError, match="op must be one of"):
        jaxmg.memory_estimate("getrf", (N, N), np.float64, mesh)
    with pytest.raises(TypeError, match="dtype must be"):
        jaxmg.memory_estimate("potrs", (N, N), np.int32, mesh)
    with pytest.raises(ValueError, match="square"):
        jaxmg.memory_estimate("potrs", (N, N // 2), np.float64, mesh)
    with pytest.raises(ValueError, match="shape must be"):
        jaxmg.memory_estimate("potrs", (N,), np.float64, mesh)
    with pytest.raises(ValueError):
        jaxmg.memory_estimate("potrs", (N + 1, N + 1), np.float64, mesh)  # not divisible


def test_one_device_syevd_estimate_has_v_in_a(one_device_mesh):
    """On one device V is A's buffer (the C library transposes it in place):
    donated, XLA's part is A and the eigenvalues, no second N x N buffer."""
    e = jaxmg.memory_estimate("syevd", (N, N), np.float64, one_device_mesh)
    a = N * N * 8
    assert (e.engine, e.T_A, e.padded, e.donated) == ("lapack", N, False, True)
    assert e.arguments == a and e.aliased == a
    assert e.xla_bytes < 2 * a, e
