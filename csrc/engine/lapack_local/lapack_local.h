/* lapack-local: the local model (engine/engine.h, JMG_MODEL_LOCAL) on CPU
 * devices, over the CPU platform's communicators: the threads of one
 * process (comm/comm_threads.c) or the processes of one node, one per
 * device (comm/comm_processes.c). Internal to engine/lapack_local/.
 *
 * Its routines are the local model's one-device path
 * (engine/local_gather/: rank 0 gathers A over the communicator, the
 * one-device engine runs there, results go back), with LAPACK on rank 0
 * (jmg_lapack_one_engine, one.c: the LAPACK engine's work in place on the
 * gathered matrix). cusolverdn-local is the same path on GPUs. It is the
 * CPU stand-in for the GPU engines of the local model: what it is for is
 * running everything above the engine (the Python layer's ids, the plan,
 * the executor, Π, the grid moves, the ops' local steps) on a machine
 * without GPUs; it is not fast (rank 0 does all the work, and the others
 * wait for it within JAXMG_RENDEZVOUS_TIMEOUT). */
#ifndef JMG_ENGINE_LAPACK_LOCAL_LAPACK_LOCAL_H
#define JMG_ENGINE_LAPACK_LOCAL_LAPACK_LOCAL_H

#include "engine/engine.h"

/* LAPACK on one device's whole matrix, in place (one.c). */
extern const jmg_engine jmg_lapack_one_engine;

#endif
