"""JAXMG_TRACE=1: the leader of each call prints one line to stderr with the
time of each step (csrc/common/trace.c); nothing without it."""

import re

import numpy as np
from jax.sharding import PartitionSpec as P

import jaxmg
import jaxmg_testing as jt

SPECS = (P("x", None), P(None, None))


def test_trace_prints_each_step_of_a_call(mesh, rng, capfd, monkeypatch):
    a = jt.make_hpd(rng, 16, np.float64)
    b = jt.make_rhs(rng, 16, 3, np.float64)
    monkeypatch.setenv("JAXMG_TRACE", "1")
    x = np.asarray(jaxmg.potrs(jt.shard_rows(a, mesh), b, 2, mesh, SPECS))
    assert np.linalg.norm(a @ x - b) < 1e-12 * np.linalg.norm(b)
    err = capfd.readouterr().err
    ms = r"\d+\.\d\d ms"
    line = (rf"jaxmg trace potrs float64 N=16 T_A=2 nrhs=3 on 4: finite check {ms}, scratch {ms}, "
            rf"permute apart {ms}, "
            rf"outputs {ms}, total {ms}")
    assert len(re.findall(line, err)) == 1, err


def test_no_trace_without_the_variable(mesh, rng, capfd, monkeypatch):
    monkeypatch.delenv("JAXMG_TRACE", raising=False)
    a = jt.make_hpd(rng, 16, np.float64)
    jaxmg.potri(jt.shard_rows(a, mesh), 2, mesh, (P("x", None),)).block_until_ready()
    monkeypatch.setenv("JAXMG_TRACE", "0")
    jaxmg.potri(jt.shard_rows(a, mesh), 2, mesh, (P("x", None),)).block_until_ready()
    assert "jaxmg trace" not in capfd.readouterr().err
