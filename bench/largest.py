"""The largest problem: the largest N that jaxmg solves with A held as an
array and donated, beside the largest N that JAX's own routine solves on the
same devices, and the N that A alone allows, for every op.

    python bench/run.py --largest [--ops potrs,lu_solve,potri,syevd,syevd_values,gesvd]
                                  [--dtypes float64,float32] [--libs jaxmg,jax]
                                  [--n 65536,61440] [--tile T_A] [--gpus 4]
                                  [--mem-fraction 0.96] [--max-tries 6] [--budget-s 500]
                                  [--out DIR]

Each (op, dtype, library) is searched from large to small: each N is tried in
a fresh process (a failed allocation leaves nothing behind, and XLA's
peak-memory counter starts at zero) until one succeeds. A failure is cheap
(it fails at allocation, before any work), a success costs the solve: the
candidates start near what the op's memory allows and step down. Without
--n they are fractions of "A alone", the N whose matrix takes the devices'
XLA memory limit (--mem-fraction of each), rounded down to a multiple of
GPUs x 1024 (jaxmg: GPUs x T_A, so that nothing is padded, which would copy
A): the fractions (``FRACTIONS``) are where each op's outputs and the
library's copies put its limit (jaxmg: A in place and a workspace; syevd A
and V, 1/sqrt(2) of A alone; gesvd A, U and Vh; JAX: a copy of A beside
A). --budget-s stops starting new tries when spent. For jaxmg the search starts
instead at the largest N whose jaxmg.memory_estimate fits the limit (a
bisection over estimates in a child: compiles, no allocation) and steps
down from there.

What is run. A is generated on the devices as a concrete array, rows
sharded (inputs.py: one fused kernel per device, no temporaries; Hermitian
positive definite for potrs, potri and syevd, general for lu_solve and
gesvd), b replicated. jaxmg: the plain form with ``donate=True``, eagerly,
as a user holding A calls it. JAX: its routine in a ``jax.jit`` that donates
A (``cho_factor``+``cho_solve``, ``jnp.linalg.solve``, ``jnp.linalg.inv``,
``jnp.linalg.eigh``, ``eigvalsh``, ``svd``), on one device only (JAX has no
distributed solver: with several GPUs its column is one GPU's).

Check. A is regenerated block by block of rows (never whole) after the
solve, Y a few of the result's columns, and A Y computed in float64:
solves: ||A x - b|| / (||A||_F ||x||); potri: ||A X_J - I_J|| / (||A||_F
||X_J||) for 8 random columns J; syevd: ||A V_J - V_J w_J|| / ||A||_F and
||V_J^H V_J - I|| for 8 random eigenpairs; eigenvalues only: sum(w) against
trace(A) and sum(w^2) against ||A||_F^2; gesvd: ||A V_J - U_J s_J|| /
||A||_F for 8 random triplets and sum(s^2) against ||A||_F^2. Every check
against cases.tolerance. It proves that these outputs are right for this
A, and samples (not all) of the vectors.

Memory: XLA's peak_bytes_in_use per device (jaxmg's workspaces come from
XLA's allocator, so it counts them), jaxmg.memory_estimate's peak for the
same call (jaxmg only), and nvidia-smi's largest memory.used.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import subprocess
import sys
import threading
import time
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

MARK = "LARGEST "  # the line a child's result is printed on

OPS = ("potrs", "lu_solve", "potri", "syevd", "syevd_values", "gesvd")
# Candidate N as fractions of "A alone", largest first, by library and op.
FRACTIONS = {
    "jaxmg": {"potrs": (0.97, 0.94, 0.91, 0.87, 0.82, 0.75),
              "lu_solve": (0.97, 0.94, 0.91, 0.87, 0.82, 0.75),
              "potri": (0.97, 0.94, 0.91, 0.87, 0.82, 0.75),
              "syevd": (0.68, 0.65, 0.62, 0.58, 0.54, 0.5),
              "syevd_values": (0.95, 0.91, 0.87, 0.82, 0.76, 0.7),
              "gesvd": (0.56, 0.53, 0.5, 0.46, 0.42, 0.38)},
    "jax": {"potrs": (0.7, 0.66, 0.62, 0.57, 0.52, 0.46),
            "lu_solve": (0.7, 0.66, 0.62, 0.57, 0.52, 0.46),
            "potri": (0.6, 0.56, 0.52, 0.48, 0.44, 0.4),
            "syevd": (0.48, 0.44, 0.4, 0.36, 0.32, 0.28),
            "syevd_values": (0.6, 0.55, 0.5, 0.45, 0.4, 0.35),
            "gesvd": (0.5, 0.46, 0.42, 0.38, 0.34, 0.3)},
}
JAX_ROUTINE = {"potrs": "cho_factor+cho_solve", "lu_solve": "jnp.linalg.solve",
               "potri": "jnp.linalg.inv", "syevd": "jnp.linalg.eigh",
               "syevd_values": "jnp.linalg.eigvalsh", "gesvd": "jnp.linalg.svd"}


def _csv(kind: Any) -> Any:
    return lambda s: [kind(x) for x in s.split(",") if x]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="run.py --largest", description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", type=_csv(str), default=["potrs"])
    p.add_argument("--dtypes", type=_csv(str), default=None)
    p.add_argument("--dtype", default="float32", help="one dtype (--dtypes takes several)")
    p.add_argument("--libs", type=_csv(str), default=["jaxmg"])
    p.add_argument("--n", type=_csv(int), help="candidate N, tried from large to small")
    p.add_argument("--tile", type=int, default=None, help="jaxmg's T_A (default: its choice)")
    p.add_argument("--gpus", type=int, default=0, help="devices to use (default: all)")
    p.add_argument("--platform", default="gpu", choices=["gpu", "cpu"])
    p.add_argument("--mem-fraction", type=float, default=0.96,
                   help="XLA_PYTHON_CLIENT_MEM_FRACTION for the tries")
    p.add_argument("--preallocate", action="store_true",
                   help="XLA_PYTHON_CLIENT_PREALLOCATE=true for the tries (JAX's default: "
                   "one region of --mem-fraction taken at the start, so that a large "
                   "workspace is not refused for want of one contiguous free block "
                   "among the regions a growing pool has made)")
    p.add_argument("--max-tries", type=int, default=6)
    p.add_argument("--budget-s", type=float, default=0.0,
                   help="start no try after this many seconds (0: no limit)")
    p.add_argument("--child-timeout", type=float, default=480.0,
                   help="seconds one try may take")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=pathlib.Path, default=HERE / "results" / "largest")
    # A child's: try this op, library and N (--dtype then names its dtype).
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)
    p.add_argument("--op", default="potrs", help=argparse.SUPPRESS)
    # qr's child only (tests/gpu/test_gpu_memory.py): A's rows M (default N).
    p.add_argument("--rows", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--lib", default="jaxmg", help=argparse.SUPPRESS)
    p.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--plan", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.dtypes = args.dtypes or [args.dtype]
    for op in args.ops:
        if op not in OPS:
            p.error(f"unknown op {op!r}: one of {', '.join(OPS)}")
    for lib in args.libs:
        if lib not in FRACTIONS:
            p.error(f"unknown library {lib!r}: jaxmg or jax")
    return args


# ---- the child: one N ---------------------------------------------------------


def _setup_jax(args: argparse.Namespace) -> tuple[Any, list]:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # a child: the parent's
    if args.platform == "cpu":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_force_host_platform_device_count" not in flags:
            n = max(args.gpus, 4)
            os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()
    import jax

    jax.config.update("jax_enable_x64", True)
    devices = jax.devices(args.platform)
    return jax, devices[:args.gpus] if args.gpus else devices


class SmiPoller:
    """The largest memory.used nvidia-smi reports per GPU while running."""

    def __init__(self, period: float = 0.5) -> None:
        self.peak: dict[int, int] = {}
        self.total: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(period,), daemon=True)

    def _poll(self) -> bool:
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=index,memory.used,memory.total",
                 "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return False
        for line in out.stdout.splitlines():
            parts = [x.strip() for x in line.split(",")]
            if len(parts) == 3 and all(x.isdigit() for x in parts):
                i, used, total = map(int, parts)
                self.peak[i] = max(self.peak.get(i, 0), used)
                self.total[i] = total
        return out.returncode == 0

    def _run(self, period: float) -> None:
        while not self._stop.is_set() and self._poll():
            self._stop.wait(period)

    def __enter__(self) -> "SmiPoller":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=15)


def _general(op: str) -> bool:
    return op in ("lu_solve", "gesvd", "qr")


def _apply(jax: Any, op: str, n: int, dtype: str, mesh: Any, seed: Any,
           y: Any, m: int | None = None) -> tuple[Any, float]:
    """(A Y in float64/complex128, ||A||_F^2), A (m x n, m = n unless
    given) regenerated by blocks of rows on every device (never whole), Y
    (N x k) replicated."""
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    import inputs

    wide = jnp.complex128 if dtype.startswith("complex") else jnp.float64
    entries = inputs.general_entries if _general(op) else inputs.entries
    r = (m or n) // mesh.size
    block = math.gcd(r, 1024)

    def shard(seed, y):
        first = jax.lax.axis_index(inputs.AXIS) * r
        yw = y.astype(wide)

        def body(k, acc):
            out, fro = acc
            start = first + k * block
            rows = (jax.lax.broadcasted_iota(jnp.uint32, (block, n), 0)
                    + start.astype(jnp.uint32))
            cols = jax.lax.broadcasted_iota(jnp.uint32, (block, n), 1)
            a = entries(rows, cols, n, dtype, seed).astype(wide)
            ay = jnp.matmul(a, yw, precision=jax.lax.Precision.HIGHEST)
            out = jax.lax.dynamic_update_slice_in_dim(out, ay, k * block, axis=0)
            return out, fro + jnp.sum(jnp.abs(a) ** 2)

        zero = first.astype(jnp.float64) * 0  # typed as varying over the mesh axis
        out0 = jnp.zeros((r, y.shape[1]), wide) + zero.astype(wide)
        out, fro = jax.lax.fori_loop(0, r // block, body, (out0, zero))
        return out, jax.lax.psum(fro, inputs.AXIS)

    f = jax.jit(inputs._shard_map(shard, mesh=mesh, in_specs=(P(), P()),
                                  out_specs=(P(inputs.AXIS, None), P())))
    ay, fro2 = f(seed, y)
    return ay, float(fro2)


def _columns(rng: Any, n: int, k: int = 8) -> Any:
    return sorted(rng.choice(n, size=min(k, n), replace=False).tolist())


def _check(jax: Any, op: str, n: int, dtype: str, mesh: Any, seed: Any, out: tuple,
           b: Any, m: int | None = None) -> dict[str, float]:
    """The op's residuals (module docstring), each a relative number."""
    import jax.numpy as jnp
    import numpy as np

    import inputs

    rng = np.random.default_rng(n)
    wide = np.complex128 if dtype.startswith("complex") else np.float64
    if op in ("potrs", "lu_solve"):
        (x,) = out
        ay, fro2 = _apply(jax, op, n, dtype, mesh, seed, x)
        res = np.linalg.norm(np.asarray(ay) - np.asarray(b).astype(wide))
        return {"residual": float(res / (math.sqrt(fro2) * np.linalg.norm(np.asarray(x))))}
    if op == "potri":
        (inv,) = out
        j = _columns(rng, n)
        xj = jnp.asarray(inv[:, j])
        ay, fro2 = _apply(jax, op, n, dtype, mesh, seed, xj)
        eye = np.zeros((n, len(j)), wide)
        eye[j, range(len(j))] = 1
        res = np.linalg.norm(np.asarray(ay) - eye)
        return {"residual": float(res / (math.sqrt(fro2) * np.linalg.norm(np.asarray(xj))))}
    if op == "syevd":
        w, v = out
        j = _columns(rng, n)
        vj = np.asarray(v[:, j]).astype(wide)
        ay, fro2 = _apply(jax, op, n, dtype, mesh, seed, jnp.asarray(v[:, j]))
        wj = np.asarray(w)[j]
        res = np.linalg.norm(np.asarray(ay) - vj * wj[None, :]) / math.sqrt(fro2)
        orth = np.linalg.norm(vj.conj().T @ vj - np.eye(len(j)))
        return {"residual": float(res), "orthogonality": float(orth)}
    if op == "syevd_values":
        (w,) = out
        w = np.asarray(w).astype(np.float64)
        _, fro2 = _apply(jax, op, n, dtype, mesh, seed, jnp.zeros((n, 1), dtype))
        trace = n * inputs.shift(n, dtype)
        return {"residual": float(abs(w.sum() - trace) / math.sqrt(fro2) / math.sqrt(n)),
                "frobenius": float(abs(np.sum(w ** 2) - fro2) / fro2)}
    if op == "qr":  # A Y against Q (R Y) for Y random, and Q's sampled columns
        q, r = out
        y = jnp.asarray(rng.standard_normal((n, 4)).astype(dtype))
        ay, fro2 = _apply(jax, op, n, dtype, mesh, seed, y, m)
        y = y.astype(wide)
        qry = np.asarray(jnp.matmul(q.astype(wide), jnp.matmul(r.astype(wide), y),
                                    precision=jax.lax.Precision.HIGHEST))
        res = np.linalg.norm(np.asarray(ay) - qry) / (math.sqrt(fro2) * np.linalg.norm(y))
        j = _columns(rng, n)
        qj = np.asarray(q[:, j]).astype(wide)
        orth = np.linalg.norm(qj.conj().T @ qj - np.eye(len(j)))
        return {"residual": float(res), "orthogonality": float(orth)}
    u, s, vh = out
    j = _columns(rng, min(u.shape[1], vh.shape[0]))
    vj = jnp.asarray(jnp.conj(vh[j, :]).T)
    ay, fro2 = _apply(jax, op, n, dtype, mesh, seed, vj)
    sj = np.asarray(s)[j].astype(np.float64)
    res = np.linalg.norm(np.asarray(ay) - np.asarray(u[:, j]).astype(wide) * sj[None, :])
    return {"residual": float(res / math.sqrt(fro2)),
            "frobenius": float(abs(np.sum(np.asarray(s).astype(np.float64) ** 2) - fro2)
                               / fro2)}


def _run_jaxmg(op: str, a: Any, b: Any, mesh: Any, spec: Any, tile: Any) -> tuple[Any, Any]:
    """(outputs, status) of jaxmg's plain form, A (and b) donated."""
    import jaxmg

    kw = dict(T_A=tile, mesh=mesh, in_specs=(spec,), return_status=True, donate=True)
    if op == "potrs":
        x, status = jaxmg.potrs(a, b, **kw)
        return (x,), status
    if op == "lu_solve":
        x, status = jaxmg.lu_solve(a, b, **kw)
        return (x,), status
    if op == "potri":
        inv, status = jaxmg.potri(a, **kw)
        return (inv,), status
    if op == "syevd":
        w, v, status = jaxmg.syevd(a, **kw)
        return (w, v), status
    if op == "syevd_values":
        w, status = jaxmg.syevd(a, return_eigenvectors=False, **kw)
        return (w,), status
    if op == "qr":
        q, r, status = jaxmg.qr(a, **kw)
        return (q, r), status
    u, s, vh, status = jaxmg.gesvd(a, tile, mesh, matrix_specs=spec, return_status=True,
                                   donate=True)
    return (u, s, vh), status


def _run_jax(jax: Any, op: str, a: Any, b: Any) -> tuple[Any, Any]:
    """(outputs, None) of JAX's own routine, jitted with A donated."""
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    fns = {
        "potrs": lambda a, b: (jsl.cho_solve(jsl.cho_factor(a, lower=True), b),),
        "lu_solve": lambda a, b: (jnp.linalg.solve(a, b),),
        "potri": lambda a, b: (jnp.linalg.inv(a),),
        "syevd": lambda a, b: tuple(jnp.linalg.eigh(a)),
        "syevd_values": lambda a, b: (jnp.linalg.eigvalsh(a),),
        "gesvd": lambda a, b: tuple(jnp.linalg.svd(a, full_matrices=False)),
    }
    return jax.jit(fns[op], donate_argnums=0)(a, b), None


def try_one(args: argparse.Namespace) -> dict[str, Any]:
    """Runs op once at N = args.one with A held and donated; what happened."""
    t_start = time.perf_counter()
    jax, devices = _setup_jax(args)
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, PartitionSpec as P

    import cases
    import inputs
    import jaxmg

    n, op, lib, dtype = args.one, args.op, args.lib, args.dtype
    m = args.rows or n  # A's rows: qr's may be tall
    if lib == "jax":
        devices = devices[:1]  # JAX's routines run on one device
    g = len(devices)
    es = jnp.dtype(dtype).itemsize
    res: dict[str, Any] = {"op": op, "lib": lib, "N": n, "M": m, "gpus": g, "dtype": dtype,
                           "T_A": args.tile, "matrix_bytes_per_gpu": m * n * es // g,
                           "mem_fraction": os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION"),
                           "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"),
                           "routine": "jaxmg." + op if lib == "jaxmg" else JAX_ROUTINE[op]}
    if m % g:
        res["status"] = f"error: M={m} is not a multiple of the {g} devices"
        return res
    mesh = Mesh(np.array(devices), (inputs.AXIS,))
    spec = P(inputs.AXIS, None)
    seed = jnp.uint32(args.seed % 2 ** 32)
    try:
        if lib == "jaxmg":
            base = "syevd" if op == "syevd_values" else op
            est = jaxmg.memory_estimate(base, (m, n), dtype, mesh, (spec,), T_A=args.tile,
                                        return_eigenvectors=op != "syevd_values")
            res.update(engine=est.engine, T_A=est.T_A, padded=est.padded,
                       estimate_xla_bytes=est.xla_bytes, estimate_workspace=est.workspace,
                       estimate_peak=est.peak)
        with SmiPoller() as smi:
            if op == "qr":  # no b: the peak is the QR's alone
                a, b = inputs.general(n, dtype, mesh, args.seed, rows=m), None
            else:
                make = inputs.general if _general(op) else inputs.hpd
                a = make(n, dtype, mesh, args.seed)
                b = inputs.replicated_normal(jax.random.PRNGKey(args.seed), (n, 1), dtype,
                                             mesh)
            jax.block_until_ready((a, b))
            b_keep = None if b is None else np.asarray(b)
            t0 = time.perf_counter()
            if lib == "jaxmg":
                out, status = _run_jaxmg(op, a, b, mesh, spec, args.tile)
            else:
                out, status = _run_jax(jax, op, a, b)
            jax.block_until_ready(out)
            res["solve_s"] = round(time.perf_counter() - t0, 2)
        stats = [d.memory_stats() or {} for d in devices]
        res["peak_bytes_in_use"] = [s.get("peak_bytes_in_use") for s in stats]
        res["bytes_limit"] = [s.get("bytes_limit") for s in stats]
        ids = [getattr(d, "local_hardware_id", None) for d in devices]
        res["nvidia_smi_peak_mib"] = [smi.peak.get(i) for i in ids] if smi.peak else None
        res["nvidia_smi_total_mib"] = [smi.total.get(i) for i in ids] if smi.total else None
        res["solver_status"] = None if status is None else int(status)
        # One fused reduction: jnp.all(jnp.isfinite(x)) eagerly makes an N x N
        # boolean first (16.8 GiB at N = 134,144, which a full GPU refuses).
        all_finite = jax.jit(lambda x: jnp.all(jnp.isfinite(x)))
        finite = all(bool(all_finite(x)) for x in out)
        t0 = time.perf_counter()
        checks = _check(jax, op, n, dtype, mesh, seed, out, b_keep, m)
        res["check_s"] = round(time.perf_counter() - t0, 2)
        res.update(checks)
        tol = cases.tolerance(dtype, n)
        res["tolerance"] = tol
        ok = (res["solver_status"] in (0, None) and finite
              and all(v < tol for v in checks.values()))
        res["status"] = "ok" if ok else "FAIL"
    except Exception as e:  # out of memory above all: the parent tries a smaller N
        msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        res["status"] = f"error: {type(e).__name__}: {msg}"
    res["total_s"] = round(time.perf_counter() - t_start, 2)
    return res


def plan(args: argparse.Namespace) -> dict[str, Any]:
    """jaxmg's largest N by its own estimate: the largest multiple of the
    step (GPUs x T_A, or x 1024) whose jaxmg.memory_estimate peak fits the
    devices' limit, by bisection (each estimate compiles the call's program
    and asks the engine's workspace; nothing is allocated)."""
    jax, devices = _setup_jax(args)
    import numpy as np
    from jax.sharding import Mesh, PartitionSpec as P

    import inputs
    import jaxmg

    limit = min((d.memory_stats() or {}).get("bytes_limit") or 0 for d in devices)
    g = len(devices)
    mesh = Mesh(np.array(devices), (inputs.AXIS,))
    base = "syevd" if args.op == "syevd_values" else args.op
    step = g * (args.tile or 1024)

    def peak(n: int) -> int | None:
        est = jaxmg.memory_estimate(base, (n, n), args.dtype, mesh, (P(inputs.AXIS, None),),
                                    T_A=args.tile, return_eigenvectors=args.op != "syevd_values")
        return est.peak

    lo, hi = 0, alone(limit, g, args.dtype) // step + 1  # in steps: lo fits, hi does not
    if not limit or peak(step) is None:
        return {"N": None, "why": "no limit, or the engine cannot tell its workspace"}
    while hi - lo > 1:
        mid = (lo + hi) // 2
        p = peak(mid * step)
        if p is not None and p <= limit:
            lo = mid
        else:
            hi = mid
    return {"N": lo * step, "limit": limit}


def probe(args: argparse.Namespace) -> dict[str, Any]:
    """The devices' memory limits as XLA sees them with --mem-fraction."""
    jax, devices = _setup_jax(args)
    stats = [d.memory_stats() or {} for d in devices]
    return {"gpus": len(devices), "device_kind": devices[0].device_kind,
            "bytes_limit": [s.get("bytes_limit") for s in stats]}


# ---- the parent: the tries -------------------------------------------------------


def _child(args: argparse.Namespace, extra: list[str], log: Any) -> dict[str, Any]:
    cmd = [sys.executable, str(HERE / "largest.py"), "--gpus", str(args.gpus),
           "--platform", args.platform, "--seed", str(args.seed)] + extra
    if args.tile:
        cmd += ["--tile", str(args.tile)]
    env = dict(os.environ, XLA_PYTHON_CLIENT_MEM_FRACTION=str(args.mem_fraction),
               XLA_PYTHON_CLIENT_PREALLOCATE="true" if args.preallocate else "false")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                           timeout=args.child_timeout)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        rc = "timeout"
    log.write(f"$ {' '.join(cmd)}\n{out}{err}(exit {rc})\n")
    log.flush()
    for line in reversed(out.splitlines()):
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    tail = (err.strip().splitlines() or [""])[-1][:200]
    return {"status": f"error: the try ended without a result (exit {rc}): {tail}"}


def itemsize(dtype: str) -> int:
    return {"float32": 4, "float64": 8, "complex64": 8, "complex128": 16}[dtype]


def alone(limit: int, gpus: int, dtype: str) -> int:
    """The N whose matrix alone takes every device's limit."""
    return int(math.sqrt(gpus * limit / itemsize(dtype)))


def candidates(args: argparse.Namespace, op: str, lib: str, dtype: str, limit: int,
               gpus: int) -> list[int]:
    """The N to try, largest first: FRACTIONS of A alone, rounded down to a
    multiple of gpus x 1024 (jaxmg with --tile: gpus x T_A)."""
    gpus = 1 if lib == "jax" else gpus
    step = gpus * (args.tile or 1024)
    out = []
    for frac in FRACTIONS[lib][op][:args.max_tries]:
        n = int(frac * alone(limit, gpus, dtype)) // step * step
        if n > 0 and n not in out:
            out.append(n)
    return out


def _gb(x: Any) -> str:
    return f"{x / 2 ** 30:.1f}" if isinstance(x, (int, float)) else "?"


def summary(results: list[dict[str, Any]]) -> str:
    """One table: per op, dtype and library, the largest N solved, and every try."""
    lines = ["largest N with A held and donated (jaxmg) / in a jit donating A (JAX), "
             "largest first; memory per device in GiB"]
    for r in results:
        ok = [t for t in r["tries"] if t.get("status") == "ok"]
        best = max((t["N"] for t in ok), default=None)
        planned = (f"; its estimate said {r['planned_n']} fits" if r.get("planned_n")
                   else "")
        lines.append(f"{r['op']} {r['dtype']} {r['lib']} ({r['routine']}): "
                     f"largest N solved {best if best else 'none of those tried'}; "
                     f"A alone allows {r.get('alone_n', '?')}{planned}")
        for t in r["tries"]:
            line = f"  N={t.get('N')}: {t.get('status')}"
            if "solve_s" in t:
                line += f", {t['solve_s']} s"
            if "residual" in t:
                line += f", residual {t['residual']:.1e} (tol {t.get('tolerance', 0):.0e})"
            if any(t.get("peak_bytes_in_use") or []):
                peak = max(p or 0 for p in t["peak_bytes_in_use"])
                line += (f", peak {_gb(peak)} of {_gb(max(t['bytes_limit']))}, A "
                         f"{_gb(t['matrix_bytes_per_gpu'])} (peak/A "
                         f"{peak / t['matrix_bytes_per_gpu']:.3f})")
                if t.get("estimate_peak"):
                    line += f", estimate {_gb(t['estimate_peak'])}"
            lines.append(line)
    return "\n".join(lines)


def plot(results: list[dict[str, Any]], path: pathlib.Path) -> None:
    """Bars per op and dtype: jaxmg's largest N, JAX's, and A alone."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    keys = sorted({(r["op"], r["dtype"]) for r in results})
    best = {}
    for r in results:
        ok = [t["N"] for t in r["tries"] if t.get("status") == "ok"]
        best[(r["op"], r["dtype"], r["lib"])] = max(ok, default=0)
        best[(r["op"], r["dtype"], "A alone")] = r.get("alone_n", 0)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(keys)), 4))
    width = 0.27
    for i, lib in enumerate(("jaxmg", "jax", "A alone")):
        xs = [k + (i - 1) * width for k in range(len(keys))]
        ax.bar(xs, [best.get((op, dt, lib), 0) for op, dt in keys], width, label=lib)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([f"{op}\n{dt}" for op, dt in keys], fontsize=8)
    ax.set_ylabel("largest N solved")
    ax.legend()
    ax.set_title("The largest problem per device set, A held as an array")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.one is not None:
        print(MARK + json.dumps(try_one(args)), flush=True)
        return 0
    if args.probe:
        print(MARK + json.dumps(probe(args)), flush=True)
        return 0
    if args.plan:
        print(MARK + json.dumps(plan(args)), flush=True)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "raw").mkdir(exist_ok=True)
    start = time.perf_counter()
    results: list[dict[str, Any]] = []
    with open(args.out / "raw" / "largest.log", "a") as log:
        p = _child(args, ["--probe"], log)
        limits = [x for x in p.get("bytes_limit") or [] if x]
        gpus = p.get("gpus", 1)
        limit = min(limits) if limits else None
        print(f"largest: {gpus} x {p.get('device_kind')}, XLA limit {_gb(limit)} GiB per "
              f"device at fraction {args.mem_fraction}", flush=True)
        for op in args.ops:
            for dtype in args.dtypes:
                for lib in args.libs:
                    r: dict[str, Any] = {"op": op, "dtype": dtype, "lib": lib,
                                         "routine": ("jaxmg." + op if lib == "jaxmg"
                                                     else JAX_ROUTINE[op]), "tries": []}
                    if limit:
                        r["alone_n"] = alone(limit, 1 if lib == "jax" else gpus, dtype)
                    ns = (sorted(args.n, reverse=True) if args.n else
                          candidates(args, op, lib, dtype, limit, gpus) if limit else [])
                    if lib == "jaxmg" and not args.n and limit:
                        # Where jaxmg's estimate knows the peak, start at the
                        # largest N it says fits, then step down.
                        planned = _child(args, ["--plan", "--op", op, "--dtype", dtype], log)
                        r["planned_n"] = planned.get("N")
                        if planned.get("N"):
                            step = gpus * (args.tile or 1024)
                            ns = [planned["N"] - k * step for k in range(args.max_tries)
                                  if planned["N"] - k * step > 0]
                    results.append(r)
                    for n in ns[:args.max_tries]:
                        if args.budget_s and time.perf_counter() - start > args.budget_s:
                            r["tries"].append({"N": n, "status": "not tried: budget spent"})
                            break
                        t = _child(args, ["--one", str(n), "--op", op, "--lib", lib,
                                          "--dtype", dtype], log)
                        t.setdefault("N", n)
                        r["tries"].append(t)
                        print(f"largest: {op} {dtype} {lib} N={n}: {t.get('status')} "
                              f"({time.perf_counter() - start:.0f} s so far)", flush=True)
                        (args.out / "largest.json").write_text(json.dumps(results, indent=1))
                        if t.get("status") == "ok":
                            break
    text = summary(results) + f"\n(took {time.perf_counter() - start:.0f} s)"
    (args.out / "largest.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "largest.txt").write_text(text + "\n")
    plot(results, args.out / "largest.png")
    print("\n" + text, flush=True)
    solved = [t for r in results for t in r["tries"] if t.get("status") == "ok"]
    return 0 if solved else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
