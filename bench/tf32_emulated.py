"""A TF32 Cholesky emulated on the CPU and the refinement that follows it,
to check on the CPU what precision="mixed" on a GPU should do (issue 39).

The factorization is jaxmg's blocked TF32 Cholesky (csrc/engine/cusolverdn/
mixed.c) in NumPy: diagonal blocks by a float32 Cholesky, the panel by a
float32 triangular solve, the trailing update by a float32 product whose
operands are rounded to TF32 (10 bits of mantissa, to nearest), as the
tensor cores read them; where it fails, once more with the diagonal shifted
by 8 u_TF32 diag(A). Then classical refinement in float64 (the loop's
stopping rules: u, or a correction that does not halve the backward
error, at most 30) and GMRES-IR (restart 30, up to 10 outer iterations,
left-preconditioned by the factor), printing the backward errors, the
corrections and the Arnoldi steps:

    python3 bench/tf32_emulated.py 2048 1e2 1e4 1e5 1e6 1e12

Measured 2026-11-27 (N = 1024 and 2048, A = Q diag(logspace(0, -log10
kappa)) Q^T): 1e2 converges in 4 corrections (as an H200 did at N =
16384), 1e4 in 11, 1e5 stalls and GMRES-IR converges in 58 Arnoldi steps,
1e6 fails the Cholesky (column 512 of 1024) and the shifted factor needs
240 Arnoldi steps, 1e12 fails at column 512 of 2048 and does not converge
in 300.
"""
import sys

import numpy as np
import scipy.linalg as sl


def tf32(x):
    x = np.asarray(x, np.float32).copy()
    i = x.view(np.uint32)
    i += np.uint32(0x1000)           # round to nearest (ties up) at bit 13
    i &= np.uint32(0xFFFFE000)
    return x
def chol_tf32(a, nb=256):
    f = a.astype(np.float32).copy(); n = len(f)
    for j in range(0, n, nb):
        jb = min(nb, n-j)
        try:
            f[j:j+jb, j:j+jb] = np.linalg.cholesky(f[j:j+jb, j:j+jb].astype(np.float32))
        except np.linalg.LinAlgError:
            return None, j
        if j+jb < n:
            l = f[j:j+jb, j:j+jb]
            f[j+jb:, j:j+jb] = sl.solve_triangular(l, f[j+jb:, j:j+jb].T, lower=True).T.astype(np.float32)
            p = tf32(f[j+jb:, j:j+jb])
            f[j+jb:, j+jb:] -= p @ p.T
    return np.tril(f), -1
def run(n, kappa, seed=0, shift=True, restart=30, max_inner=500):
    rng = np.random.default_rng(seed)
    q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    s = np.logspace(0, -np.log10(kappa), n)
    a = (q*s) @ q.T; a = (a+a.T)/2
    b = rng.standard_normal(n)
    L, fail = chol_tf32(a)
    sh = 0
    if L is None:
        if not shift: return dict(fail=fail)
        sh = 8*2.0**-11
        L, fail2 = chol_tf32(a + sh*np.diag(np.diag(a)))
        if L is None: return dict(fail=fail, fail2=fail2)
    L64 = L.astype(np.float64)
    Finv = lambda r: sl.cho_solve((L64, True), r)
    anorm = np.linalg.norm(a); u = 2.0**-53; enough = np.sqrt(n)*u
    be = lambda x: np.linalg.norm(b-a@x)/(anorm*np.linalg.norm(x)+np.linalg.norm(b))
    x = Finv(b); hist=[be(x)]
    prev = np.inf; it=0
    while True:
        e = hist[-1]
        if e <= u or not (e <= 0.5*prev) or it == 30: break
        prev = e; x = x + Finv(b - a@x); it += 1; hist.append(be(x))
    out = dict(shift=sh, fail=fail, classical=it, hist=["%.1e"%h for h in hist])
    if hist[-1] <= enough: return out
    # GMRES-IR: count inner steps per outer to tol 1e-10
    inner_tot=0; outers=[]
    for outer in range(10):
        r = b - a@x
        z = Finv(r); beta = np.linalg.norm(z); V=[z/beta]; H=np.zeros((restart+1,restart)); k=0; res=[]
        for j in range(restart):
            w = Finv(a@V[j])
            for _ in range(2):
                for i in range(j+1):
                    hij = V[i]@w; H[i,j]+=hij; w -= hij*V[i]
            H[j+1,j]=np.linalg.norm(w); V.append(w/H[j+1,j]); k=j+1
            e1=np.zeros(k+1); e1[0]=beta
            y=np.linalg.lstsq(H[:k+1,:k],e1,rcond=None)[0]
            rr=np.linalg.norm(H[:k+1,:k]@y-e1)/beta; res.append(rr)
            inner_tot+=1
            if rr<=1e-10 or inner_tot>=max_inner: break
        x = x + np.array(V[:k]).T@y
        outers.append((k, "%.1e"%res[-1], "%.1e"%be(x)))
        if be(x) <= enough or inner_tot>=max_inner: break
    out.update(gmres=outers, inner=inner_tot, final="%.1e"%be(x))
    return out
if __name__=="__main__":
    n=int(sys.argv[1])
    for k in [float(v) for v in sys.argv[2:]]:
        print(n, "%.0e"%k, run(n,k), flush=True)
