"""Holds a CUDA context (and 1 GiB) on GPU argv[1], idle, for argv[2] seconds."""
import ctypes, sys, time
rt = ctypes.CDLL("/usr/local/cuda/lib64/libcudart.so")
assert rt.cudaSetDevice(int(sys.argv[1])) == 0
p = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 30)) == 0
print("idle ctx on", sys.argv[1], flush=True)
time.sleep(float(sys.argv[2]))
