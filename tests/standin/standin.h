/* The interface between the CPU stand-ins: libnccl.so.2 (nccl.c) finds these in libcuda.so.1
 * (cuda.c) with dlopen(RTLD_NOLOAD) + dlsym, since cudarc loads libcuda with RTLD_LOCAL.
 * Device memory is host memory; a stream is a queue run in order by a worker thread. */
#ifndef STANDIN_H
#define STANDIN_H

#include <stddef.h>

/* Where [p, p + bytes) lies, as cuda.c's allocation table says. */
enum standin_range {
    STANDIN_RANGE_OK = 0,      /* inside one live allocation */
    STANDIN_RANGE_UNKNOWN = 1, /* in no allocation at all (a host pointer, garbage) */
    STANDIN_RANGE_OVERRUN = 2, /* starts in an allocation but runs past its end */
    STANDIN_RANGE_FREED = 3,   /* in an allocation already freed (or being freed) */
};

/* Check a device range. *dev gets the allocation's device, *base and *size the allocation
 * (any may be NULL). */
typedef int (*standin_check_range_fn)(unsigned long long p, size_t bytes, int *dev,
                                      unsigned long long *base, size_t *size);
/* A stream's device, or -1 if `stream` is no stream (NULL means the current context's
 * default stream). */
typedef int (*standin_stream_device_fn)(void *stream);
/* Enqueue a "kernel" on `stream`: fn(arg) runs on the stream's worker in order. Returns a
 * CUresult (0 on success). `name` shows in the stand-in's trace. */
typedef int (*standin_launch_fn)(void *stream, void (*fn)(void *), void *arg, const char *name);
/* The device of the calling thread's current context, or -1 if none. */
typedef int (*standin_current_device_fn)(void);

#define STANDIN_SYM_CHECK_RANGE "standin_cuda_check_range"
#define STANDIN_SYM_STREAM_DEVICE "standin_cuda_stream_device"
#define STANDIN_SYM_LAUNCH "standin_cuda_launch"
#define STANDIN_SYM_CURRENT_DEVICE "standin_cuda_current_device"

#endif
