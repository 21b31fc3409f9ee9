"""The ops' cores, one module per op, knowing nothing of any API's conventions.

Each holds: ``shard`` (one shard's part around the FFI call: padding, the
solver's conjugations, the status), ``local`` (the differentiable local core,
its derivative rules included, for one device's rows inside any shard_map; a
``jaxmg._src._ffi_call.Call`` says its geometry, axes and job) and
``over_mesh`` (``local`` mapped over a whole mesh, jitted, for a matrix whose
rows are sharded as a ``RowSharding`` says). They take and return plain
values: ``(x, status)`` (potrs, lu_solve), ``(inverse_rows, status)``, ``(w, V, status)`` with
the status an int32 scalar; how an API names, checks, orders and packs them
is its adapter's business (jaxmg._src.api). The linear solves (potrs,
lu_solve) share their ``local``, ``local_work`` and ``over_mesh``: ``_solve``
makes them from each op's ``shard``, A v and transposed solve.
"""
