"""How fast GPU-to-GPU copies run on XLA's own buffers, against cudaMalloc'd
ones, and whether the driver lets the other GPUs reach XLA's memory
(cuMemGetAccess). The layout permutation copies between XLA's buffers.

    python3 scripts/probe-peer.py      # on a machine with 2 or more GPUs
"""

from __future__ import annotations

import ctypes
import glob
import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

BYTES = 1 << 30


def cudart() -> ctypes.CDLL:
    found = sorted(glob.glob(os.path.join(os.path.dirname(jax.__file__), "..", "nvidia",
                                          "cu*", "lib", "libcudart.so*")))
    return ctypes.CDLL(found[0] if found else "libcudart.so")


rt = cudart()
cu = ctypes.CDLL("libcuda.so.1")


def check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{what}: error {rc}")


def timed_copy(dst: int, ddev: int, src: int, sdev: int, reps: int = 5) -> float:
    """GB/s of cudaMemcpyPeerAsync of BYTES, median of reps, on sdev's stream."""
    check(rt.cudaSetDevice(sdev), "cudaSetDevice")
    stream, e0, e1 = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    check(rt.cudaStreamCreate(ctypes.byref(stream)), "cudaStreamCreate")
    check(rt.cudaEventCreate(ctypes.byref(e0)), "cudaEventCreate")
    check(rt.cudaEventCreate(ctypes.byref(e1)), "cudaEventCreate")
    times = []
    for _ in range(reps + 1):
        check(rt.cudaEventRecord(e0, stream), "record")
        check(rt.cudaMemcpyPeerAsync(ctypes.c_void_p(dst), ddev, ctypes.c_void_p(src), sdev,
                                     ctypes.c_size_t(BYTES), stream), "cudaMemcpyPeerAsync")
        check(rt.cudaEventRecord(e1, stream), "record")
        check(rt.cudaEventSynchronize(e1), "sync")
        ms = ctypes.c_float()
        check(rt.cudaEventElapsedTime(ctypes.byref(ms), e0, e1), "elapsed")
        times.append(ms.value)
    times = sorted(times[1:])
    return BYTES / (times[len(times) // 2] * 1e-3) / 1e9


def access(ptr: int, device: int) -> int:
    """cuMemGetAccess flags of device for the VMM memory at ptr (3: read-write),
    or -rc when the driver refuses (not VMM memory)."""
    flags = ctypes.c_ulonglong()

    class Loc(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]

    rc = cu.cuMemGetAccess(ctypes.byref(flags), ctypes.byref(Loc(1, device)),
                           ctypes.c_uint64(ptr))
    return int(flags.value) if rc == 0 else -rc


def main() -> None:
    gpus = jax.devices("gpu")
    assert len(gpus) >= 2, "needs 2 GPUs"
    xs = [jax.device_put(jnp.zeros(BYTES // 4, jnp.float32), g).block_until_ready()
          for g in gpus[:2]]
    p0, p1 = (x.unsafe_buffer_pointer() for x in xs)
    print("XLA buffer on GPU 0: access of GPU 0", access(p0, 0), "of GPU 1", access(p0, 1))
    print(f"XLA buffers GPU0->GPU1: {timed_copy(p1, 1, p0, 0):.0f} GB/s")
    raw = []
    for d in (0, 1):
        check(rt.cudaSetDevice(d), "cudaSetDevice")
        p = ctypes.c_void_p()
        check(rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(BYTES)), "cudaMalloc")
        raw.append(p.value)
    for d, o in ((0, 1), (1, 0)):
        check(rt.cudaSetDevice(d), "cudaSetDevice")
        rc = rt.cudaDeviceEnablePeerAccess(o, 0)
        if rc not in (0, 704):  # 704: already enabled
            check(rc, "cudaDeviceEnablePeerAccess")
    print(f"cudaMalloc buffers GPU0->GPU1 (peer access on): "
          f"{timed_copy(raw[1], 1, raw[0], 0):.0f} GB/s")
    print(f"XLA buffers GPU0->GPU1 after peer access on: {timed_copy(p1, 1, p0, 0):.0f} GB/s")
    # Grant both GPUs read-write access to both XLA allocations (VMM only).

    class Desc(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int), ("flags", ctypes.c_ulonglong)]

    for p in (p0, p1):
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        check(cu.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size),
                                         ctypes.c_uint64(p)), "cuMemGetAddressRange")
        descs = (Desc * 2)(Desc(1, 0, 3), Desc(1, 1, 3))
        rc = cu.cuMemSetAccess(base, size, descs, ctypes.c_size_t(2))
        print("cuMemSetAccess on an XLA allocation:", rc)
    print("XLA buffer on GPU 0 now: access of GPU 1", access(p0, 1))
    print(f"XLA buffers GPU0->GPU1 with access granted: {timed_copy(p1, 1, p0, 0):.0f} GB/s")


if __name__ == "__main__":
    main()
