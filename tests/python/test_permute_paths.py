"""Both ways of moving A into the block-cyclic layout give the same answers:
out of place into a scratch shard (the default, when the engine can give the
memory) and in place by cycles (JAXMG_PERMUTE=inplace, and the fallback when
it cannot). Every op, with and without padding, against float64 NumPy; the
leader's trace (JAXMG_TRACE) shows which way was taken."""

import re

import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import jaxmg
import jaxmg_testing as jt

ROWS = P("x", None)


@pytest.mark.parametrize("how", ["apart", "in place"])
@pytest.mark.parametrize("n,T_A", [(16, 2), (24, 3), (20, 2)])  # 20: padded to 24
def test_every_op_both_permutations(mesh, rng, capfd, monkeypatch, how, n, T_A):
    if how == "in place":
        monkeypatch.setenv("JAXMG_PERMUTE", "inplace")
    else:
        monkeypatch.delenv("JAXMG_PERMUTE", raising=False)
    monkeypatch.setenv("JAXMG_TRACE", "1")
    a = jt.make_hpd(rng, n, np.complex128)
    b = jt.make_rhs(rng, n, 2, np.complex128)
    h = jt.make_hermitian(rng, n, np.complex128)

    x = np.asarray(jaxmg.potrs(jt.shard_rows(a, mesh), b, T_A, mesh, (ROWS, P(None, None))))
    assert jt.fro(a @ x - b) < 1e-12 * jt.fro(a) * jt.fro(x)
    inv = np.asarray(jaxmg.potri(jt.shard_rows(a, mesh), T_A, mesh, (ROWS,)))
    assert jt.fro(a @ inv - np.eye(n)) < 1e-12 * jt.fro(a) * jt.fro(inv)
    w, v = jaxmg.syevd(jt.shard_rows(h, mesh), T_A, mesh, (ROWS,))
    w, v = np.asarray(w), np.asarray(v)
    assert jt.fro(h @ v - v * w) < 1e-12 * jt.fro(h) * n
    assert jt.fro(v.conj().T @ v - np.eye(n)) < 1e-12 * n

    err = capfd.readouterr().err
    steps = re.findall(r"permute (?:back )?(apart|in place)", err)
    # potrs, potri, syevd to the cyclic layout; syevd's vectors back.
    assert steps == [how] * 4, err


def test_scratch_is_tried_only_where_four_shards_fit(monkeypatch):
    """_ffi_call.scratch_fits: by the allocator limit of the first device; where
    a backend reports no limit (CPU), always."""
    import jax
    from jaxmg._src import _ffi_call

    class Device:
        def __init__(self, stats):
            self.stats = stats

        def memory_stats(self):
            return self.stats

    shard = jax.ShapeDtypeStruct((10, 100), np.float64)  # 8000 bytes
    monkeypatch.setattr(jax, "local_devices", lambda: [Device({"bytes_limit": 32000})])
    assert _ffi_call.scratch_fits(shard)
    monkeypatch.setattr(jax, "local_devices", lambda: [Device({"bytes_limit": 31999})])
    assert not _ffi_call.scratch_fits(shard)
    monkeypatch.setattr(jax, "local_devices", lambda: [Device(None)])
    assert _ffi_call.scratch_fits(shard)
