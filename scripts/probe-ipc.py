"""Which XLA GPU allocator settings give buffers that CUDA IPC can share.

MPMD needs the leader process to map the other processes' XLA buffers. Legacy
CUDA IPC (cudaIpcGetMemHandle) works only on cuMemAlloc-style allocations;
memory from the VMM API (cuMemCreate) can be shared only through the handle
types it was created with. This asks the driver, for one JAX buffer under each
allocator setting, what the buffer allows.

    python3 scripts/probe-ipc.py        # on a GPU machine; prints one line each
"""

from __future__ import annotations

import os
import subprocess
import sys

_CHILD = r"""
import ctypes, jax, jax.numpy as jnp
x = jnp.ones((1024, 1024), jnp.float32).block_until_ready()
ptr = x.unsafe_buffer_pointer()
cuda = ctypes.CDLL("libcuda.so.1")
def attr(code, ctype):
    v = ctype(0)
    rc = cuda.cuPointerGetAttribute(ctypes.byref(v), code, ctypes.c_uint64(ptr))
    return v.value if rc == 0 else f"error {rc}"
# CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE = 10,
# CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES = 14 (1: POSIX fd, 8: fabric)
# Where the buffer sits in its allocation (what MPMD exports: the allocation,
# plus the offset), for it and for a second buffer allocated after it.
y = jnp.ones((4096, 4096), jnp.float32).block_until_ready()
def where(p):
    base, size = ctypes.c_uint64(0), ctypes.c_size_t(0)
    rc = cuda.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(p))
    return f"offset {p - base.value} of {size.value}" if rc == 0 else f"error {rc}"
print("legacy_ipc", attr(10, ctypes.c_int), "handle_types", attr(14, ctypes.c_uint64),
      "x", where(ptr), "y", where(y.unsafe_buffer_pointer()), "jax", jax.__version__)
"""

SETTINGS = [
    {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
    {"XLA_PYTHON_CLIENT_PREALLOCATE": "true", "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.1"},
    {"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"},
    {"XLA_PYTHON_CLIENT_ALLOCATOR": "cuda_async"},
]


def main() -> None:
    for setting in SETTINGS:
        env = {k: v for k, v in os.environ.items() if not k.startswith("XLA_PYTHON_CLIENT")}
        env.update(setting)
        env["CUDA_VISIBLE_DEVICES"] = "0"
        out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                             text=True, timeout=120)
        line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-300:]
        print(setting, "->", line, flush=True)


if __name__ == "__main__":
    main()
