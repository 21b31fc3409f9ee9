/* The emulation's streams and events (tests/emu/emu_cuda.cc).
 *
 * By default every emulated call runs at once, in the order the host
 * issues it. After emu_streams_defer(seed) (tiles_main.c, per case) or
 * emu_set_async(seed) (main.c's EMU_ASYNC), seed non-zero, the
 * asynchronous calls (kernel launches, their arguments read when issued;
 * copies, memsets, cuBLAS and cuSOLVER calls, their scalars read when
 * issued; event records, waits) are queued on their stream instead and
 * run only when the host synchronizes (cudaStreamSynchronize,
 * cudaStreamDestroy, a cudaMemcpyAsync to the host, which is pageable
 * memory's): one item at a time, from the stream of the highest priority
 * among those whose next item may run (a wait for an event runs once the
 * record it names has run). Each stream draws a random priority (the
 * seed's), and draws again, now and then, after it ran an item: so a
 * stream may run far ahead of the others, or starve behind them, as far as
 * stream order and events allow and no further; a kernel's blocks run in
 * a shuffled order. Work that a missing event fails to order runs in
 * either order depending on the seed. Work left queued that can never run
 * (a wait for a record that cannot run) aborts the program. A launch or a
 * record on another GPU's stream (cudaStreamCreateWithFlags's) is refused;
 * an event is freed once no queued record or wait names it. The
 * synchronous cudaMemcpy runs at once, ordered with no stream (stricter
 * than the legacy default stream). cudaEventElapsedTime's "milliseconds"
 * are the number of queued items run between the two records (a logical
 * clock; 0 when every call runs at once). */
#ifndef JMG_TESTS_EMU_STREAMS_H
#define JMG_TESTS_EMU_STREAMS_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
#include <functional>

/* f on stream s: at once, or queued (emu_streams_defer). */
void emu_submit(cudaStream_t s, std::function<void()> f);

/* A cuBLAS or cuSOLVER handle's stream (cublasSetStream,
 * cusolverDnSetStream); emu_stream_of aborts for a handle never bound. */
void emu_bind(const void *handle, cudaStream_t s);
cudaStream_t emu_stream_of(const void *handle);

extern "C" {
#endif

/* seed 0: every call at once (the default); else deferred, scheduled by
 * the seed. Only between calls: nothing may be queued. */
void emu_streams_defer(unsigned seed);

/* main.c's EMU_ASYNC: emu_streams_defer(seed) for the whole run. */
void emu_set_async(unsigned long seed);

/* How many times the scheduler has picked among two or more streams that
 * could run (0 at once: proof that the schedule interleaved). */
unsigned long emu_streams_choices(void);

#ifdef __cplusplus
}
#endif

#endif
