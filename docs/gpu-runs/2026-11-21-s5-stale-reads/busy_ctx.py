"""Keeps GPU argv[1] busy (memsets of 1 GiB, back to back) for argv[2] seconds."""
import ctypes, sys, time
rt = ctypes.CDLL("/usr/local/cuda/lib64/libcudart.so")
assert rt.cudaSetDevice(int(sys.argv[1])) == 0
p = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 30)) == 0
print("busy ctx on", sys.argv[1], flush=True)
end = time.time() + float(sys.argv[2])
while time.time() < end:
    for _ in range(50):
        rt.cudaMemsetAsync(p, 1, ctypes.c_size_t(1 << 30), None)
    rt.cudaDeviceSynchronize()
