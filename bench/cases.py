"""What the benchmark measures: cases, presets, and the standard flop counts.

A case is one jaxmg call shape: (op, dtype, N, T_A, GPUs). The single-GPU
JAX routine a user would otherwise call is measured once per (op, dtype, N),
and the engine's ceiling (bench/ceiling/) for the same case.

T_A is stored as jaxmg uses it: a T_A above the shard size N/GPUs is reduced
to the shard size (one tile per device), so (N=4096, 4 GPUs, T_A=2048) is the
case T_A=1024 and is measured once.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterable

OPS = ("potrs", "potri", "syevd")
# The dtypes of the seed paper's Figure 3, per op.
DEFAULT_DTYPES = {"potrs": ("float32", "float64"), "potri": ("complex128",),
                  "syevd": ("float64",)}
DTYPES = ("float32", "float64", "complex64", "complex128")
SHORT = {"float32": "f32", "float64": "f64", "complex64": "c64", "complex128": "c128"}
# The single-GPU JAX routine each op is compared with.
JAX_ROUTINE = {"potrs": "jax.scipy.linalg.cho_factor + cho_solve",
               "potri": "jnp.linalg.inv", "syevd": "jnp.linalg.eigh"}


@dataclass(frozen=True, order=True)
class Case:
    """One jaxmg measurement."""

    op: str
    dtype: str
    n: int
    tile: int  # the T_A jaxmg uses (see effective_tile)
    gpus: int

    @property
    def group(self) -> tuple[str, str, int]:
        """The (op, dtype, N) this case shares its single-GPU JAX baseline with."""
        return (self.op, self.dtype, self.n)

    def label(self) -> str:
        return f"{self.op} {self.dtype} N={self.n} T_A={self.tile} on {self.gpus}"


def effective_tile(n: int, gpus: int, tile: int) -> int:
    """The T_A jaxmg uses: at most the shard size N/GPUs (gpus 0: "all devices",
    not known yet: T_A as given)."""
    return min(tile, n // gpus) if gpus else tile


def expand(ops: Iterable[str], dtypes: dict[str, tuple[str, ...]],
           ns: Iterable[int], tiles: Iterable[int], gpus: Iterable[int]) -> list[Case]:
    """Every combination, as Cases (largest GPU count first, N descending)."""
    out = []
    for op, n, g, t in itertools.product(ops, sorted(ns, reverse=True),
                                         sorted(gpus, reverse=True), tiles):
        for dt in dtypes[op]:
            out.append(Case(op, dt, n, effective_tile(n, g, t), g))
    return out


def dedupe(cases: Iterable[Case]) -> list[Case]:
    """The cases in order of first appearance, each once."""
    seen: set[Case] = set()
    out = []
    for c in cases:
        if c not in seen and (c.gpus == 0 or c.n % c.gpus == 0):
            seen.add(c)
            out.append(c)
    return out


def _pow2(lo: int, hi: int) -> list[int]:
    n, out = lo, []
    while n <= hi:
        out.append(n)
        n *= 2
    return out


def preset(name: str) -> list[Case]:
    """The cases of a preset, in priority order: when --budget-s runs out, the
    cases at the end are the ones skipped."""
    if name == "smoke":
        # Tiny, on 4 CPU devices: exercises every path in seconds.
        return dedupe(
            expand(["potrs"], {"potrs": ("float64",)}, [128], [16, 32], [4])
            + expand(["potrs"], {"potrs": ("float64",)}, [128], [16], [2, 1])
            + expand(["potrs"], {"potrs": ("float32",)}, [128], [16], [4])
            + expand(["potri"], DEFAULT_DTYPES, [64], [16], [4])
            + expand(["syevd"], DEFAULT_DTYPES, [64], [16], [4]))
    if name == "h200x4":
        # About 7 minutes on 4 H200s (--budget-s 380 is the guard). The
        # estimate, from DESIGN.md's figures (cuSOLVERMg dpotrf+dpotrs
        # N=65536 on 4 GPUs 0.845 s, JAX on one 2.08 s, both ~N^3, 0.03 s at
        # least; potri c128 N=32768: cuSOLVERMg 4 s, jnp.linalg.inv 7 s;
        # syevd f64 N=16384 on 4 GPUs 5.9 s, 8192 1.6 s, eigh 3.2 s), with
        # 1 and 2 GPUs taken 2.5x and 1.7x slower than 4, jaxmg 1.12x the
        # ceiling, a warm-up plus the timed runs (5, or fewer so that a case
        # stays near 6 s, at least 2), ~1.5 s of compilation and checks per
        # jaxmg case, ~0.6 s of set-up and check per ceiling case, and ~3 s
        # to start each ceiling process:
        #   ceiling ~150 s, jaxmg ~175 s, single-GPU JAX ~75 s, start-up
        #   ~15 s: ~410 s, so the budget may drop the last cases.
        # jaxmg's potri (potrf + potrs on the identity) is the least known:
        # it may take longer than cusolverMgPotri; the budget then drops the
        # tail (the T_A sweep below N = 32768, potri on fewer GPUs).
        tiles = [256, 1024, 2048]
        f64 = {"potrs": ("float64",)}
        return dedupe(
            # 1. the targets: potrs f64 at N = 65536 and 32768 on 4 GPUs, every
            #    T_A; potri c128 at N = 32768 on 4 GPUs.
            expand(["potrs"], f64, [65536, 32768], tiles, [4])
            + expand(["potri"], DEFAULT_DTYPES, [32768], [1024], [4])
            # 2. potrs f32 and f64, N doubling from 4096, on 1, 2 and 4 GPUs
            #    (f32 at N = 65536 on 4 only: it runs no faster than f64).
            + expand(["potrs"], DEFAULT_DTYPES, [65536], [1024], [4])
            + expand(["potrs"], f64, [65536], [1024], [2, 1])
            + expand(["potrs"], DEFAULT_DTYPES, _pow2(4096, 32768), [1024], [4, 2, 1])
            # 3. syevd f64: cuSOLVERMg's syevd is slow below N ~ 32768
            #    (DESIGN.md): up to 16384 on 4 GPUs, 4096 on 1 and 2.
            + expand(["syevd"], DEFAULT_DTYPES, [16384, 8192, 4096], [1024], [4])
            + expand(["syevd"], DEFAULT_DTYPES, [4096], [1024], [2, 1])
            # 4. potri c128 below 32768.
            + expand(["potri"], DEFAULT_DTYPES, [16384, 8192], [1024], [4])
            + expand(["potri"], DEFAULT_DTYPES, [8192], [1024], [2, 1])
            # 5. the rest of the T_A sweep, as the budget allows.
            + expand(["potrs"], f64, [16384, 8192], tiles, [4]))
    raise ValueError(f"unknown preset {name!r}; known: smoke, h200x4")


PRESET_SETTINGS = {
    # repeats, max seconds of timed runs per case, budget (s; 0: none)
    "smoke": dict(repeats=2, max_case_s=2.0, budget_s=0.0),
    "h200x4": dict(repeats=5, max_case_s=6.0, budget_s=380.0),
}


def flops(op: str, dtype: str, n: int, nrhs: int = 1) -> float | None:
    """The standard operation count (LAPACK Working Note 41), or None where
    there is no standard one.

    potrs: Cholesky N^3/3 plus two triangular solves 2 N^2 NRHS. potri:
    Cholesky N^3/3 plus the inverse from the factor 2 N^3/3 (LAPACK's
    potrf + potri): N^3, whichever algorithm computes it (jaxmg solves on the
    identity, jnp.linalg.inv uses LU; the count is the task's, so GFLOP/s
    compare times). Complex: 4x (a complex multiply-add is 4 real ones of
    each). syevd: none (divide and conquer's work depends on deflation)."""
    scale = 4.0 if dtype.startswith("complex") else 1.0
    if op == "potrs":
        return scale * (n ** 3 / 3.0 + 2.0 * n * n * nrhs)
    if op == "potri":
        return scale * float(n) ** 3
    return None


def eps(dtype: str) -> float:
    """LAPACK's eps of the dtype's real type (2^-23 or 2^-52)."""
    return 2.0 ** -23 if dtype in ("float32", "complex64") else 2.0 ** -52


def tolerance(dtype: str, n: int) -> float:
    """The largest relative residual a right answer is allowed: 100 eps sqrt(N).

    Our matrices have condition number ~5 (inputs.py), and a backward-stable
    solver's relative residuals are a small multiple of eps sqrt(N); a wrong
    answer (a misplaced tile, cuSOLVERMg 13.0's 1e-4 errors past 2048
    right-hand sides) is many orders above. The same in the ceiling
    (bench/ceiling/main.c)."""
    return 100.0 * eps(dtype) * n ** 0.5


def standard_flops(op: str, dtype: str, n: int, nrhs: int = 1) -> float:
    """A conventional operation count for every op of bench/scaling.py, for
    TFLOP/s and efficiency columns (it compares times; it is not the work a
    given algorithm does). potrs and potri: ``flops``. lu_solve: LU
    2 N^3/3 plus two triangular solves 2 N^2 NRHS (LAWN 41). syevd with
    vectors 9 N^3, eigenvalues alone (``syevd_values``) 4 N^3/3, gesvd
    (thin U, S, Vh of a square A: Golub-Reinsch) 14 N^3 + 8 N^3 = 22 N^3:
    Golub and Van Loan's counts (Matrix Computations, 3rd ed., sections
    8.3 and 5.4.5). Complex: 4x."""
    known = flops(op, dtype, n, nrhs)
    if known is not None:
        return known
    scale = 4.0 if dtype.startswith("complex") else 1.0
    n3 = float(n) ** 3
    per_op = {"lu_solve": 2.0 * n3 / 3.0 + 2.0 * n * n * nrhs, "syevd": 9.0 * n3,
              "syevd_values": 4.0 * n3 / 3.0, "eigvals": 4.0 * n3 / 3.0, "gesvd": 22.0 * n3}
    if op not in per_op:
        raise ValueError(f"no operation count for {op!r}")
    return scale * per_op[op]
