"""Session 19's NumPy models behind two choices (docs/gpu-notes.md, "Session 19"):

1. tf32: the TF32 Cholesky (tf32_potrf.c: float32 diagonal blocks, TF32 update) with
   its panels by trsm (float32), by the diagonal block's inverse in a TF32 gemm, or in
   a float32 gemm (the one chosen), and the refinement's corrections with
   cuSOLVER-like solves against the blocked gemv solves of tri_solve.c (the same
   pointer arithmetic), float64 residuals, N = 1024, blocks of 256.
2. rbt: a pivot-free blocked LU after a depth-2 random butterfly transformation (the
   butterflies as a kernel would apply them), its growth and the quality of its TF32
   factor as a preconditioner, against partial pivoting.

    python3 docs/gpu-runs/2026-11-28-s19/numpy_models.py tf32|rbt

Minutes on one core. TF32 is emulated by rounding a gemm's float32 inputs to 10
mantissa bits (round to nearest even) and summing in float32."""

from __future__ import annotations

import sys

import numpy as np
import scipy.linalg as sl


def tf32(x):
    x = np.asarray(x, np.float32).copy()
    i = x.view(np.uint32)
    i += np.uint32(0xFFF) + ((i >> np.uint32(13)) & np.uint32(1))
    i &= np.uint32(0xFFFFE000)
    return i.view(np.float32)


def gemm_tf32(a, b):
    return (tf32(a) @ tf32(b)).astype(np.float32)


def cholesky(a, nb, panels):
    """Lower TF32 Cholesky by blocks; panels "trsm", "tf32" or "fp32"; None where
    a diagonal block is not positive definite."""
    n = a.shape[0]
    f = a.astype(np.float32).copy()
    invs = []
    for j in range(0, n, nb):
        jb = min(nb, n - j)
        try:
            f[j:j + jb, j:j + jb] = np.linalg.cholesky(f[j:j + jb, j:j + jb])
        except np.linalg.LinAlgError:
            return None, None
        l11 = np.tril(f[j:j + jb, j:j + jb])
        inv = sl.solve_triangular(l11, np.eye(jb, dtype=np.float32), lower=True)
        invs.append(inv.astype(np.float32))
        if j + jb == n:
            break
        p = f[j + jb:, j:j + jb]
        if panels == "trsm":
            f[j + jb:, j:j + jb] = sl.solve_triangular(l11, p.T, lower=True).T
        elif panels == "tf32":
            f[j + jb:, j:j + jb] = gemm_tf32(p, invs[-1].T)
        else:
            f[j + jb:, j:j + jb] = p @ invs[-1].T
        lp = f[j + jb:, j:j + jb]
        f[j + jb:, j + jb:] -= gemm_tf32(lp, lp.T)
    return np.tril(f), invs


def blocked_solve(f, invs, nb, w):
    """tri_solve.c's forward and backward passes (float32)."""
    n = len(w)
    w = w.astype(np.float32).copy()
    y = np.zeros(n, np.float32)
    for i, inv in enumerate(invs):
        s, e = i * nb, min(n, i * nb + nb)
        y[s:e] = inv @ w[s:e]
        w[e:] -= f[e:, s:e] @ y[s:e]
    for i in range(len(invs) - 1, -1, -1):
        s, e = i * nb, min(n, i * nb + nb)
        w[s:e] = invs[i].T @ y[s:e]
        y[:s] -= f[s:e, :s].T @ w[s:e]
    return w


def refine(a, solve, b, steps=30):
    """Classical refinement; the corrections until the backward error is at
    sqrt(n) u (None where it is not within steps)."""
    anorm = np.linalg.norm(a)
    x = solve(b).astype(np.float64)
    for it in range(steps):
        r = b - a @ x
        berr = np.linalg.norm(r) / (anorm * np.linalg.norm(x) + np.linalg.norm(b))
        if berr <= 2.0 ** -53 * np.sqrt(len(b)):
            return it
        x += solve(r)
    return None


def model_tf32(n=1024, nb=256):
    rng = np.random.default_rng(1)
    for kappa in (1e2, 1e4, 1e5):
        q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        a = (q * np.logspace(0, -np.log10(kappa), n)) @ q.T
        a = (a + a.T) / 2
        b = rng.standard_normal(n)
        for panels in ("trsm", "tf32", "fp32"):
            f, invs = cholesky(a, nb, panels)
            if f is None:
                print(f"kappa {kappa:.0e} panels {panels}: factorization failed")
                continue
            cu = refine(a, lambda r: sl.cho_solve((f, True), r.astype(np.float32)), b)
            bl = refine(a, lambda r: blocked_solve(f, invs, nb, r), b)
            print(f"kappa {kappa:.0e} panels {panels}: corrections {cu} (cuSOLVER-like "
                  f"solves), {bl} (blocked solves)")


def butterfly(a, coef, segs, along, op):
    """One level (segs 1: [0, n); 2: its two halves) of a random butterfly, as
    the kernel that was drafted would apply it: op 0 B^T from the left or B from
    the right, op 1 B from the left; along 0 rows, 1 columns."""
    a = a.copy()
    n = a.shape[0] if along == 0 else a.shape[1]
    seg_len = n if segs == 1 else n // 2
    half = seg_len // 2
    idx = np.concatenate([s * seg_len + np.arange(half) for s in range(segs)])
    p, q = idx, idx + half
    c0, c1 = coef[p], coef[q]
    if along == 0:
        c0, c1 = c0.reshape(-1, *([1] * (a.ndim - 1))), c1.reshape(-1, *([1] * (a.ndim - 1)))
        x, y = a[p].copy(), a[q].copy()
    else:
        x, y = a[:, p].copy(), a[:, q].copy()
    r = 1 / np.sqrt(2)
    nx, ny = ((c0 * (x + y) * r, c1 * (x - y) * r) if op == 0
              else ((c0 * x + c1 * y) * r, (c0 * x - c1 * y) * r))
    if along == 0:
        a[p], a[q] = nx, ny
    else:
        a[:, p], a[:, q] = nx, ny
    return a


def lu_nopiv(a, nb, update_tf32):
    n = a.shape[0]
    f = a.astype(np.float32).copy()
    for j in range(0, n, nb):
        jb = min(nb, n - j)
        d = f[j:j + jb, j:j + jb].astype(np.float64)
        for k in range(jb):
            d[k + 1:, k] /= d[k, k]
            d[k + 1:, k + 1:] -= np.outer(d[k + 1:, k], d[k, k + 1:])
        f[j:j + jb, j:j + jb] = d
        if j + jb == n:
            break
        l11 = np.tril(d, -1) + np.eye(jb)
        f[j + jb:, j:j + jb] = sl.solve_triangular(np.triu(d).T, f[j + jb:, j:j + jb].T,
                                                   lower=True).T
        f[j:j + jb, j + jb:] = sl.solve_triangular(l11, f[j:j + jb, j + jb:], lower=True,
                                                   unit_diagonal=True)
        p, q = f[j + jb:, j:j + jb], f[j:j + jb, j + jb:]
        f[j + jb:, j + jb:] -= gemm_tf32(p, q) if update_tf32 else p @ q
    return f


def model_rbt(n=1024, nb=256):
    rng = np.random.default_rng(5)
    q1, _ = np.linalg.qr(rng.standard_normal((n, n)))
    q2, _ = np.linalg.qr(rng.standard_normal((n, n)))
    a = (q1 * np.logspace(0, -2, n)) @ q2.T
    co = [np.exp(rng.uniform(-0.05, 0.05, n)) for _ in range(4)]
    ar = butterfly(butterfly(a, co[1], 2, 0, 0), co[0], 1, 0, 0)
    ar = butterfly(butterfly(ar, co[3], 2, 1, 0), co[2], 1, 1, 0)
    # The transform solves A x = b: x = V (U^T A V)^-1 U^T b.
    b = rng.standard_normal(n)
    y = np.linalg.solve(ar, butterfly(butterfly(b, co[1], 2, 0, 0), co[0], 1, 0, 0))
    x = butterfly(butterfly(y, co[2], 1, 0, 1), co[3], 2, 0, 1)
    print(f"butterflies: ||A x - b|| = {np.linalg.norm(a @ x - b):.1e}")
    for name, m in (("rbt", ar), ("pivot-free", a)):
        for tf in (False, True):
            f = lu_nopiv(m, nb, tf)
            lo, up = np.tril(f, -1) + np.eye(n), np.triu(f)
            e = np.eye(n) - np.linalg.solve(up, np.linalg.solve(lo, m))
            print(f"{name} {'tf32' if tf else 'float32'} update: growth "
                  f"{np.abs(up).max() / np.abs(m).max():.2g}, ||I - F^-1 A||_2 "
                  f"{np.linalg.norm(e, 2):.3g}")
    u = sl.lu(a)[2]
    print(f"partial pivoting: growth {np.abs(u).max() / np.abs(a).max():.2g}")


if __name__ == "__main__":
    {"tf32": model_tf32, "rbt": model_rbt}[sys.argv[1] if len(sys.argv) > 1 else "tf32"]()
