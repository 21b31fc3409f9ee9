"""The sizes of one call and its padding: how N splits into shards and
tiles (``Geometry``), which T_A a call runs with and which engine takes it
(``choose_geometry``, asked of the C library before anything is traced),
and the padding of shards and replicated arrays to whole tiles and back.

Conventions. A shard of A is ``r`` rows of the N x N matrix, row-major. The C
library reads it column-major: since A is Hermitian, those are the columns of
conj(A). The ops account for the conjugation on the right-hand side and the
outputs.

Padding. cuSOLVERMg's 1D block-cyclic layout needs every shard to be a whole
number of tiles. When ``r`` is not a multiple of T_A, each shard is padded to
``rp`` rows (the next multiple) with rows and columns of the identity (scaled
for syevd), placed at the end of every shard: the padded matrix is a symmetric
permutation of diag(A, c*I), so the answer for A is read off exactly.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxmg._src import _checks, _native


@dataclass(frozen=True)
class Geometry:
    """Sizes of one call: N over ``nparts`` shards of ``r`` rows, padded to
    ``rp``; the engine the C library's check chose for them ("" when not
    asked: no library for the platform) and whether it runs in the local
    model (``local``, the C library's engine table's answer: its calls carry
    a communicator id per group; _native.engine_model); and the precision of
    a solve (potrs, lu_solve: "exact" or "mixed", the FFI attribute
    ``precision``), which the engine was chosen for and which every solve of
    the call's rules runs in too (core/_solve.py)."""

    n: int
    nparts: int
    tile: int  # the T_A given to the solver
    r: int
    rp: int
    engine: str = ""
    precision: str = "exact"
    local: bool = False

    @property
    def padded(self) -> bool:
        return self.rp != self.r

    @property
    def n_padded(self) -> int:
        return self.nparts * self.rp


def geometry(op: str, n: int, nparts: int, tile: int, pad: bool) -> Geometry:
    """The call's sizes. A T_A larger than the shard is reduced to the shard
    size: both mean one tile per device, and the smaller needs no padding."""
    r = n // nparts
    tile = min(tile, r)
    rp = -(-r // tile) * tile
    if rp != r and not pad:
        raise ValueError(
            f"jaxmg.{op}: the shard size N/devices = {r} is not a multiple of "
            f"T_A={tile}; pass pad=True or choose a T_A that divides {r}"
        )
    return Geometry(n=n, nparts=nparts, tile=tile, r=r, rp=rp)


# Public functions named otherwise than the C library's op they run (the
# engine check asks by the op's name).
SOLVER_OF_FORM = {"eigh_generalized": "sygvd"}


@dataclass(frozen=True)
class Problem:
    """What the engine check is asked about, the tile aside: the op as the
    caller named it and the C library's op that runs it, N over ``nparts``
    devices of ``platform`` ("cpu" or "CUDA") spanning ``nodes`` hosts."""

    op: str
    n: int
    nparts: int
    dtype: np.dtype
    platform: str
    nodes: int = 1
    precision: str = "exact"

    @property
    def solver(self) -> str:
        base = self.op.removesuffix("_shardmap_ctx")  # the ctx forms run the same ops
        return SOLVER_OF_FORM.get(base, base)

    @property
    def where(self) -> str:
        """Where the call runs, for an error message."""
        nodes = f" over {self.nodes} nodes" if self.nodes > 1 else ""
        return f"on {self.nparts} {self.platform} device(s){nodes}"

    @property
    def precision_note(self) -> str:
        """The precision, for an error message, where it is not exact."""
        return f' with precision="{self.precision}"' if self.precision != "exact" else ""

    @property
    def hint(self) -> str:
        """What to do instead, for an error message, where the groups span
        nodes."""
        if self.nodes == 1:
            return ""
        return (". The devices that solve one matrix span several nodes: only cuSOLVERMp "
                "runs such a group (pip install \"jaxmg[cuda13]\", GPUs); or shard A's rows "
                "over an axis within a node (e.g. P('T', None) on a mesh ('S', 'T') with 'T' "
                "within nodes), so that each node solves its own copy")

    def ask(self, g: Geometry) -> _native.EngineChoice | None:
        """The C library's engine check for ``g`` (None: no library loaded)."""
        return _native.engine_choice(self.platform, self.solver, self.nparts, self.dtype.name,
                                     g.rp * self.nparts, g.tile, nodes=self.nodes,
                                     precision=self.precision)


def choose_geometry(op: str, n: int, nparts: int, dtype: np.dtype, T_A: Any,
                    pad: bool, platform: str, nodes: int = 1,
                    precision: str = "exact") -> Geometry:
    """The call's geometry, with T_A checked against the engines before
    anything is traced: the C library says which engine would run the call
    (engine/engine.h, jmg_engine_check: every engine's limits live in its
    ``supports``; ``nodes``: the most nodes a group spans). ``pad``: whether
    shards may be padded to whole tiles (else T_A must divide them, and a
    T_A left out is chosen so). An explicit T_A that no engine takes is a
    ValueError naming each engine's reason; left out, the default
    (``_checks.default_tile``) with the widest tiles an engine runs
    (``_checks.tile_caps``), widened where the engine would lay A out in much
    narrower blocks (``_widened``). The engine chosen is kept in the
    geometry (an engine of the local model changes the call's attributes),
    and so is ``precision`` (a solve's, checked by
    ``_checks.check_precision``: only engines with a mixed-precision routine
    take "mixed")."""
    problem = Problem(op=op, n=n, nparts=nparts, dtype=np.dtype(dtype), platform=platform,
                      nodes=nodes, precision=precision)
    if T_A is not None:
        return _given_tile(problem, _checks.check_tile(op, T_A), pad)
    return _default_tile(problem, pad)


def _given_tile(problem: Problem, tile: int, pad: bool) -> Geometry:
    """The geometry of a T_A the caller gave, or a ValueError naming why no
    engine takes it."""
    g = geometry(problem.op, problem.n, problem.nparts, tile, pad)
    choice = problem.ask(g)
    if choice is not None and not choice.ok:
        raise ValueError(
            f"jaxmg.{problem.op}: T_A={tile} cannot run N={problem.n} {problem.dtype.name} "
            f"{problem.where}{problem.precision_note}: {choice.answer}{problem.hint}"
        )
    return _with_engine(g, choice, problem.precision)


def _default_tile(problem: Problem, pad: bool) -> Geometry:
    """The geometry of a T_A left out: the default tile under the widest cap
    an engine takes, or a ValueError with the first engine's reason."""
    first = None
    for cap in _checks.tile_caps():
        tile = _checks.default_tile(problem.n, problem.nparts, not pad, cap)
        g = geometry(problem.op, problem.n, problem.nparts, tile, pad)
        choice = problem.ask(g)
        if choice is None or choice.ok:
            return (_widened(problem, g, choice) if pad
                    else _with_engine(g, choice, problem.precision))
        first = first or choice.answer
    raise ValueError(
        f"jaxmg.{problem.op}: no engine runs N={problem.n} {problem.dtype.name} "
        f"{problem.where}{problem.precision_note}: {first}{problem.hint}"
    )


def _with_engine(g: Geometry, choice: _native.EngineChoice | None,
                 precision: str = "exact") -> Geometry:
    """g with the engine the check chose and its model (as it is where
    nothing was asked) and the solve's precision."""
    g = dataclasses.replace(g, precision=precision)
    if choice is None:
        return g
    return dataclasses.replace(g, engine=choice.answer, local=choice.local)


def unpadded_geometry(op: str, solver: str, what: str, m: int, n: int, nparts: int,
                      dtype: np.dtype, T_A: Any, platform: str, nodes: int = 1) -> Geometry:
    """The sizes of an op of an M x N A that is never padded (gesvd, qr):
    ``nparts`` shards of m / nparts rows, T_A (checked; one tile per shard
    when left out: the engines that run these ops take no tiles), and the
    engine the C library's check chooses for ``solver`` over the M x N A (M
    included: a library's 32-bit sizes), asked before anything is traced.
    None is a ValueError naming each engine's reason; ``what`` names the
    problem in it ("a 40 x 8 float32 SVD")."""
    r = m // nparts
    tile = r if T_A is None else min(_checks.check_tile(op, T_A), r)
    g = Geometry(n=m, nparts=nparts, tile=tile, r=r, rp=r)
    choice = _native.engine_choice(platform, solver, nparts, dtype.name, n, tile,
                                   nodes=nodes, m=m)
    if choice is not None and not choice.ok:
        where = Problem(op=op, n=n, nparts=nparts, dtype=np.dtype(dtype), platform=platform,
                        nodes=nodes).where
        raise ValueError(f"jaxmg.{op}: no engine runs {what} {where}: {choice.answer}")
    return _with_engine(g, choice)


def _widened(problem: Problem, g: Geometry, choice: _native.EngineChoice | None) -> Geometry:
    """g, or where the engine would lay A out in blocks much narrower than
    g's tiles (cuSOLVERMp's syevd takes powers of two that divide the shard:
    4 for a shard of 1500 rows; the C library says which blocks: engine.h's
    ``block``), the geometry padded to a power-of-two tile that the engine
    takes whole, with the fewest padding rows (then the widest tile)."""
    if choice is None or not choice.ok or choice.block >= min(g.tile, _checks.tile_caps()[-1]):
        return _with_engine(g, choice, problem.precision)
    best, best_choice = g, choice
    for cap in _checks.tile_caps():
        g2 = geometry(problem.op, problem.n, problem.nparts, cap, True)
        c2 = problem.ask(g2)
        if c2 is None or not c2.ok or c2.block < g2.tile:
            continue
        if best is g or g2.rp < best.rp:
            best, best_choice = g2, c2
    return _with_engine(best, best_choice, problem.precision)


# --- padding ------------------------------------------------------------------------------


def pad_shard(a: jax.Array, g: Geometry, shard: jax.Array, diag: Any) -> jax.Array:
    """A shard (r x N) -> padded shard (rp x N'), ``diag`` on the new diagonal."""
    if not g.padded:
        return a
    extra = g.rp - g.r
    a = a.reshape(g.r, g.nparts, g.r)
    a = jnp.pad(a, ((0, extra), (0, 0), (0, extra)))
    a = a.reshape(g.rp, g.n_padded)
    rows = jnp.arange(g.r, g.rp)
    return a.at[rows, shard * g.rp + rows].set(jnp.asarray(diag, a.dtype))


def unpad_shard(a: jax.Array, g: Geometry) -> jax.Array:
    """Padded shard (rp x N') -> shard (r x N)."""
    if not g.padded:
        return a
    a = a.reshape(g.rp, g.nparts, g.rp)[: g.r, :, : g.r]
    return a.reshape(g.r, g.n)


def pad_rows(x: jax.Array, g: Geometry) -> jax.Array:
    """A replicated (N x k) array -> (N' x k), zero rows at the end of each shard."""
    if not g.padded:
        return x
    k = x.shape[1]
    x = x.reshape(g.nparts, g.r, k)
    x = jnp.pad(x, ((0, 0), (0, g.rp - g.r), (0, 0)))
    return x.reshape(g.n_padded, k)


def unpad_rows(x: jax.Array, g: Geometry) -> jax.Array:
    """(N' x k) -> (N x k): drops the padding rows."""
    if not g.padded:
        return x
    k = x.shape[1]
    return x.reshape(g.nparts, g.rp, k)[:, : g.r, :].reshape(g.n, k)


def unpad_info(info: jax.Array, g: Geometry) -> jax.Array:
    """Maps a failing leading minor's order from padded to original numbering.
    Padding rows are identity rows and never fail."""
    if not g.padded:
        return info
    p = jnp.maximum(info, 1) - 1
    original = (p // g.rp) * g.r + (p % g.rp) + 1
    return jnp.where(info > 0, original, info).astype(info.dtype)
