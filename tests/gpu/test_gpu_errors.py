"""GPU calls under a capped allocator: real failures, not injected ones.

Each test runs a child process whose XLA allocator is capped at a few GiB per
GPU (XLA_PYTHON_CLIENT_MEM_FRACTION), on a matrix whose shard takes a chosen
share of the cap:

* 60%, potri: its second shard-sized buffer (XLA_FFI_DeviceMemory_Allocate)
  is refused; one Python exception naming potri reaches every participant, no
  hang, and the next calls in the process are right;
* 60%, potrs: no scratch shard for the out-of-place permutation fits, so the
  leader permutes in place and solves;
* 35%, potri with the out-of-place permutation forced: the scratch fits, then
  potri's second shard does not; the leader frees the scratch and runs the
  solver again, which succeeds.

Skipped without GPUs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

jax = pytest.importorskip("jax")


from gpu_env import gpu_devices  # noqa: E402

GPUS = gpu_devices()
pytestmark = pytest.mark.skipif(not GPUS, reason="no GPU")

# Run in a child: the allocator cap must be set before JAX starts. The
# prelude is shared: the mesh, the cap, N for a shard of SHARE of the cap, and
# A, built elementwise on the devices in one N x N buffer (diagonally dominant,
# so SPD), whose rows the host can also regenerate block by block.
_PRELUDE = textwrap.dedent(
    """
    import jax, sys
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import jaxmg

    gpus = jax.devices("gpu")
    mesh = Mesh(np.array(gpus), ("x",))
    rows = NamedSharding(mesh, P("x", None))
    limit = min(d.memory_stats()["bytes_limit"] for d in gpus)
    n = int((SHARE * limit * len(gpus) / 8) ** 0.5)
    n -= n % (256 * len(gpus))
    print(f"cap {limit / 2**30:.2f} GiB per GPU, N={n}", flush=True)

    def make(n):
        i = jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
        j = jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
        off = 1.0 / (1.0 + jnp.abs(i - j).astype(jnp.float64))
        return jnp.where(i == j, 2.0 * n, off)

    def host_residual(x, rhs):
        # ||A x - rhs(i)|| / (||A|| ||x||) on the host (under the cap the GPUs
        # cannot hold A beside any temporary of its size), i the rows' indices
        # as a column. A is 2n I plus the symmetric Toeplitz matrix
        # 1 / (1 + |i - j|) off the diagonal: A x = (2n - 1) x + T x, T's
        # first column 1 / (1 + k), by FFT; ||A||_F^2 by its diagonals. (The
        # same number from A's rows regenerated 1024 at a time took 8-10 s
        # at N = 22016, the most of these children's time.)
        import scipy.linalg

        x2 = np.asarray(x, np.float64).reshape(n, -1)
        i = np.arange(n)[:, None]
        t = scipy.linalg.matmul_toeplitz(1.0 / (1.0 + np.arange(n)), x2, check_finite=False)
        r = (2.0 * n - 1.0) * x2 + t - np.broadcast_to(rhs(i), x2.shape)
        k = np.arange(1, n)
        a2 = n * (2.0 * n) ** 2 + 2.0 * float(np.sum((n - k) / (1.0 + k) ** 2))
        return float(np.linalg.norm(r)) / (a2 ** 0.5 * float(np.linalg.norm(x2)))
    """
)



def _child(share: float, body: str) -> str:
    return _PRELUDE.replace("SHARE", repr(share)) + textwrap.dedent(body)


def _run_capped(child: str, **env: str) -> subprocess.CompletedProcess:
    """Runs child with XLA's allocator capped at 3% of each GPU (about 4 GiB
    of an H200), no preallocation, a short rendezvous timeout and env."""
    full = dict(os.environ)
    full.pop("JAXMG_PERMUTE", None)
    full.update(XLA_PYTHON_CLIENT_PREALLOCATE="false", XLA_PYTHON_CLIENT_MEM_FRACTION="0.03",
                JAXMG_RENDEZVOUS_TIMEOUT="60", **env)
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=300, env=full)
    print(out.stdout)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    return out


def _traces(out: subprocess.CompletedProcess, op: str) -> list[str]:
    return [line for line in out.stderr.splitlines() if line.startswith(f"jaxmg trace {op}")]


# The shard takes 60% of the cap: A fits, A plus potri's second buffer not.
_CHILD_POTRI_REFUSED = _child(0.6, """
    a = jax.jit(make, static_argnums=0, out_shardings=rows)(n)
    inv = jax.jit(lambda a: jaxmg.potri(a, 256, mesh, (P("x", None),)),
                  donate_argnums=0)
    try:
        inv(a).block_until_ready()
    except Exception as e:  # XlaRuntimeError: the type is jaxlib's
        print("RAISED:", type(e).__name__, str(e).replace("\\n", " ")[:600], flush=True)
    else:
        print("NO ERROR", flush=True)
        sys.exit(3)

    # The next calls work, on every device.
    m = 512 * len(gpus)
    rng = np.random.default_rng(0)
    r = rng.standard_normal((m, m))
    small = jax.device_put(r @ r.T / m + np.eye(m), rows)
    b = jnp.asarray(rng.standard_normal((m, 2)))
    x, s = jaxmg.potrs(small, b, 128, mesh, (P("x", None), P(None, None)),
                       return_status=True)
    res = float(jnp.linalg.norm(small @ x - b) / (jnp.linalg.norm(small) * jnp.linalg.norm(x)))
    ainv = jaxmg.potri(small, 128, mesh, (P("x", None),))
    eye_err = float(jnp.linalg.norm(small @ ainv - jnp.eye(m)) / m)
    print(f"AFTER: status {int(s)} residual {res:.2e} inverse error {eye_err:.2e}", flush=True)
    sys.exit(0 if int(s) == 0 and res < 1e-13 and eye_err < 1e-12 else 4)
    """)


def test_allocator_refusal_is_an_exception_and_the_next_call_works():
    # On one GPU the default engine (cuSOLVERDn) inverts in place with a small
    # workspace and needs no second buffer: the refusal is cuSOLVERMg's, whose
    # potri takes a second shard, so ask for it there.
    one_gpu = {"JAXMG_ENGINE": "cusolvermg"} if len(GPUS) == 1 else {}
    out = _run_capped(_CHILD_POTRI_REFUSED, **one_gpu)
    raised = next(line for line in out.stdout.splitlines() if line.startswith("RAISED:"))
    # The op and the cause are named; one exception for the whole call means
    # every participant returned (a participant left waiting would hang the
    # program until the rendezvous timeout, then raise a timeout instead).
    assert "potri" in raised, raised
    assert "timed out" not in raised and "timeout" not in raised.lower(), raised
    assert "AFTER: status 0" in out.stdout, out.stdout


# potrs of a matrix whose shard takes 60% of the cap: no scratch shard fits
# beside it, so the leader permutes in place (JAXMG_TRACE shows which) and
# solves. A is made inside the solve's program: a donated argument would
# still be copied (XLA keeps donated buffers for the program's outputs only).
_CHILD_IN_PLACE = _child(0.6, """
    solve = jax.jit(lambda b: jaxmg.potrs(
        jax.lax.with_sharding_constraint(make(n), rows), b, 256, mesh,
        (P("x", None), P(None, None)), return_status=True))
    x, s = solve(jnp.ones((n, 1)))
    res = host_residual(np.asarray(x)[:, 0], lambda i: 1.0)
    print(f"SOLVED: status {int(s)} residual {res:.2e}", flush=True)
    sys.exit(0 if int(s) == 0 and res < 1e-14 else 4)
    """)


@pytest.mark.skipif(len(GPUS) < 2, reason="needs 2 GPUs (one GPU never permutes)")
def test_no_memory_for_scratch_permutes_in_place():
    out = _run_capped(_CHILD_IN_PLACE, JAXMG_TRACE="1")
    assert "SOLVED: status 0" in out.stdout, out.stdout
    traces = _traces(out, "potrs")
    assert traces and all("permute in place" in t for t in traces), out.stderr[-3000:]


# potri of a matrix whose shard takes 35% of the cap, the out-of-place
# permutation forced (jaxmg would not try it at 35%: _ffi_call.scratch_fits):
# its scratch shard fits (70%), but then potri's own second shard does not
# (105%). The solver fails for want of memory before writing anything; the
# leader moves A home, frees the scratch, and calls it again, which fits.
_CHILD_RETRY = _child(0.35, """
    inv = jax.jit(lambda: jaxmg.potri(jax.lax.with_sharding_constraint(make(n), rows), 256,
                                      mesh, (P("x", None),), return_status=True))
    x, s = inv()
    idx = np.random.default_rng(1).choice(n, 8, replace=False)
    res = host_residual(np.asarray(x[:, idx]), lambda i: i == idx)
    print(f"INVERTED: status {int(s)} residual {res:.2e}", flush=True)
    sys.exit(0 if int(s) == 0 and res < 10 * 2.2e-16 * n ** 0.5 else 4)
    """)


@pytest.mark.skipif(len(GPUS) < 2, reason="needs 2 GPUs (one GPU never permutes)")
def test_solver_short_of_memory_runs_again_without_the_scratch():
    # cuSOLVERMg's path (the permutation's scratch): at this size a group of
    # GPUs would otherwise gather onto one (engine/gather/thresholds.c).
    out = _run_capped(_CHILD_RETRY, JAXMG_TRACE="1", JAXMG_PERMUTE="apart",
                      JAXMG_ENGINE="cusolvermg")
    assert "INVERTED: status 0" in out.stdout, out.stdout
    traces = _traces(out, "potri")
    assert traces and "scratch freed for the solver" in traces[-1], out.stderr[-3000:]
