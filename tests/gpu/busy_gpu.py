"""Keeps the one GPU it sees busy: back-to-back elementwise passes over half a
GiB, from a process of its own, for argv[1] seconds. Prints "busy" once its
first passes are done. Used by test_gpu_shared_gpus.py (launched with
CUDA_VISIBLE_DEVICES set to one GPU)."""

import sys
import time

import jax
import jax.numpy as jnp

x = jnp.zeros(1 << 27, jnp.float32)
step = jax.jit(lambda v: v + 1.0)
x = step(x).block_until_ready()
print("busy", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(50):  # queued back to back: the GPU never idles
        x = step(x)
    x.block_until_ready()
