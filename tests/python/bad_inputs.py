"""One table of bad inputs and what every engine must answer, shared by the
CPU tests (tests/python/test_bad_inputs.py: engines lapack and lapack-local)
and the GPU tests (tests/gpu/test_gpu_bad_inputs.py: cusolverdn, cusolvermg,
cusolverdn-gather, cusolvermp).

(op, bad input) -> (status, outputs):
- a NaN or an Inf anywhere in A (either triangle, the diagonal, Inf of
  either sign, in the real or the imaginary part): status -1 for every op
  (JMG_INFO_NONFINITE, csrc/common/error.h), every output NaN;
- lu_solve of a singular A: the index (1-based) of the first exactly zero
  pivot of U, x NaN. All ones: 2. Row and column k zero: k + 1.

Every input is fresh random data with the bad entry at a random place; every
output of the call is checked.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

import jaxmg
import jaxmg_testing as jt

NONFINITE_STATUS = -1

# Which entry goes bad, by name.
NONFINITE = ("nan_upper", "nan_lower", "nan_diag", "inf_diag", "neg_inf_upper",
             "nan_imag")
SINGULAR = ("ones", "zero_row_col")

# The ops of the table; gesvd is in 1.x's form only and has no local-model
# routine (lapack-local, cusolvermp 0.8).
# qr and least_squares (1.x's forms only) run on both engines of the local
# model, and so does polar (its default method, QDWH, over qr's QRs).
OPS = ("potrs", "potri", "syevd", "eigvalsh", "lu_solve", "gesvd", "polar", "qr",
       "least_squares")


def _place(rng: np.random.Generator, n: int, where: str) -> tuple[int, int]:
    i, j = sorted(int(v) for v in rng.choice(n, size=2, replace=False))
    if where == "upper":
        return i, j
    if where == "lower":
        return j, i
    k = int(rng.integers(n))
    return k, k


def nonfinite_matrix(rng: np.random.Generator, op: str, n: int, dtype,
                     case: str) -> np.ndarray:
    """A fresh input of op's kind (Hermitian positive definite for potrs and
    potri, Hermitian for the eigensolvers, general otherwise) with one entry
    made non-finite as case says. The entry is set alone (the matrix is no
    longer Hermitian where it is off the diagonal: every engine must look at
    all of A, not one triangle)."""
    if op in ("potrs", "potri"):
        a = jt.make_hpd(rng, n, dtype)
    elif op in ("syevd", "eigvalsh"):
        a = jt.make_hermitian(rng, n, dtype)
    else:
        a = jt.make_general(rng, n, dtype)
    a = np.array(a)
    if case == "nan_imag":
        if not jt.is_complex(dtype):
            case = "nan_upper"
        else:
            i, j = _place(rng, n, "upper")
            a[i, j] = complex(a[i, j].real, np.nan)
            return a
    kind, _, where = case.partition("_")
    if kind == "neg":
        kind, where = "-inf", where.partition("_")[2]
    value = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}[kind]
    i, j = _place(rng, n, where)
    a[i, j] = value
    return a


def singular_matrix(rng: np.random.Generator, n: int, dtype,
                    case: str) -> tuple[np.ndarray, int]:
    """A singular general A and the status lu_solve must give: the first
    exactly zero pivot of U (1-based), the same whether A or Aᵀ is factored."""
    if case == "ones":
        return np.ones((n, n), dtype=dtype), 2
    k = int(rng.integers(1, n - 1))
    a = np.array(jt.make_general(rng, n, dtype))
    a[k, :] = 0
    a[:, k] = 0
    return a, k + 1


def _put(x: np.ndarray, mesh: Any, spec: Any) -> jax.Array:
    return jax.device_put(x, NamedSharding(mesh, spec))


def _rep(x: np.ndarray, mesh: Any) -> jax.Array:
    return jax.device_put(x, NamedSharding(mesh, P(*([None] * np.ndim(x)))))


def run_op(op: str, a: np.ndarray, mesh: Any, T_A: int | None,
           rng: np.random.Generator,
           b: np.ndarray | None = None) -> tuple[int, dict[str, np.ndarray]]:
    """Runs op on a (rows sharded over the mesh's first axis) with
    return_status, and returns (status, every output by name). Nothing may
    raise. b: the right-hand sides of potrs and lu_solve (fresh random
    ones, 3 columns, when None)."""
    n, dtype = a.shape[0], a.dtype
    spec = P(mesh.axis_names[0], None)
    A = _put(a, mesh, spec)
    if b is None:
        b = jt.make_rhs(rng, n, 3, dtype)
    b = _rep(b, mesh)
    if op == "potrs":
        x, logdet, status = jaxmg.potrs(A, b, T_A, mesh=mesh, matrix_specs=spec,
                                        return_status=True, return_logdet=True)
        out = {"x": x, "logdet": logdet}
    elif op == "potri":
        inv, status = jaxmg.potri(A, T_A, mesh=mesh, in_specs=(spec,), return_status=True)
        out = {"inverse": inv}
    elif op == "syevd":
        w, v, status = jaxmg.syevd(A, T_A, mesh=mesh, in_specs=(spec,), return_status=True)
        out = {"w": w, "V": v}
    elif op == "eigvalsh":
        w, status = jaxmg.syevd(A, T_A, mesh=mesh, in_specs=(spec,),
                                return_eigenvectors=False, return_status=True)
        out = {"w": w}
    elif op == "lu_solve":
        x, status = jaxmg.lu_solve(A, b, T_A, mesh=mesh, matrix_specs=spec,
                                   return_status=True)
        out = {"x": x}
    elif op == "gesvd":
        u, s, vh, status = jaxmg.gesvd(A, T_A, mesh=mesh, matrix_specs=spec,
                                       return_status=True)
        out = {"U": u, "s": s, "Vh": vh}
    elif op == "polar":
        up, h, status = jaxmg.polar(A, T_A, mesh=mesh, matrix_specs=spec,
                                    return_status=True)
        out = {"Up": up, "H": h}
    elif op == "qr":
        q, r, status = jaxmg.qr(A, T_A, mesh=mesh, matrix_specs=spec, return_status=True)
        out = {"Q": q, "R": r}
    elif op == "least_squares":
        x, status = jaxmg.least_squares(A, b, T_A, mesh=mesh, matrix_specs=spec,
                                        return_status=True)
        out = {"x": x}
    else:
        raise ValueError(op)
    return int(status), {k: np.asarray(v) for k, v in out.items()}


def check_nonfinite(op: str, case: str, dtype, mesh: Any, n: int, T_A: int | None,
                    rng: np.random.Generator) -> None:
    """The table's row for a non-finite A: status -1, every output NaN."""
    a = nonfinite_matrix(rng, op, n, dtype, case)
    status, out = run_op(op, a, mesh, T_A, rng)
    assert status == NONFINITE_STATUS, (op, case, status)
    for name, value in out.items():
        assert np.isnan(value).all(), (op, case, name, value)


def check_singular(case: str, dtype, mesh: Any, n: int, T_A: int | None,
                   rng: np.random.Generator) -> None:
    """The table's row for lu_solve of a singular A: the first zero pivot,
    x NaN."""
    a, expected = singular_matrix(rng, n, dtype, case)
    status, out = run_op("lu_solve", a, mesh, T_A, rng)
    assert status == expected, (case, status, expected)
    assert np.isnan(out["x"]).all()


def engine_runs(engine: str, op: str, platform: str, nparts: int, dtype, n: int,
                T_A: int) -> tuple[bool, str]:
    """Whether engine (forced by JAXMG_ENGINE, already set) takes op here, by
    the C library's own check: (True, "") or (False, why)."""
    from jaxmg._src import _native

    solver = {"eigvalsh": "syevd", "polar": "qr", "least_squares": "qr"}.get(op, op)
    verdict = _native.engine_check(platform, solver, nparts, np.dtype(dtype).name, n,
                                   min(T_A, n // nparts))
    if verdict is None:
        return False, f"no jaxmg library for {platform}"
    ok, text = verdict
    return (ok and text == engine), text


Check = Callable[..., None]
