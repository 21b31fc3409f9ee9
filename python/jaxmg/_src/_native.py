"""Loading the native libraries and registering their FFI targets.

``libjaxmg_cpu.so`` (no CUDA dependency) is always loaded; its LAPACK engine
gets SciPy's LAPACK routines here, from ``scipy.linalg.cython_lapack``, as
jaxlib does, so no system LAPACK is needed. ``libjaxmg_cuda.so`` is loaded
when it was built and its CUDA libraries can be found. Both register the same
target names, for platforms "cpu" and "CUDA"; registration is a table.

The cuSOLVERMp engine's libraries, libnccl.so.2 and libcusolverMp.so.0, are
opened by the CUDA library at their first use, never at load: installs
without them (CPU only, or GPUs without the ``cuda13`` extra) import and work.
Where to find them is told to the CUDA library when it loads (_library_paths):
NVIDIA's wheels (``nvidia-nccl-cu13``, ``nvidia-cusolvermp-cu13``) install
them outside any search path of the dynamic loader.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import pathlib
from typing import Any, Callable, NamedTuple

import jax

_HERE = pathlib.Path(__file__).resolve().parent.parent

# Target name -> exported handler, per library. One row per op.
OPS = ("potrs", "potri", "syevd", "lu_solve", "gesvd", "sygvd", "qr")
_CPU_HANDLERS = {f"jaxmg_{op}": f"jaxmg_{op}_cpu" for op in OPS}
_CUDA_HANDLERS = {f"jaxmg_{op}": f"jaxmg_{op}_cuda" for op in OPS}

# The LAPACK routines the CPU engine uses, by SciPy's names; dsterf, dstemr,
# dstebz and dstein serve the host tridiagonal eigensolver (both libraries').
_LAPACK_ROUTINES = tuple(
    f"{p}{r}" for p in "sdcz" for r in ("potrf", "potrs", "potri", "getrf", "getrs")
) + ("ssyevd", "dsyevd", "cheevd", "zheevd") + tuple(f"{p}gesdd" for p in "sdcz") + (
    "ssygvd", "dsygvd", "chegvd", "zhegvd") + tuple(
    f"{p}geqrf" for p in "sdcz") + ("sorgqr", "dorgqr", "cungqr", "zungqr") + (
    "dsterf", "dstemr", "dstebz", "dstein")


# The loaded libraries by platform ("cpu", "CUDA"), for engine_check.
_LIBS: dict[str, ctypes.CDLL] = {}


class NativeLibraryError(ImportError):
    """The jaxmg native library could not be loaded."""


def _capsule_pointer(capsule: object) -> int:
    """The address held by a PyCapsule (SciPy exports LAPACK as capsules)."""
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    name = api.PyCapsule_GetName(capsule)
    return api.PyCapsule_GetPointer(capsule, name)


def _find_library(stem: str) -> pathlib.Path | None:
    path = _HERE / f"lib{stem}.so"
    return path if path.exists() else None


# Where NVIDIA's wheels put the libraries, under site-packages/nvidia/.
_NCCL_IN_WHEEL = "nccl/lib/libnccl.so.2"
_CUSOLVERMP_IN_WHEEL = "cu13/lib/libcusolverMp.so.0"


def _in_nvidia_wheels(relative: str) -> str | None:
    """The file ``nvidia/<relative>`` of an installed NVIDIA wheel, or None
    (``nvidia`` is a namespace package: one folder per site directory)."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = pathlib.Path(folder) / relative
        if path.exists():
            return str(path)
    return None


def _loaded(soname: str) -> str | None:
    """The file of a library this process has already loaded under that
    name (jaxlib's CUDA plugin loads libnccl.so.2), so that jaxmg uses the
    same one rather than a second copy."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rsplit(None, 1)[-1] if line.strip() else ""
                if path.endswith("/" + soname):
                    return path
    except OSError:
        pass
    return None


def nccl_path() -> str | None:
    """libnccl.so.2 as jaxmg will open it: the one already loaded in this
    process, else the nvidia-nccl-cu13 wheel's, else None (the loader's
    search by soname)."""
    return _loaded("libnccl.so.2") or _in_nvidia_wheels(_NCCL_IN_WHEEL)


def cusolvermp_path() -> str | None:
    """libcusolverMp.so.0 as jaxmg will open it: JAXMG_CUSOLVERMP_LIB (a
    path, taken as it is), else the nvidia-cusolvermp-cu13 wheel's (the
    ``cuda13`` extra), else None (the loader's search by soname)."""
    return os.environ.get("JAXMG_CUSOLVERMP_LIB") or _in_nvidia_wheels(_CUSOLVERMP_IN_WHEEL)


# What libjaxmg_cuda.so links (its DT_NEEDED, CUDA 13's sonames), in
# dependency order.
_CUDA_LINKED = ("libcudart.so.13", "libcublas.so.13", "libcusolver.so.12",
                "libcusolverMg.so.12")


def cuda_library_paths(loaded: Callable[[str], str | None] | None = None) -> list[str]:
    """The CUDA libraries libjaxmg_cuda.so links that this process has not
    loaded yet (``loaded``: soname -> the file this process loaded under it,
    or None; default: read from /proc/self/maps), where they are found: the
    folder JAX loaded its cuSOLVER from (jaxlib's CUDA plugin loads it;
    cuSOLVERMg is one JAX never loads), else NVIDIA's wheels
    (``jax[cuda13]``'s ``nvidia-*``, wherever they are on sys.path). Those
    found in neither are left out: the library's RUNPATH
    (``$ORIGIN/../nvidia/cu13/lib``, then the toolkit it was built against)
    decides for them."""
    loaded = loaded or _loaded
    jax_cusolver = loaded("libcusolver.so.12")
    paths = []
    for soname in _CUDA_LINKED:
        if loaded(soname):
            continue
        beside = pathlib.Path(jax_cusolver).parent / soname if jax_cusolver else None
        path = (str(beside) if beside is not None and beside.exists()
                else _in_nvidia_wheels(f"cu13/lib/{soname}"))
        if path is not None:
            paths.append(path)
    return paths


def _preload_cuda_libraries() -> None:
    """Loads ``cuda_library_paths()`` before libjaxmg_cuda.so, so that the
    dynamic loader finds them by soname whatever the install's layout. One
    that fails to load is left to the RUNPATH; a failure there is load()'s
    to report."""
    for path in cuda_library_paths():
        try:
            ctypes.CDLL(path)
        except OSError:
            pass


def _set_library_paths(lib: ctypes.CDLL) -> None:
    """Tells the CUDA library where libnccl and libcusolverMp are, before
    anything opens them. AttributeError when the library lacks the entry
    points (one built before the cuSOLVERMp engine)."""
    for symbol, path in (("jaxmg_nccl_set_path", nccl_path()),
                         ("jaxmg_cusolvermp_set_path", cusolvermp_path())):
        fn = getattr(lib, symbol)
        fn.argtypes = [ctypes.c_char_p]
        fn.restype = ctypes.c_int
        if fn(path.encode() if path else None) != 0:
            raise NativeLibraryError(f"jaxmg: {symbol}({path!r}) failed")


def _register_lapack(lib: ctypes.CDLL, symbol: str) -> None:
    """Hands SciPy's LAPACK routines to ``lib`` through its exported
    ``symbol`` (each library links its own routine table). AttributeError
    when the library lacks it."""
    from scipy.linalg import cython_lapack

    capi = cython_lapack.__pyx_capi__
    register = getattr(lib, symbol)
    register.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    register.restype = ctypes.c_int
    for name in _LAPACK_ROUTINES:
        rc = register(name.encode(), _capsule_pointer(capi[name]))
        if rc != 0:
            raise NativeLibraryError(f"jaxmg: registering LAPACK {name} failed ({rc})")


def _register_targets(lib: ctypes.CDLL, table: dict[str, str], platform: str) -> None:
    for target, symbol in table.items():
        handler = getattr(lib, symbol)
        jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(handler), platform=platform)


@functools.cache
def load() -> dict[str, bool]:
    """Loads the libraries once and registers their targets.

    Returns which platforms are available, e.g. ``{"cpu": True, "CUDA": False}``.
    """
    cpu_path = _find_library("jaxmg_cpu")
    if cpu_path is None:
        raise NativeLibraryError(
            f"jaxmg: libjaxmg_cpu.so not found in {_HERE}; install jaxmg with "
            "`pip install .` so that the C library is built"
        )
    cpu = ctypes.CDLL(str(cpu_path))
    _register_lapack(cpu, "jaxmg_cpu_register_lapack")
    _register_targets(cpu, _CPU_HANDLERS, "cpu")
    _LIBS["cpu"] = cpu
    platforms = {"cpu": True, "CUDA": False}

    cuda_path = _find_library("jaxmg_cuda")
    if cuda_path is not None:
        try:
            _preload_cuda_libraries()
            cuda = ctypes.CDLL(str(cuda_path))
        except OSError as e:
            # Built, but its CUDA libraries are missing here: fine on a
            # machine without GPUs, an error where GPUs would use it.
            if _has_gpus():
                raise NativeLibraryError(
                    f"jaxmg: libjaxmg_cuda.so could not be loaded: {e}"
                ) from e
            cuda = None
        if cuda is not None:
            try:
                _set_library_paths(cuda)
                _register_lapack(cuda, "jaxmg_cuda_register_lapack")
            except AttributeError as e:
                # A libjaxmg_cuda.so older than this package: as above.
                if _has_gpus():
                    raise NativeLibraryError(
                        f"jaxmg: libjaxmg_cuda.so is older than this package ({e}); "
                        "reinstall jaxmg"
                    ) from e
                cuda = None
        if cuda is not None:
            _register_targets(cuda, _CUDA_HANDLERS, "CUDA")
            _LIBS["CUDA"] = cuda
            platforms["CUDA"] = True
    elif _has_gpus():
        raise NativeLibraryError(
            "jaxmg: JAX sees GPUs but jaxmg was built without CUDA (no "
            "libjaxmg_cuda.so): rebuild it on a machine with the CUDA toolkit"
        )
    return platforms


def platform_of(device_platform: str) -> str:
    """The C library's platform name for a JAX device's platform."""
    return "cpu" if device_platform == "cpu" else "CUDA"


# The solves' precisions (precision="exact" / "mixed") as the C library
# numbers them (csrc/common/op.h, jmg_precision; the FFI attribute
# "precision").
PRECISIONS = {"exact": 0, "mixed": 1}


def engine_check(platform: str, op: str, nparts: int, dtype: str, n: int,
                 tile: int, nodes: int = 1, m: int | None = None,
                 precision: str = "exact") -> tuple[bool, str] | None:
    """Which engine of ``platform`` would run this call (the C library's own
    choice, engine/engine.h's jmg_engine_check, with the JAXMG_* settings of
    now): ``(True, engine)`` or ``(False, why not)``; None when the platform's
    library is not loaded (nothing to ask). ``n`` is the padded order (A's
    columns N for gesvd and qr), ``m`` A's rows M for gesvd's and qr's
    M x N A (None: a square A, M = N), ``tile`` the T_A the call will carry,
    ``nodes`` the hosts the group spans, ``precision`` the solve's ("exact"
    or "mixed": only engines with a mixed-precision routine take "mixed").
    The engines' limits that depend on M (a library's 32-bit sizes) are
    asked here, before anything is traced."""
    choice = engine_choice(platform, op, nparts, dtype, n, tile, nodes, m, precision)
    return None if choice is None else choice[:2]


def _symbol_suffix(platform: str) -> str:
    """How the exports of ``platform``'s library end ("cpu", "cuda")."""
    return "cpu" if platform == "cpu" else "cuda"


def _check_fn(lib: ctypes.CDLL, platform: str, suffix: str = "") -> Any:
    """The library's exported engine check (``suffix`` "_workspace": its
    workspace query), typed: engine/engine.h's jmg_engine_check and
    jmg_engine_workspace through ffi/handler.h's export."""
    fn = getattr(lib, f"jaxmg_engine_check_{_symbol_suffix(platform)}{suffix}")
    head = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int64,
            ctypes.c_int64, ctypes.c_int64, ctypes.c_int]
    if suffix:
        fn.argtypes = head + [ctypes.c_int64, ctypes.c_int, ctypes.c_int,
                              ctypes.POINTER(ctypes.c_size_t), ctypes.c_char_p, ctypes.c_size_t]
    else:
        fn.argtypes = head + [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int64)]
    fn.restype = ctypes.c_int
    return fn


def _rows(m: int | None) -> int:
    """A's rows for the C check: 0 (read there as n) for a square A."""
    return 0 if m is None else int(m)


# The engines' execution models as the C library numbers them
# (csrc/engine/engine.h, jmg_model).
MODELS = ("leader", "local")


def engine_model(platform: str, engine: str) -> str | None:
    """The execution model of ``platform``'s engine named ``engine``, as the
    C library's engine table gives it (engine/engine.h, jmg_engine_model_of):
    "leader" (one participant drives every device of the call) or "local"
    (every participant calls the library on its own shard: the call carries
    a communicator id per group); None when the platform's library is not
    loaded. ValueError for a name that is no engine of the platform."""
    load()
    lib = _LIBS.get(platform)
    if lib is None:
        return None
    fn = getattr(lib, f"jaxmg_engine_model_{_symbol_suffix(platform)}")
    fn.argtypes = [ctypes.c_char_p]
    fn.restype = ctypes.c_int
    model = fn(engine.encode())
    if not 0 <= model < len(MODELS):
        raise ValueError(f"jaxmg: {engine!r} is not an engine of the {platform} library")
    return MODELS[model]


class EngineChoice(NamedTuple):
    """The C library's engine check (engine/engine.h, jmg_engine_check):
    whether an engine runs the call (``ok``), its name or, where none does,
    why not (``answer``), the block size the chosen engine lays A out in
    (``block``: T_A, unless the engine's library cannot take it; 0 when no
    engine was chosen), and whether the chosen engine runs in the local
    model (``local``: see engine_model; False when none was chosen)."""

    ok: bool
    answer: str
    block: int
    local: bool = False


def engine_choice(platform: str, op: str, nparts: int, dtype: str, n: int,
                  tile: int, nodes: int = 1, m: int | None = None,
                  precision: str = "exact") -> EngineChoice | None:
    """engine_check's answer with the chosen engine's block size; None when
    the platform's library is not loaded."""
    load()
    lib = _LIBS.get(platform)
    if lib is None:
        return None
    fn = _check_fn(lib, platform)
    out = ctypes.create_string_buffer(1024)
    block = ctypes.c_int64(0)
    rc = fn(op.encode(), int(nparts), int(nodes), dtype.encode(), _rows(m), int(n),
            int(tile), PRECISIONS[precision], out, len(out), ctypes.byref(block))
    text = out.value.decode(errors="replace")
    if rc < 0:
        raise ValueError(f"jaxmg.{op}: {text}")
    local = rc == 1 and engine_model(platform, text) == "local"
    return EngineChoice(rc == 1, text, int(block.value), local)


def workspace(platform: str, op: str, nparts: int, dtype: str, n: int, tile: int,
              nrhs: int = 1, want_vectors: bool = True,
              nodes: int = 1, m: int | None = None,
              syevd_solver: str = "", precision: str = "exact") -> tuple[int | None, str]:
    """The bytes per device that a call would take from the platform's
    allocator beside its inputs and outputs (the engine's workspace, asked
    of its library now, on this process's current device; engine/engine.h's
    jmg_engine_workspace): ``(bytes, engine)``, or ``(None, why)`` where the
    engine cannot tell ahead of a call (or no library of the platform is
    loaded). ``n``, ``m`` and ``tile`` as in ``engine_check``;
    ``syevd_solver`` for syevd on one GPU: "" the one JAXMG_SYEVD picks,
    "cusolver" or "tridiagonal" (engine/cusolverdn/dn.h); ``precision``
    the solve's ("mixed": the lower-precision copy of A and the refinement's
    vectors too). ValueError when no engine runs the problem or the
    library's query fails."""
    solvers = {"": 0, "cusolver": 1, "tridiagonal": 2}
    if syevd_solver not in solvers:
        raise ValueError(f"jaxmg: syevd_solver must be one of {sorted(solvers)}, "
                         f"got {syevd_solver!r}")
    load()
    lib = _LIBS.get(platform)
    if lib is None:
        return None, f"jaxmg's {platform} library is not loaded"
    fn = _check_fn(lib, platform, "_workspace")
    out = ctypes.create_string_buffer(1024)
    got = ctypes.c_size_t(0)
    rc = fn(op.encode(), int(nparts), int(nodes), dtype.encode(), _rows(m), int(n),
            int(tile), PRECISIONS[precision], int(nrhs), int(bool(want_vectors)),
            solvers[syevd_solver],
            ctypes.byref(got), out, len(out))
    text = out.value.decode(errors="replace")
    if rc < 0:
        raise ValueError(f"jaxmg.memory_estimate: {text}")
    return (int(got.value), text) if rc == 1 else (None, text)


def cusolvermp_available() -> tuple[bool, str]:
    """Whether the cuSOLVERMp engine can run here: ``(True, "")``, or
    ``(False, why)`` (no CUDA library, or libcusolverMp / libnccl could not
    be loaded: the reason names the library and the ``cuda13`` extra).
    Loads libcusolverMp on its first call."""
    load()
    lib = _LIBS.get("CUDA")
    if lib is None:
        return False, ("jaxmg's CUDA library is not loaded (no GPU, or jaxmg was built "
                       "without CUDA)")
    fn = lib.jaxmg_cusolvermp_available
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    fn.restype = ctypes.c_int
    why = ctypes.create_string_buffer(1024)
    ok = fn(why, len(why)) == 1
    return ok, "" if ok else why.value.decode(errors="replace")


# Bytes of one communicator id (NCCL's unique id, and the CPU threads
# communicator's): 16 int64 in attribute comm_id.
COMM_ID_BYTES = 128


def comm_new_id(platform: str, processes: bool = False) -> bytes:
    """A new communicator id of ``platform``'s communicator ("CUDA": NCCL's
    ncclGetUniqueId; "cpu": the lapack-local engine's, the threads
    communicator of this process, or with ``processes`` the one between the
    processes of this node, comm/comm_processes.c, for a group that spans
    processes), through that platform's library, to hand to every
    participant of one group. RuntimeError naming the cause when it cannot
    be made (e.g. libnccl missing)."""
    load()
    lib = _LIBS.get(platform)
    if lib is None:
        raise RuntimeError(f"jaxmg: a communicator id of platform {platform!r} needs "
                           f"jaxmg's {platform} library, which is not loaded")
    fn = (lib.jaxmg_comm_new_id_processes if processes and platform == "cpu"
          else lib.jaxmg_comm_new_id)
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    fn.restype = ctypes.c_int
    out = ctypes.create_string_buffer(COMM_ID_BYTES)
    err = ctypes.create_string_buffer(1024)
    if fn(out, COMM_ID_BYTES, err, len(err)) != 0:
        raise RuntimeError(f"jaxmg: making a communicator id failed: "
                           f"{err.value.decode(errors='replace')}")
    return out.raw


def _has_gpus() -> bool:
    try:
        return len(jax.devices("gpu")) > 0
    except RuntimeError:
        return False
