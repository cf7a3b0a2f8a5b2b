/* libcuda.so.1 stand-in: the CUDA driver entry points cudarc 0.19 calls for ringlab, on the CPU.
 *
 * - STANDIN_GPUS=N fake GPUs (default 2; 0 makes cuInit return CUDA_ERROR_NO_DEVICE).
 * - Device memory is host memory (malloc), kept in an allocation table that the NCCL stand-in
 *   checks every buffer against (standin_cuda_check_range).
 * - Every stream is a FIFO run in order by a worker thread of its own: work completes as soon
 *   as the worker gets to it. Copies from pageable host memory behave as CUDA's do: host to
 *   device takes a copy of the source before returning, device to host returns only once the
 *   copy is done.
 * - "Kernels" are what the NCCL stand-in launches (standin_cuda_launch) and cuLaunchHostFunc.
 *   STANDIN_CUDA_STUCK=k: the k-th kernel of a device never completes (cuStreamQuery says
 *   CUDA_ERROR_NOT_READY forever, cuStreamSynchronize blocks); STANDIN_CUDA_STUCK_DEVICE=d
 *   limits that to device d. STANDIN_CUDA_FAULT=k (and _DEVICE): the k-th kernel faults with
 *   CUDA_ERROR_ILLEGAL_ADDRESS, a sticky error every later call returns, as on a real GPU.
 * - STANDIN_CUDA_POOLS=0: no memory pools, so cudarc allocates with cuMemAlloc_v2/cuMemFree_v2.
 * - STANDIN_TRACE=1 prints every call on stderr.
 *
 * Build: cc -shared -fPIC -O1 -Wall -Werror -pthread -Wl,-soname,libcuda.so.1 -o libcuda.so.1 cuda.c
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "standin.h"

#define EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_UNKNOWN = 999,
};

#define MAXDEV 64
#define CTX_MAGIC 0xC0C7C0C7u
#define STREAM_MAGIC 0x57EA4A11u
#define EVENT_MAGIC 0xE7E47E47u
#define CU_EVENT_DISABLE_TIMING 0x2

/* ---------------------------------------------------------------- configuration, tracing */

static int g_inited;
static int g_ngpus = 2;
static size_t g_mem_bytes = (size_t)80 << 30;
static char g_name[128] = "NVIDIA Stand-in GPU (CPU)";
static int g_stuck_at, g_stuck_dev = -1, g_fault_at, g_fault_dev = -1;
static int g_trace;
static int g_p2p = 1;
static int g_pools = 1;
static long g_ctx_delay_ms; /* a primary context takes this long to create, the first time */
static int g_release_waits; /* the last release of a primary context waits for its streams */
static _Atomic int g_sticky; /* a sticky error (a faulted kernel), 0 if none */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static long env_long(const char *name, long dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    return *end ? dflt : x;
}

static void configure(void) {
    long n = env_long("STANDIN_GPUS", 2);
    g_ngpus = n < 0 ? 0 : n > MAXDEV ? MAXDEV : (int)n;
    long gb = env_long("STANDIN_GPU_MEM_GB", 80);
    g_mem_bytes = (size_t)(gb > 0 ? gb : 80) << 30;
    const char *name = getenv("STANDIN_GPU_NAME");
    if (name && *name) snprintf(g_name, sizeof g_name, "%s", name);
    g_stuck_at = (int)env_long("STANDIN_CUDA_STUCK", 0);
    g_stuck_dev = (int)env_long("STANDIN_CUDA_STUCK_DEVICE", -1);
    g_fault_at = (int)env_long("STANDIN_CUDA_FAULT", 0);
    g_fault_dev = (int)env_long("STANDIN_CUDA_FAULT_DEVICE", -1);
    g_trace = (int)env_long("STANDIN_TRACE", 0);
    g_p2p = (int)env_long("STANDIN_P2P", 1);
    g_pools = (int)env_long("STANDIN_CUDA_POOLS", 1);
    g_ctx_delay_ms = env_long("STANDIN_CUDA_CTX_DELAY_MS", 0);
    g_release_waits = (int)env_long("STANDIN_CUDA_RELEASE_WAITS", 0);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "standin-cuda[%d]: %s\n", (int)getpid(), buf);
}

#define TRACE(...) \
    do { \
        if (g_trace) say(__VA_ARGS__); \
    } while (0)

/* The usual preamble: initialised, no sticky error. */
#define CHECK_READY() \
    do { \
        if (!g_inited) return CUDA_ERROR_NOT_INITIALIZED; \
        int sticky_ = atomic_load(&g_sticky); \
        if (sticky_) return sticky_; \
    } while (0)

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---------------------------------------------------------------- contexts */

struct ctx {
    uint32_t magic;
    int dev;
    int retained;
    struct stream *dflt; /* the NULL stream, made on first use */
};

static struct ctx g_ctx[MAXDEV];
static __thread struct ctx *t_cur;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* contexts, streams, events lists */

static int ctx_ok(const struct ctx *c) {
    for (int i = 0; i < MAXDEV; i++)
        if (c == &g_ctx[i]) return c->magic == CTX_MAGIC;
    return 0;
}

/* ---------------------------------------------------------------- streams */

struct task {
    struct task *next;
    void (*fn)(void *);
    void *arg;
    uint64_t seq;
    int kernel;    /* kernel number on its device, 0 for copies and markers */
    int stuck;     /* never completes */
    int fault;     /* faults: sticky CUDA_ERROR_ILLEGAL_ADDRESS */
    const char *name;
};

struct stream {
    uint32_t magic;
    int dev;
    struct ctx *ctx;
    pthread_mutex_t mu;
    pthread_cond_t work; /* a task arrived, or the stream was destroyed */
    pthread_cond_t done; /* a task completed */
    struct task *head, *tail;
    uint64_t submitted, completed;
    int destroyed;
    struct stream *next_all;
};

static struct stream *g_streams; /* every stream ever made (never freed: events point here) */
static _Atomic int g_kernels[MAXDEV];

static void *worker(void *p) {
    struct stream *s = p;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->destroyed) pthread_cond_wait(&s->work, &s->mu);
        if (!s->head) break;
        struct task *t = s->head;
        pthread_mutex_unlock(&s->mu);
        if (t->stuck) {
            /* A kernel that never completes: this stream stays busy for good. */
            for (;;) sleep(3600);
        }
        if (t->fault) {
            say("kernel #%d (%s) on device %d faults: CUDA_ERROR_ILLEGAL_ADDRESS from now on "
                "(STANDIN_CUDA_FAULT=%d)",
                t->kernel, t->name ? t->name : "?", s->dev, g_fault_at);
            atomic_store(&g_sticky, CUDA_ERROR_ILLEGAL_ADDRESS);
        } else if (!atomic_load(&g_sticky) || !t->kernel) {
            /* After a fault kernels no longer run (the context is lost); copies and markers
             * still complete so that nothing waits forever on them. */
            t->fn(t->arg);
        }
        pthread_mutex_lock(&s->mu);
        s->head = t->next;
        if (!s->head) s->tail = NULL;
        s->completed = t->seq;
        pthread_cond_broadcast(&s->done);
        free(t);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static struct stream *stream_new(struct ctx *c) {
    struct stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->magic = STREAM_MAGIC;
    s->dev = c->dev;
    s->ctx = c;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->done, NULL);
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &at, worker, s) != 0) {
        pthread_attr_destroy(&at);
        free(s);
        return NULL;
    }
    pthread_attr_destroy(&at);
    pthread_mutex_lock(&g_mu);
    s->next_all = g_streams;
    g_streams = s;
    pthread_mutex_unlock(&g_mu);
    return s;
}

/* The stream a handle names: NULL, CU_STREAM_LEGACY (0x1) and CU_STREAM_PER_THREAD (0x2) are
 * the current context's default stream. *err gets why not. */
static struct stream *stream_get(void *h, CUresult *err) {
    if (h == NULL || h == (void *)1 || h == (void *)2) {
        struct ctx *c = t_cur;
        if (!c) {
            *err = CUDA_ERROR_INVALID_CONTEXT;
            return NULL;
        }
        pthread_mutex_lock(&g_mu);
        struct stream *d = c->dflt;
        pthread_mutex_unlock(&g_mu);
        if (!d) {
            d = stream_new(c);
            if (!d) {
                *err = CUDA_ERROR_OUT_OF_MEMORY;
                return NULL;
            }
            pthread_mutex_lock(&g_mu);
            if (c->dflt) {
                d->destroyed = 1; /* lost a race; this one's worker just exits */
                pthread_cond_signal(&d->work);
                d = c->dflt;
            } else {
                c->dflt = d;
            }
            pthread_mutex_unlock(&g_mu);
        }
        return d;
    }
    pthread_mutex_lock(&g_mu);
    struct stream *s = g_streams;
    while (s && (void *)s != h) s = s->next_all;
    pthread_mutex_unlock(&g_mu);
    if (!s || s->magic != STREAM_MAGIC) {
        *err = CUDA_ERROR_INVALID_HANDLE;
        return NULL;
    }
    return s;
}

/* Append a task with s->mu held; returns its sequence number. */
static uint64_t enqueue_locked(struct stream *s, struct task *t) {
    t->seq = ++s->submitted;
    if (s->tail) s->tail->next = t;
    else s->head = t;
    s->tail = t;
    pthread_cond_signal(&s->work);
    return t->seq;
}

static struct task *task_new(void (*fn)(void *), void *arg, int kernel, int stuck, int fault,
                             const char *name) {
    struct task *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->fn = fn;
    t->arg = arg;
    t->kernel = kernel;
    t->stuck = stuck;
    t->fault = fault;
    t->name = name;
    return t;
}

/* Append a task; returns its sequence number (0 if it could not be queued). */
static uint64_t enqueue(struct stream *s, void (*fn)(void *), void *arg, int kernel, int stuck,
                        int fault, const char *name) {
    struct task *t = task_new(fn, arg, kernel, stuck, fault, name);
    if (!t) return 0;
    pthread_mutex_lock(&s->mu);
    uint64_t seq = enqueue_locked(s, t);
    pthread_mutex_unlock(&s->mu);
    return seq;
}

static void wait_seq(struct stream *s, uint64_t seq) {
    pthread_mutex_lock(&s->mu);
    while (s->completed < seq) pthread_cond_wait(&s->done, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static void stream_sync(struct stream *s) {
    pthread_mutex_lock(&s->mu);
    uint64_t target = s->submitted;
    while (s->completed < target) pthread_cond_wait(&s->done, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static int stream_idle(struct stream *s) {
    pthread_mutex_lock(&s->mu);
    int idle = s->completed >= s->submitted;
    pthread_mutex_unlock(&s->mu);
    return idle;
}

/* ---------------------------------------------------------------- the allocation table */

struct alloc {
    unsigned long long base;
    size_t size;
    int dev;
    int freeing; /* cuMemFreeAsync enqueued: no longer usable */
};

static pthread_mutex_t g_mem_mu = PTHREAD_MUTEX_INITIALIZER;
static struct alloc *g_allocs;
static size_t g_nallocs, g_cap;
static size_t g_used[MAXDEV];
#define FREED_HISTORY 256
static struct alloc g_freed[FREED_HISTORY];
static size_t g_nfreed;

static int find_alloc(unsigned long long p) {
    for (size_t i = 0; i < g_nallocs; i++)
        if (p >= g_allocs[i].base && p < g_allocs[i].base + g_allocs[i].size) return (int)i;
    return -1;
}

/* The table's verdict on [p, p + bytes) (bytes 0 checks only p). Caller holds g_mem_mu. */
static int range_locked(unsigned long long p, size_t bytes, int *dev, unsigned long long *base,
                        size_t *size) {
    int i = find_alloc(p);
    if (i < 0) {
        for (size_t k = 0; k < g_nfreed && k < FREED_HISTORY; k++) {
            struct alloc *f = &g_freed[k];
            if (p >= f->base && p < f->base + f->size) {
                if (dev) *dev = f->dev;
                if (base) *base = f->base;
                if (size) *size = f->size;
                return STANDIN_RANGE_FREED;
            }
        }
        return STANDIN_RANGE_UNKNOWN;
    }
    struct alloc *a = &g_allocs[i];
    if (dev) *dev = a->dev;
    if (base) *base = a->base;
    if (size) *size = a->size;
    if (a->freeing) return STANDIN_RANGE_FREED;
    if (bytes > a->size || p - a->base > a->size - bytes) return STANDIN_RANGE_OVERRUN;
    return STANDIN_RANGE_OK;
}

static int check_range(unsigned long long p, size_t bytes, int *dev, unsigned long long *base,
                       size_t *size) {
    pthread_mutex_lock(&g_mem_mu);
    int r = range_locked(p, bytes, dev, base, size);
    pthread_mutex_unlock(&g_mem_mu);
    return r;
}

EXPORT int standin_cuda_check_range(unsigned long long p, size_t bytes, int *dev,
                                    unsigned long long *base, size_t *size) {
    return check_range(p, bytes, dev, base, size);
}

static const char *range_words(int r) {
    switch (r) {
    case STANDIN_RANGE_UNKNOWN: return "is not device memory (no allocation holds it)";
    case STANDIN_RANGE_OVERRUN: return "runs past the end of its allocation";
    case STANDIN_RANGE_FREED: return "is in memory already freed";
    default: return "is fine";
    }
}

/* Check a device range for the API call `what`; complains on stderr. */
static CUresult check_dev(const char *what, const char *which, CUdeviceptr p, size_t n) {
    unsigned long long base = 0;
    size_t size = 0;
    int r = check_range(p, n, NULL, &base, &size);
    if (r == STANDIN_RANGE_OK) return CUDA_SUCCESS;
    say("%s: %s 0x%llx + %zu B %s (allocation 0x%llx, %zu B): CUDA_ERROR_INVALID_VALUE", what,
        which, p, n, range_words(r), base, size);
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult mem_alloc(CUdeviceptr *dptr, size_t bytes, int dev) {
    if (!dptr) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mem_mu);
    if (g_used[dev] + bytes > g_mem_bytes) {
        pthread_mutex_unlock(&g_mem_mu);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    size_t rounded = (bytes + 255) & ~(size_t)255;
    void *p = aligned_alloc(256, rounded ? rounded : 256);
    if (!p) {
        pthread_mutex_unlock(&g_mem_mu);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (g_nallocs == g_cap) {
        size_t cap = g_cap ? g_cap * 2 : 64;
        struct alloc *n = realloc(g_allocs, cap * sizeof *n);
        if (!n) {
            free(p);
            pthread_mutex_unlock(&g_mem_mu);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        g_allocs = n;
        g_cap = cap;
    }
    g_allocs[g_nallocs++] = (struct alloc){(unsigned long long)(uintptr_t)p, bytes, dev, 0};
    g_used[dev] += bytes;
    pthread_mutex_unlock(&g_mem_mu);
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

/* Mark an allocation as being freed; returns 0 if `p` is not the start of a live one. */
static int mem_mark_freeing(CUdeviceptr p) {
    pthread_mutex_lock(&g_mem_mu);
    int i = find_alloc(p);
    int ok = i >= 0 && g_allocs[i].base == p && !g_allocs[i].freeing;
    if (ok) g_allocs[i].freeing = 1;
    pthread_mutex_unlock(&g_mem_mu);
    return ok;
}

static void mem_release(CUdeviceptr p) {
    pthread_mutex_lock(&g_mem_mu);
    int i = find_alloc(p);
    if (i >= 0 && g_allocs[i].base == p) {
        g_used[g_allocs[i].dev] -= g_allocs[i].size;
        g_freed[g_nfreed++ % FREED_HISTORY] = g_allocs[i];
        g_allocs[i] = g_allocs[--g_nallocs];
        free((void *)(uintptr_t)p);
    }
    pthread_mutex_unlock(&g_mem_mu);
}

/* ---------------------------------------------------------------- tasks */

struct copy_task {
    void *dst;
    const void *src;
    size_t n;
    void *owned; /* a staging copy to free afterwards */
};

static void run_copy(void *p) {
    struct copy_task *c = p;
    memmove(c->dst, c->src, c->n);
    free(c->owned);
    free(c);
}

struct set_task {
    void *dst;
    unsigned char v;
    size_t n;
};

static void run_set(void *p) {
    struct set_task *t = p;
    memset(t->dst, t->v, t->n);
    free(t);
}

static void run_free(void *p) {
    mem_release((CUdeviceptr)(uintptr_t)p);
}

/* ---------------------------------------------------------------- events */

struct event {
    uint32_t magic;
    unsigned flags;
    struct stream *s; /* where it was last recorded, NULL if never */
    uint64_t seq;
    uint64_t gen;
    double t_ms;
    int stamped;
    struct event *next_all;
};

static struct event *g_events;

struct mark {
    struct event *e;
    uint64_t gen;
};

static void run_mark(void *p) {
    struct mark *m = p;
    pthread_mutex_lock(&g_mu);
    if (m->e->gen == m->gen) {
        m->e->t_ms = now_ms();
        m->e->stamped = 1;
    }
    pthread_mutex_unlock(&g_mu);
    free(m);
}

static struct event *event_get(void *h) {
    pthread_mutex_lock(&g_mu);
    struct event *e = g_events;
    while (e && (void *)e != h) e = e->next_all;
    pthread_mutex_unlock(&g_mu);
    return e && e->magic == EVENT_MAGIC ? e : NULL;
}

/* ---------------------------------------------------------------- initialisation, devices */

EXPORT CUresult cuInit(unsigned int flags) {
    pthread_once(&g_once, configure);
    TRACE("cuInit(%u)", flags);
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (g_ngpus == 0) return CUDA_ERROR_NO_DEVICE;
    g_inited = 1;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *v) {
    pthread_once(&g_once, configure);
    TRACE("cuDriverGetVersion");
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = 12080;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count) {
    TRACE("cuDeviceGetCount");
    CHECK_READY();
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = g_ngpus;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
    TRACE("cuDeviceGet(%d)", ordinal);
    CHECK_READY();
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= g_ngpus) return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

#define CHECK_DEV(d) \
    do { \
        if ((d) < 0 || (d) >= g_ngpus) return CUDA_ERROR_INVALID_DEVICE; \
    } while (0)

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    TRACE("cuDeviceGetName(%d)", dev);
    CHECK_READY();
    CHECK_DEV(dev);
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", g_name);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    TRACE("cuDeviceTotalMem_v2(%d)", dev);
    CHECK_READY();
    CHECK_DEV(dev);
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    *bytes = g_mem_bytes;
    return CUDA_SUCCESS;
}

static CUresult device_uuid(unsigned char *uuid, CUdevice dev) {
    TRACE("cuDeviceGetUuid(%d)", dev);
    CHECK_READY();
    CHECK_DEV(dev);
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < 16; i++) uuid[i] = (unsigned char)(0x5A ^ (i * 17) ^ dev);
    return CUDA_SUCCESS;
}

/* Exported functions never call each other: every binding of a stand-in symbol that LD_DEBUG
 * shows is then a lookup from outside (cudarc's dlsym), which drive.sh lists. */
EXPORT CUresult cuDeviceGetUuid(unsigned char *uuid, CUdevice dev) { return device_uuid(uuid, dev); }
EXPORT CUresult cuDeviceGetUuid_v2(unsigned char *uuid, CUdevice dev) { return device_uuid(uuid, dev); }

EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice dev) {
    TRACE("cuDeviceGetAttribute(%d, %d)", attr, dev);
    CHECK_READY();
    CHECK_DEV(dev);
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case 1: *v = 1024; break;           /* max threads per block */
    case 10: *v = 32; break;            /* warp size */
    case 16: *v = 132; break;           /* multiprocessors */
    case 19: *v = 1; break;             /* can map host memory */
    case 33: *v = 0x18 + dev; break;    /* PCI bus id */
    case 34: *v = 0; break;             /* PCI device id */
    case 41: *v = 1; break;             /* unified addressing */
    case 50: *v = 0; break;             /* PCI domain id */
    case 75: *v = 9; break;             /* compute capability major */
    case 76: *v = 0; break;             /* compute capability minor */
    case 83: *v = 1; break;             /* managed memory */
    case 89: *v = 1; break;             /* concurrent managed access */
    case 115: *v = g_pools; break;      /* memory pools supported (cudarc: async alloc) */
    default: *v = 0; break;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer) {
    TRACE("cuDeviceCanAccessPeer(%d, %d)", dev, peer);
    CHECK_READY();
    CHECK_DEV(dev);
    CHECK_DEV(peer);
    if (!can) return CUDA_ERROR_INVALID_VALUE;
    *can = dev != peer && g_p2p;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- contexts */

EXPORT CUresult cuDevicePrimaryCtxRetain(void **pctx, CUdevice dev) {
    TRACE("cuDevicePrimaryCtxRetain(%d)", dev);
    CHECK_READY();
    CHECK_DEV(dev);
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    /* A big GPU's first context can take seconds (STANDIN_CUDA_CTX_DELAY_MS). */
    if (g_ctx_delay_ms > 0 && !g_ctx[dev].retained) usleep((useconds_t)g_ctx_delay_ms * 1000);
    pthread_mutex_lock(&g_mu);
    struct ctx *c = &g_ctx[dev];
    c->magic = CTX_MAGIC;
    c->dev = dev;
    c->retained++;
    pthread_mutex_unlock(&g_mu);
    *pctx = c;
    return CUDA_SUCCESS;
}

static CUresult primary_release(CUdevice dev) {
    TRACE("cuDevicePrimaryCtxRelease(%d)", dev);
    CHECK_READY();
    CHECK_DEV(dev);
    pthread_mutex_lock(&g_mu);
    int was = g_ctx[dev].retained;
    if (was > 0) g_ctx[dev].retained--;
    struct stream *list = g_streams;
    pthread_mutex_unlock(&g_mu);
    /* STANDIN_CUDA_RELEASE_WAITS: the last release tears the context down and waits for the
     * device's work first, so behind a kernel that never completes it never returns (a
     * teardown a rank must not report after). */
    if (g_release_waits && was == 1)
        for (struct stream *s = list; s; s = s->next_all)
            if (s->dev == dev) stream_sync(s);
    /* The context stays usable (its streams may still be draining); only the count drops. */
    return was > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return primary_release(dev); }
EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return primary_release(dev); }

EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned *flags, int *active) {
    TRACE("cuDevicePrimaryCtxGetState(%d)", dev);
    CHECK_READY();
    CHECK_DEV(dev);
    if (flags) *flags = 0;
    if (active) *active = g_ctx[dev].retained > 0;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(void **pctx) {
    TRACE("cuCtxGetCurrent");
    CHECK_READY();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = t_cur;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(void *ctx) {
    TRACE("cuCtxSetCurrent(%p)", ctx);
    CHECK_READY();
    if (ctx && !ctx_ok(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    t_cur = ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *dev) {
    TRACE("cuCtxGetDevice");
    CHECK_READY();
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    if (!t_cur) return CUDA_ERROR_INVALID_CONTEXT;
    *dev = t_cur->dev;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void) {
    TRACE("cuCtxSynchronize");
    CHECK_READY();
    struct ctx *c = t_cur;
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&g_mu);
    struct stream *list = g_streams;
    pthread_mutex_unlock(&g_mu);
    for (struct stream *s = list; s; s = s->next_all)
        if (s->ctx == c) stream_sync(s);
    return atomic_load(&g_sticky);
}

/* ---------------------------------------------------------------- streams */

static CUresult stream_create(void **ph, unsigned flags) {
    TRACE("cuStreamCreate(flags %u)", flags);
    CHECK_READY();
    if (!ph) return CUDA_ERROR_INVALID_VALUE;
    if (!t_cur) return CUDA_ERROR_INVALID_CONTEXT;
    struct stream *s = stream_new(t_cur);
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    *ph = s;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreate(void **ph, unsigned flags) { return stream_create(ph, flags); }

EXPORT CUresult cuStreamCreateWithPriority(void **ph, unsigned flags, int prio) {
    (void)prio;
    return stream_create(ph, flags);
}

static CUresult stream_destroy(void *h) {
    TRACE("cuStreamDestroy(%p)", h);
    CHECK_READY();
    if (!h || h == (void *)1 || h == (void *)2) return CUDA_ERROR_INVALID_HANDLE;
    CUresult err = 0;
    struct stream *s = stream_get(h, &err);
    if (!s) return err;
    /* As CUDA: returns at once; the work already queued still runs, then the worker exits. */
    pthread_mutex_lock(&s->mu);
    s->magic = 0;
    s->destroyed = 1;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(void *h) { return stream_destroy(h); }
EXPORT CUresult cuStreamDestroy(void *h) { return stream_destroy(h); }

EXPORT CUresult cuStreamSynchronize(void *h) {
    TRACE("cuStreamSynchronize(%p)", h);
    CHECK_READY();
    CUresult err = 0;
    struct stream *s = stream_get(h, &err);
    if (!s) return err;
    stream_sync(s);
    return atomic_load(&g_sticky);
}

EXPORT CUresult cuStreamQuery(void *h) {
    TRACE("cuStreamQuery(%p)", h);
    CHECK_READY();
    CUresult err = 0;
    struct stream *s = stream_get(h, &err);
    if (!s) return err;
    return stream_idle(s) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

struct wait_task {
    struct stream *s;
    uint64_t seq;
};

static void run_wait(void *p) {
    struct wait_task *w = p;
    wait_seq(w->s, w->seq);
    free(w);
}

EXPORT CUresult cuStreamWaitEvent(void *h, void *ev, unsigned flags) {
    TRACE("cuStreamWaitEvent(%p, %p, %u)", h, ev, flags);
    CHECK_READY();
    CUresult err = 0;
    struct stream *s = stream_get(h, &err);
    if (!s) return err;
    struct event *e = event_get(ev);
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_mu);
    struct stream *on = e->s;
    uint64_t seq = e->seq;
    pthread_mutex_unlock(&g_mu);
    if (!on || on == s) return CUDA_SUCCESS;
    struct wait_task *w = malloc(sizeof *w);
    if (!w) return CUDA_ERROR_OUT_OF_MEMORY;
    *w = (struct wait_task){on, seq};
    if (!enqueue(s, run_wait, w, 0, 0, 0, "wait")) {
        free(w);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

struct host_fn {
    void (*fn)(void *);
    void *arg;
};

static void run_host_fn(void *p) {
    struct host_fn *h = p;
    h->fn(h->arg);
    free(h);
}

/* A kernel's number on its device and whether it sticks or faults. */
static void kernel_no(int dev, int *no, int *stuck, int *fault) {
    *no = atomic_fetch_add(&g_kernels[dev], 1) + 1;
    *stuck = g_stuck_at > 0 && *no == g_stuck_at && (g_stuck_dev < 0 || g_stuck_dev == dev);
    *fault = g_fault_at > 0 && *no == g_fault_at && (g_fault_dev < 0 || g_fault_dev == dev);
}

static CUresult launch(void *h, void (*fn)(void *), void *arg, const char *name) {
    CHECK_READY();
    CUresult err = 0;
    struct stream *s = stream_get(h, &err);
    if (!s) return err;
    int no, stuck, fault;
    kernel_no(s->dev, &no, &stuck, &fault);
    if (stuck)
        say("kernel #%d (%s) on device %d never completes (STANDIN_CUDA_STUCK=%d)", no,
            name ? name : "?", s->dev, g_stuck_at);
    TRACE("launch kernel #%d %s on stream %p (device %d)", no, name ? name : "?", (void *)s,
          s->dev);
    if (!enqueue(s, fn, arg, no, stuck, fault, name)) return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchHostFunc(void *h, void (*fn)(void *), void *arg) {
    TRACE("cuLaunchHostFunc(%p)", h);
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    struct host_fn *x = malloc(sizeof *x);
    if (!x) return CUDA_ERROR_OUT_OF_MEMORY;
    *x = (struct host_fn){fn, arg};
    CUresult r = launch(h, run_host_fn, x, "host function");
    if (r) free(x);
    return r;
}

/* ---------------------------------------------------------------- the stand-in's own API */

EXPORT int standin_cuda_launch(void *h, void (*fn)(void *), void *arg, const char *name) {
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    return launch(h, fn, arg, name);
}

EXPORT int standin_cuda_stream_device(void *h) {
    CUresult err = 0;
    if (!g_inited) return -1;
    struct stream *s = stream_get(h, &err);
    return s ? s->dev : -1;
}

EXPORT int standin_cuda_current_device(void) {
    return t_cur ? t_cur->dev : -1;
}

/* ---------------------------------------------------------------- memory */

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
    TRACE("cuMemAlloc_v2(%zu)", bytes);
    CHECK_READY();
    if (!t_cur) return CUDA_ERROR_INVALID_CONTEXT;
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    return mem_alloc(dptr, bytes, t_cur->dev);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, void *h) {
    TRACE("cuMemAllocAsync(%zu, %p)", bytes, h);
    CHECK_READY();
    CUresult err = 0;
    struct stream *s = stream_get(h, &err);
    if (!s) return err;
    if (!dptr) return CUDA_ERROR_INVALID_VALUE;
    if (bytes == 0) {
        *dptr = 0;
        return CUDA_SUCCESS;
    }
    return mem_alloc(dptr, bytes, s->dev);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
    TRACE("cuMemFree_v2(0x%llx)", p);
    CHECK_READY();
    if (p == 0) return CUDA_SUCCESS;
    if (!mem_mark_freeing(p)) {
        say("cuMemFree_v2: 0x%llx is not the start of a live allocation", p);
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* cuMemFree synchronises with the device first. */
    pthread_mutex_lock(&g_mu);
    struct stream *list = g_streams;
    pthread_mutex_unlock(&g_mu);
    for (struct stream *s = list; s; s = s->next_all) stream_sync(s);
    mem_release(p);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, void *h) {
    TRACE("cuMemFreeAsync(0x%llx, %p)", p, h);
    CHECK_READY();
    CUresult err = 0;
    struct stream *s = stream_get(h, &err);
    if (!s) return err;
    if (p == 0) return CUDA_SUCCESS;
    if (!mem_mark_freeing(p)) {
        say("cuMemFreeAsync: 0x%llx is not the start of a live allocation", p);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!enqueue(s, run_free, (void *)(uintptr_t)p, 0, 0, 0, "free")) return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total) {
    TRACE("cuMemGetInfo_v2");
    CHECK_READY();
    if (!t_cur) return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&g_mem_mu);
    size_t used = g_used[t_cur->dev];
    pthread_mutex_unlock(&g_mem_mu);
    if (free_b) *free_b = g_mem_bytes - used;
    if (total) *total = g_mem_bytes;
    return CUDA_SUCCESS;
}

static CUresult memset_async(const char *what, CUdeviceptr p, unsigned char v, size_t n, void *h,
                             int sync) {
    TRACE("%s(0x%llx, %u, %zu, %p)", what, p, v, n, h);
    CHECK_READY();
    CUresult err = 0;
    struct stream *s = stream_get(h, &err);
    if (!s) return err;
    if (n == 0) return CUDA_SUCCESS;
    if ((err = check_dev(what, "dst", p, n))) return err;
    struct set_task *t = malloc(sizeof *t);
    if (!t) return CUDA_ERROR_OUT_OF_MEMORY;
    *t = (struct set_task){(void *)(uintptr_t)p, v, n};
    uint64_t seq = enqueue(s, run_set, t, 0, 0, 0, "memset");
    if (!seq) {
        free(t);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (sync) wait_seq(s, seq);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, void *h) {
    return memset_async("cuMemsetD8Async", p, v, n, h, 0);
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n) {
    return memset_async("cuMemsetD8_v2", p, v, n, NULL, 1);
}

/* Copies. kind: 'H' host to device, 'D' device to host, 'X' device to device. */
static CUresult copy(const char *what, char kind, void *dst, const void *src, size_t n, void *h,
                     int sync) {
    TRACE("%s(%p <- %p, %zu, %p)", what, dst, src, n, h);
    CHECK_READY();
    CUresult err = 0;
    struct stream *s = stream_get(h, &err);
    if (!s) return err;
    if (n == 0) return CUDA_SUCCESS;
    if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
    if (kind != 'D' && (err = check_dev(what, "dst", (CUdeviceptr)(uintptr_t)dst, n))) return err;
    if (kind != 'H' && (err = check_dev(what, "src", (CUdeviceptr)(uintptr_t)src, n))) return err;
    struct copy_task *t = calloc(1, sizeof *t);
    if (!t) return CUDA_ERROR_OUT_OF_MEMORY;
    t->dst = dst;
    t->src = src;
    t->n = n;
    if (kind == 'H') {
        /* Pageable host memory: CUDA stages the source before the call returns. */
        t->owned = malloc(n);
        if (!t->owned) {
            free(t);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(t->owned, src, n);
        t->src = t->owned;
    }
    uint64_t seq = enqueue(s, run_copy, t, 0, 0, 0, what);
    if (!seq) {
        free(t->owned);
        free(t);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* Device to pageable host memory returns only once the copy is done. */
    if (sync || kind == 'D') wait_seq(s, seq);
    return atomic_load(&g_sticky);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *h) {
    return copy("cuMemcpyHtoDAsync_v2", 'H', (void *)(uintptr_t)dst, src, n, h, 0);
}
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *h) {
    return copy("cuMemcpyDtoHAsync_v2", 'D', dst, (const void *)(uintptr_t)src, n, h, 0);
}
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void *h) {
    return copy("cuMemcpyDtoDAsync_v2", 'X', (void *)(uintptr_t)dst, (const void *)(uintptr_t)src,
                n, h, 0);
}
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    return copy("cuMemcpyHtoD_v2", 'H', (void *)(uintptr_t)dst, src, n, NULL, 1);
}
EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    return copy("cuMemcpyDtoH_v2", 'D', dst, (const void *)(uintptr_t)src, n, NULL, 1);
}
EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    return copy("cuMemcpyDtoD_v2", 'X', (void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n,
                NULL, 1);
}

/* ---------------------------------------------------------------- events */

EXPORT CUresult cuEventCreate(void **ph, unsigned flags) {
    TRACE("cuEventCreate(%u)", flags);
    CHECK_READY();
    if (!ph) return CUDA_ERROR_INVALID_VALUE;
    if (!t_cur) return CUDA_ERROR_INVALID_CONTEXT;
    struct event *e = calloc(1, sizeof *e);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    e->magic = EVENT_MAGIC;
    e->flags = flags;
    pthread_mutex_lock(&g_mu);
    e->next_all = g_events;
    g_events = e;
    pthread_mutex_unlock(&g_mu);
    *ph = e;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(void *ev, void *h) {
    TRACE("cuEventRecord(%p, %p)", ev, h);
    CHECK_READY();
    struct event *e = event_get(ev);
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    CUresult err = 0;
    struct stream *s = stream_get(h, &err);
    if (!s) return err;
    struct mark *m = malloc(sizeof *m);
    struct task *t = task_new(run_mark, m, 0, 0, 0, "event");
    if (!m || !t) {
        free(m);
        free(t);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* Lock order g_mu, then the stream's: the event's sequence number and its mark's agree. */
    pthread_mutex_lock(&g_mu);
    m->e = e;
    m->gen = ++e->gen;
    e->stamped = 0;
    e->s = s;
    pthread_mutex_lock(&s->mu);
    e->seq = enqueue_locked(s, t);
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

static CUresult event_query(void *ev) {
    TRACE("cuEventQuery(%p)", ev);
    CHECK_READY();
    struct event *e = event_get(ev);
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_mu);
    struct stream *s = e->s;
    uint64_t seq = e->seq;
    pthread_mutex_unlock(&g_mu);
    if (!s) return CUDA_SUCCESS;
    pthread_mutex_lock(&s->mu);
    int done = s->completed >= seq;
    pthread_mutex_unlock(&s->mu);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuEventQuery(void *ev) { return event_query(ev); }

EXPORT CUresult cuEventSynchronize(void *ev) {
    TRACE("cuEventSynchronize(%p)", ev);
    CHECK_READY();
    struct event *e = event_get(ev);
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_mu);
    struct stream *s = e->s;
    uint64_t seq = e->seq;
    pthread_mutex_unlock(&g_mu);
    if (s) wait_seq(s, seq);
    return atomic_load(&g_sticky);
}

static CUresult elapsed(float *ms, void *start, void *end) {
    TRACE("cuEventElapsedTime(%p, %p)", start, end);
    CHECK_READY();
    struct event *a = event_get(start), *b = event_get(end);
    if (!ms || !a || !b) return CUDA_ERROR_INVALID_HANDLE;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
    if (!a->s || !b->s) return CUDA_ERROR_INVALID_HANDLE;
    if (event_query(start) || event_query(end)) return CUDA_ERROR_NOT_READY;
    pthread_mutex_lock(&g_mu);
    *ms = (float)(b->t_ms - a->t_ms);
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime(float *ms, void *start, void *end) {
    return elapsed(ms, start, end);
}

EXPORT CUresult cuEventElapsedTime_v2(float *ms, void *start, void *end) {
    return elapsed(ms, start, end);
}

static CUresult event_destroy(void *ev) {
    TRACE("cuEventDestroy(%p)", ev);
    CHECK_READY();
    struct event *e = event_get(ev);
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    /* Kept (marks still queued may point at it), only made unusable. */
    pthread_mutex_lock(&g_mu);
    e->magic = 0;
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(void *ev) { return event_destroy(ev); }
EXPORT CUresult cuEventDestroy(void *ev) { return event_destroy(ev); }

/* ---------------------------------------------------------------- errors, lookup */

static const struct {
    int code;
    const char *name, *text;
} g_errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

EXPORT CUresult cuGetErrorString(CUresult e, const char **s) {
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
        if (g_errors[i].code == e) {
            *s = g_errors[i].text;
            return CUDA_SUCCESS;
        }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorName(CUresult e, const char **s) {
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
        if (g_errors[i].code == e) {
            *s = g_errors[i].name;
            return CUDA_SUCCESS;
        }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

/* cuGetProcAddress: this library's own symbol, the highest _vN first. */
static CUresult proc_address(const char *sym, void **pfn, int *status) {
    TRACE("cuGetProcAddress(%s)", sym ? sym : "(null)");
    if (!sym || !pfn) return CUDA_ERROR_INVALID_VALUE;
    Dl_info info;
    void *self = NULL;
    if (dladdr((void *)configure, &info) && info.dli_fname)
        self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    void *f = NULL;
    char name[256];
    for (int v = 3; v >= 1 && self && !f; v--) {
        if (v > 1) snprintf(name, sizeof name, "%s_v%d", sym, v);
        else snprintf(name, sizeof name, "%s", sym);
        f = dlsym(self, name);
    }
    if (self) dlclose(self);
    *pfn = f;
    if (status) *status = f ? 0 : 1; /* CU_GET_PROC_ADDRESS_SUCCESS / SYMBOL_NOT_FOUND */
    return f ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags,
                                    int *status) {
    (void)ver;
    (void)flags;
    return proc_address(sym, pfn, status);
}

EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags) {
    (void)ver;
    (void)flags;
    return proc_address(sym, pfn, NULL);
}
