/* The stand-ins on their own: loads LIBDIR/libcuda.so.1 and LIBDIR/libnccl.so.2 the way cudarc
 * does (dlopen, RTLD_LOCAL) and checks what ringlab cannot make them do: bad buffers, NCCL's
 * in-place rules, mismatched collectives, windows and streaming past the shared-memory sizes,
 * ranks in separate processes, the duplicate-GPU check, abort breaking a wait, a dead peer.
 *
 *   cc -O1 -Wall -Werror -pthread -o selftest selftest.c -ldl -lrt && ./selftest LIBDIR
 *
 * Prints one "PASS<TAB>name<TAB>detail" or "FAIL<TAB>name<TAB>detail" line per check; exits 1
 * if any failed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct {
    char internal[128];
} ncclUniqueId;
typedef void *comm_t;

static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGetCount)(int *);
static CUresult (*cuDevicePrimaryCtxRetain)(void **, int);
static CUresult (*cuCtxSetCurrent)(void *);
static CUresult (*cuStreamCreate)(void **, unsigned);
static CUresult (*cuStreamQuery)(void *);
static CUresult (*cuStreamSynchronize)(void *);
static CUresult (*cuMemAlloc_v2)(CUdeviceptr *, size_t);
static CUresult (*cuMemFree_v2)(CUdeviceptr);
static CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr, const void *, size_t, void *);
static CUresult (*cuMemcpyDtoHAsync_v2)(void *, CUdeviceptr, size_t, void *);
static CUresult (*cuEventCreate)(void **, unsigned);
static CUresult (*cuEventRecord)(void *, void *);
static CUresult (*cuEventQuery)(void *);
static CUresult (*cuEventElapsedTime)(float *, void *, void *);
static CUresult (*cuGetErrorString)(CUresult, const char **);

static int (*ncclGetVersion)(int *);
static int (*ncclGetUniqueId)(ncclUniqueId *);
static int (*ncclCommInitRank)(comm_t *, int, ncclUniqueId, int);
static int (*ncclCommInitAll)(comm_t *, int, const int *);
static int (*ncclCommDestroy)(comm_t);
static int (*ncclCommAbort)(comm_t);
static int (*ncclCommGetAsyncError)(comm_t, int *);
static int (*ncclCommCount)(comm_t, int *);
static int (*ncclCommUserRank)(comm_t, int *);
static int (*ncclCommCuDevice)(comm_t, int *);
static const char *(*ncclGetLastError)(comm_t);
static const char *(*ncclGetErrorString)(int);
static int (*ncclGroupStart)(void);
static int (*ncclGroupEnd)(void);
static int (*ncclAllReduce)(const void *, void *, size_t, int, int, comm_t, void *);
static int (*ncclBroadcast)(const void *, void *, size_t, int, int, comm_t, void *);
static int (*ncclReduce)(const void *, void *, size_t, int, int, int, comm_t, void *);
static int (*ncclAllGather)(const void *, void *, size_t, int, comm_t, void *);
static int (*ncclReduceScatter)(const void *, void *, size_t, int, int, comm_t, void *);
static int (*ncclSend)(const void *, size_t, int, int, comm_t, void *);
static int (*ncclRecv)(void *, size_t, int, int, comm_t, void *);
static int (*ncclRedOpCreatePreMulSum)(int *, void *, int, int, comm_t);

enum { I8, U8, I32, U32, I64, U64, F16, F32, F64, BF16 };
enum { SUM, PROD, MAX, MIN, AVG };

static int fails;
static void result(int ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void result(int ok, const char *name, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (char *p = buf; *p; p++)
        if (*p == '\t' || *p == '\n') *p = ' ';
    printf("%s\t%s\t%s\n", ok ? "PASS" : "FAIL", name, buf);
    fflush(stdout);
    if (!ok) fails++;
}

static void *need(void *h, const char *name) {
    void *f = dlsym(h, name);
    if (!f) {
        fprintf(stderr, "missing %s\n", name);
        exit(2);
    }
    return f;
}

static void load(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/libcuda.so.1", dir);
    void *cu = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    snprintf(path, sizeof path, "%s/libnccl.so.2", dir);
    void *nc = cu ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!cu || !nc) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        exit(2);
    }
#define L(h, f) *(void **)&f = need(h, #f)
    L(cu, cuInit); L(cu, cuDeviceGetCount); L(cu, cuDevicePrimaryCtxRetain); L(cu, cuCtxSetCurrent);
    L(cu, cuStreamCreate); L(cu, cuStreamQuery); L(cu, cuStreamSynchronize); L(cu, cuMemAlloc_v2);
    L(cu, cuMemFree_v2); L(cu, cuMemcpyHtoDAsync_v2); L(cu, cuMemcpyDtoHAsync_v2);
    L(cu, cuEventCreate); L(cu, cuEventRecord); L(cu, cuEventQuery); L(cu, cuEventElapsedTime);
    L(cu, cuGetErrorString);
    L(nc, ncclGetVersion); L(nc, ncclGetUniqueId); L(nc, ncclCommInitRank); L(nc, ncclCommInitAll);
    L(nc, ncclCommDestroy); L(nc, ncclCommAbort); L(nc, ncclCommGetAsyncError);
    L(nc, ncclCommCount); L(nc, ncclCommUserRank); L(nc, ncclCommCuDevice); L(nc, ncclGetLastError);
    L(nc, ncclGetErrorString); L(nc, ncclGroupStart); L(nc, ncclGroupEnd); L(nc, ncclAllReduce);
    L(nc, ncclBroadcast); L(nc, ncclReduce); L(nc, ncclAllGather); L(nc, ncclReduceScatter);
    L(nc, ncclSend); L(nc, ncclRecv); L(nc, ncclRedOpCreatePreMulSum);
#undef L
}

/* ------------------------------------------------------------------ helpers */

#define MAXD 8
static void *ctx[MAXD], *stream[MAXD];

static void open_dev(int d) {
    cuDevicePrimaryCtxRetain(&ctx[d], d);
    cuCtxSetCurrent(ctx[d]);
    cuStreamCreate(&stream[d], 1);
}

static CUdeviceptr dalloc(int d, size_t n) {
    CUdeviceptr p = 0;
    cuCtxSetCurrent(ctx[d]);
    if (cuMemAlloc_v2(&p, n)) {
        fprintf(stderr, "cuMemAlloc_v2(%zu) failed\n", n);
        exit(2);
    }
    return p;
}

static void up(int d, CUdeviceptr p, const void *h, size_t n) {
    cuMemcpyHtoDAsync_v2(p, h, n, stream[d]);
}
static void down(int d, void *h, CUdeviceptr p, size_t n) {
    cuMemcpyDtoHAsync_v2(h, p, n, stream[d]);
    cuStreamSynchronize(stream[d]);
}

/* Wait for a stream up to ms; 1 if it completed. */
static int settle(int d, int ms) {
    for (int i = 0; i < ms; i++) {
        if (cuStreamQuery(stream[d]) != 600) return 1;
        usleep(1000);
    }
    return 0;
}

static float h2f(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, f;
    if (e == 0) f = s | (m ? 0 : 0); /* test values are never subnormal */
    else f = s | ((e + 112) << 23) | (m << 13);
    float out;
    memcpy(&out, &f, 4);
    return out;
}
static uint16_t f2h(float x) { /* exact for the small integers used here */
    uint32_t f;
    memcpy(&f, &x, 4);
    if ((f & 0x7fffffff) == 0) return (uint16_t)(f >> 16);
    uint32_t e = ((f >> 23) & 0xff) - 112, m = (f >> 13) & 0x3ff;
    return (uint16_t)(((f >> 16) & 0x8000) | (e << 10) | m);
}

static size_t esize(int t) {
    static const size_t s[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
    return s[t];
}

/* Element i of rank r's input, for op: small integers, exact in every type. */
static double input(int op, int n, int r, size_t i) {
    if (op == PROD) return (i + (size_t)r) % (size_t)n == 0 ? 2 : 1;
    if (op == MAX || op == MIN) return (double)((r * 7 + (int)i) % 5);
    return (double)((r + (int)i) % 3);
}

static void put(void *buf, int t, size_t i, double v) {
    switch (t) {
    case I8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case U32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case U64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case F16: ((uint16_t *)buf)[i] = f2h((float)v); break;
    case BF16: { float f = (float)v; uint32_t u; memcpy(&u, &f, 4); ((uint16_t *)buf)[i] = (uint16_t)(u >> 16); break; }
    case F32: ((float *)buf)[i] = (float)v; break;
    case F64: ((double *)buf)[i] = v; break;
    }
}

static double get(const void *buf, int t, size_t i) {
    switch (t) {
    case I8: return ((const int8_t *)buf)[i];
    case U8: return ((const uint8_t *)buf)[i];
    case I32: return ((const int32_t *)buf)[i];
    case U32: return ((const uint32_t *)buf)[i];
    case I64: return (double)((const int64_t *)buf)[i];
    case U64: return (double)((const uint64_t *)buf)[i];
    case F16: return h2f(((const uint16_t *)buf)[i]);
    case BF16: { uint32_t u = (uint32_t)((const uint16_t *)buf)[i] << 16; float f; memcpy(&f, &u, 4); return f; }
    case F32: return ((const float *)buf)[i];
    case F64: return ((const double *)buf)[i];
    }
    return NAN;
}

static double fold(int op, int t, int n, size_t i) {
    double acc = input(op, n, 0, i);
    for (int r = 1; r < n; r++) {
        double x = input(op, n, r, i);
        acc = op == PROD ? acc * x : op == MAX ? fmax(acc, x) : op == MIN ? fmin(acc, x) : acc + x;
    }
    if (op == AVG) acc = (t == F16 || t == BF16 || t == F32 || t == F64) ? acc / n : floor(acc / n);
    return acc;
}

static int close_enough(int op, int t, int n, double got, double want) {
    if (op != AVG || !(t == F16 || t == BF16 || t == F32 || t == F64)) return got == want;
    double u = t == F16 ? 1.0 / 2048 : t == BF16 ? 1.0 / 256 : t == F32 ? 6e-8 : 1.2e-16;
    return fabs(got - want) <= (n + 2) * u * fabs(want);
}

/* ------------------------------------------------------------------ single process */

/* Every type and op of all-reduce, reduce-scatter and reduce on n GPUs from one process. */
static void test_reductions(comm_t *cs, int n, size_t count) {
    int before = fails;
    static const char *const tn[] = {"i8", "u8", "i32", "u32", "i64", "u64", "f16", "f32", "f64", "bf16"};
    static const char *const on[] = {"sum", "prod", "max", "min", "avg"};
    for (int t = 0; t < 10; t++)
        for (int op = 0; op < 5; op++)
            for (int kind = 0; kind < 3; kind++) { /* 0 all-reduce, 1 reduce-scatter, 2 reduce */
                size_t es = esize(t), total = count * (size_t)n; /* reduce-scatter input */
                size_t in_elems = kind == 1 ? total : count;
                CUdeviceptr sb[MAXD], rb[MAXD];
                void *h = malloc(in_elems * es);
                for (int d = 0; d < n; d++) {
                    sb[d] = dalloc(d, in_elems * es);
                    rb[d] = dalloc(d, in_elems * es);
                    for (size_t i = 0; i < in_elems; i++) put(h, t, i, input(op, n, d, i));
                    up(d, sb[d], h, in_elems * es);
                }
                ncclGroupStart();
                int r = 0;
                for (int d = 0; d < n; d++) {
                    if (kind == 0) r |= ncclAllReduce((void *)sb[d], (void *)rb[d], count, t, op, cs[d], stream[d]);
                    if (kind == 1) r |= ncclReduceScatter((void *)sb[d], (void *)rb[d], count, t, op, cs[d], stream[d]);
                    if (kind == 2) r |= ncclReduce((void *)sb[d], (void *)rb[d], count, t, op, 1 % n, cs[d], stream[d]);
                }
                r |= ncclGroupEnd();
                size_t bad = 0;
                for (int d = 0; d < n && !r; d++) {
                    down(d, h, rb[d], count * es);
                    if (kind == 2 && d != 1 % n) continue;
                    for (size_t i = 0; i < count; i++) {
                        size_t j = kind == 1 ? (size_t)d * count + i : i;
                        if (!close_enough(op, t, n, get(h, t, i), fold(op, t, n, j))) bad++;
                    }
                }
                char name[64];
                snprintf(name, sizeof name, "%s-%s-%s-%dgpus",
                         kind == 0 ? "allreduce" : kind == 1 ? "reducescatter" : "reduce", tn[t], on[op], n);
                if (r || bad) result(0, name, "rc %d, %zu wrong of %zu", r, bad, count);
                for (int d = 0; d < n; d++) {
                    cuMemFree_v2(sb[d]);
                    cuMemFree_v2(rb[d]);
                }
                free(h);
            }
    result(fails == before, n == 2 ? "reductions-2gpus" : "reductions-3gpus", "%d GPUs, %zu elements, windows of STANDIN_NCCL_SLOT_BYTES", n, count);
}

static void test_inplace_and_moves(comm_t *cs, int n, size_t count) {
    /* all-gather in place: sendbuff = recvbuff + rank*count */
    CUdeviceptr b[MAXD];
    int32_t *h = malloc(count * (size_t)n * 4);
    for (int d = 0; d < n; d++) {
        b[d] = dalloc(d, count * (size_t)n * 4);
        for (size_t i = 0; i < count; i++) h[i] = (int32_t)(d * 1000003 + (int)i);
        up(d, b[d] + (size_t)d * count * 4, h, count * 4);
    }
    ncclGroupStart();
    for (int d = 0; d < n; d++)
        ncclAllGather((void *)(b[d] + (size_t)d * count * 4), (void *)b[d], count, I32, cs[d], stream[d]);
    int r = ncclGroupEnd();
    size_t bad = 0;
    for (int d = 0; d < n; d++) {
        down(d, h, b[d], count * (size_t)n * 4);
        for (int s = 0; s < n; s++)
            for (size_t i = 0; i < count; i++) bad += h[(size_t)s * count + i] != (int32_t)(s * 1000003 + (int)i);
    }
    result(!r && !bad, "allgather-in-place", "rc %d, %zu wrong", r, bad);
    /* broadcast in place from root 2 % n */
    int root = 2 % n;
    for (int d = 0; d < n; d++) {
        for (size_t i = 0; i < count; i++) h[i] = d == root ? (int32_t)(7 * i + 1) : -1;
        up(d, b[d], h, count * 4);
    }
    ncclGroupStart();
    for (int d = 0; d < n; d++) ncclBroadcast((void *)b[d], (void *)b[d], count, I32, root, cs[d], stream[d]);
    r = ncclGroupEnd();
    bad = 0;
    for (int d = 0; d < n; d++) {
        down(d, h, b[d], count * 4);
        for (size_t i = 0; i < count; i++) bad += h[i] != (int32_t)(7 * i + 1);
    }
    result(!r && !bad, "broadcast-in-place", "rc %d, %zu wrong", r, bad);
    /* reduce-scatter in place: recvbuff = sendbuff + rank*count */
    for (int d = 0; d < n; d++) {
        for (size_t i = 0; i < count * (size_t)n; i++) h[i] = (int32_t)(i % 7 + d);
        up(d, b[d], h, count * (size_t)n * 4);
    }
    ncclGroupStart();
    for (int d = 0; d < n; d++)
        ncclReduceScatter((void *)b[d], (void *)(b[d] + (size_t)d * count * 4), count, I32, SUM, cs[d], stream[d]);
    r = ncclGroupEnd();
    bad = 0;
    for (int d = 0; d < n; d++) {
        down(d, h, b[d] + (size_t)d * count * 4, count * 4);
        for (size_t i = 0; i < count; i++) {
            size_t j = (size_t)d * count + i;
            int32_t want = 0;
            for (int s = 0; s < n; s++) want += (int32_t)(j % 7 + (size_t)s);
            bad += h[i] != want;
        }
    }
    result(!r && !bad, "reducescatter-in-place", "rc %d, %zu wrong", r, bad);
    /* all-to-all as grouped send/recv, several messages per pair, bigger than a channel */
    size_t blk = count;
    CUdeviceptr s2[MAXD], r2[MAXD];
    int32_t *hh = malloc(blk * (size_t)n * 4);
    for (int d = 0; d < n; d++) {
        s2[d] = dalloc(d, blk * (size_t)n * 4);
        r2[d] = dalloc(d, blk * (size_t)n * 4);
        for (size_t i = 0; i < blk * (size_t)n; i++) hh[i] = (int32_t)(d * 100000000 + (int)i);
        up(d, s2[d], hh, blk * (size_t)n * 4);
    }
    ncclGroupStart();
    for (int d = 0; d < n; d++) {
        ncclGroupStart();
        for (int p = 0; p < n; p++) {
            ncclSend((void *)(s2[d] + (size_t)p * blk * 4), blk, I32, p, cs[d], stream[d]);
            ncclRecv((void *)(r2[d] + (size_t)p * blk * 4), blk, I32, p, cs[d], stream[d]);
        }
        ncclGroupEnd();
    }
    r = ncclGroupEnd();
    bad = 0;
    for (int d = 0; d < n; d++) {
        down(d, hh, r2[d], blk * (size_t)n * 4);
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < blk; i++)
                bad += hh[(size_t)p * blk + i] != (int32_t)(p * 100000000 + (int)((size_t)d * blk + i));
    }
    result(!r && !bad, "alltoall-grouped-sendrecv", "rc %d, %zu wrong, %zu B per message", r, bad, blk * 4);
    free(hh);
    free(h);
}

static int expect_invalid(const char *name, int rc, comm_t c, const char *words) {
    const char *last = ncclGetLastError(c);
    int ok = rc == 4 && last && strstr(last, words);
    result(ok, name, "rc %d (want 4 ncclInvalidArgument), last error: %s", rc, last ? last : "(null)");
    return ok;
}

static void test_bad_args(comm_t *cs, int n) {
    CUdeviceptr a = dalloc(0, 4096), b = dalloc(0, 4096), other = dalloc(1, 4096);
    float host[1024];
    expect_invalid("overrun-recvbuff", ncclAllReduce((void *)a, (void *)b, 1025, F32, SUM, cs[0], stream[0]), cs[0], "runs past the end");
    expect_invalid("host-pointer", ncclAllReduce(host, (void *)b, 16, F32, SUM, cs[0], stream[0]), cs[0], "not a valid pointer");
    expect_invalid("null-sendbuff", ncclAllReduce(NULL, (void *)b, 16, F32, SUM, cs[0], stream[0]), cs[0], "NULL");
    expect_invalid("other-device-buffer", ncclAllReduce((void *)a, (void *)other, 16, F32, SUM, cs[0], stream[0]), cs[0], "mismatchs with NCCL device");
    expect_invalid("allgather-overrun", ncclAllGather((void *)a, (void *)b, 1024 / n + 1, F32, cs[0], stream[0]), cs[0], "runs past");
    expect_invalid("allgather-not-in-place", ncclAllGather((void *)(a + 4), (void *)a, 16, F32, cs[0], stream[0]), cs[0], "not in place");
    expect_invalid("reducescatter-not-in-place", ncclReduceScatter((void *)a, (void *)(a + 8), 16, F32, SUM, cs[0], stream[0]), cs[0], "not in place");
    expect_invalid("allreduce-partial-overlap", ncclAllReduce((void *)a, (void *)(a + 4), 16, F32, SUM, cs[0], stream[0]), cs[0], "overlap");
    expect_invalid("bad-root", ncclBroadcast((void *)a, (void *)b, 16, F32, n, cs[0], stream[0]), cs[0], "invalid root");
    expect_invalid("bad-type", ncclAllReduce((void *)a, (void *)b, 16, 42, SUM, cs[0], stream[0]), cs[0], "invalid type");
    expect_invalid("bad-op", ncclAllReduce((void *)a, (void *)b, 16, F32, 77, cs[0], stream[0]), cs[0], "invalid reduction");
    expect_invalid("wrong-stream-device", ncclAllReduce((void *)a, (void *)b, 16, F32, SUM, cs[0], stream[1]), cs[0], "stream");
    CUdeviceptr gone = dalloc(0, 256);
    cuMemFree_v2(gone);
    expect_invalid("freed-buffer", ncclAllReduce((void *)gone, (void *)b, 16, F32, SUM, cs[0], stream[0]), cs[0], "freed");
    /* The group carries the first error to its end and launches nothing. */
    ncclGroupStart();
    int r1 = ncclAllReduce((void *)a, (void *)b, 4096, F32, SUM, cs[0], stream[0]);
    int r2 = ncclGroupEnd();
    result(r1 == 4 && r2 == 4 && settle(0, 100), "group-end-returns-the-error", "call %d, group end %d", r1, r2);
    result(ncclGroupEnd() == 5, "group-end-without-start", "ncclInvalidUsage");
    /* CUDA copies are checked too. */
    result(cuMemcpyHtoDAsync_v2(a + 4000, host, 200, stream[0]) == 1, "cuda-copy-overrun", "CUDA_ERROR_INVALID_VALUE");
    cuMemFree_v2(a);
    cuMemFree_v2(b);
    cuMemFree_v2(other);
}

static void test_mismatch_and_abort(int n) {
    comm_t cs[MAXD];
    int devs[MAXD];
    for (int d = 0; d < n; d++) devs[d] = d;
    ncclCommInitAll(cs, n, devs);
    CUdeviceptr b[MAXD];
    for (int d = 0; d < n; d++) b[d] = dalloc(d, 4096);
    /* rank 0 all-reduces while the others broadcast */
    ncclGroupStart();
    ncclAllReduce((void *)b[0], (void *)b[0], 64, F32, SUM, cs[0], stream[0]);
    for (int d = 1; d < n; d++) ncclBroadcast((void *)b[d], (void *)b[d], 64, F32, 0, cs[d], stream[d]);
    ncclGroupEnd();
    int ok = 1, e = 0;
    for (int d = 0; d < n; d++) {
        ok &= settle(d, 2000);
        ncclCommGetAsyncError(cs[d], &e);
        ok &= e == 5;
    }
    result(ok, "mismatched-collectives", "async error %d: %s", e, ncclGetLastError(cs[0]));
    for (int d = 0; d < n; d++) ncclCommAbort(cs[d]);
    /* a send/recv pair that disagrees on the size */
    ncclCommInitAll(cs, n, devs);
    ncclGroupStart();
    ncclSend((void *)b[0], 10, F32, 1, cs[0], stream[0]);
    ncclRecv((void *)b[1], 12, F32, 0, cs[1], stream[1]);
    ncclGroupEnd();
    ok = settle(1, 2000);
    ncclCommGetAsyncError(cs[1], &e);
    result(ok && e == 5, "sendrecv-size-mismatch", "async error %d: %s", e, ncclGetLastError(cs[1]));
    for (int d = 0; d < n; d++) ncclCommAbort(cs[d]);
    /* a collective a peer never joins: the stream stays busy until ncclCommAbort */
    ncclCommInitAll(cs, n, devs);
    ncclAllReduce((void *)b[0], (void *)b[0], 64, F32, SUM, cs[0], stream[0]);
    int busy = !settle(0, 300);
    ncclCommAbort(cs[0]);
    int freed = settle(0, 2000);
    result(busy && freed, "abort-breaks-a-wait", "busy while the peer is missing: %d, completed after abort: %d", busy, freed);
    for (int d = 1; d < n; d++) ncclCommDestroy(cs[d]);
    for (int d = 0; d < n; d++) cuMemFree_v2(b[d]);
}

static void test_premulsum(comm_t *cs, int n) {
    CUdeviceptr b[MAXD];
    int ops[MAXD];
    for (int d = 0; d < n; d++) {
        b[d] = dalloc(d, 64 * 4);
        float h[64], s = (float)(d + 1);
        for (int i = 0; i < 64; i++) h[i] = (float)i;
        up(d, b[d], h, sizeof h);
        ncclRedOpCreatePreMulSum(&ops[d], &s, F32, 1, cs[d]);
    }
    ncclGroupStart();
    for (int d = 0; d < n; d++) ncclAllReduce((void *)b[d], (void *)b[d], 64, F32, ops[d], cs[d], stream[d]);
    int r = ncclGroupEnd();
    float h[64];
    down(0, h, b[0], sizeof h);
    size_t bad = 0;
    for (int i = 0; i < 64; i++) bad += h[i] != (float)i * (float)(n * (n + 1) / 2);
    result(!r && !bad, "premulsum-user-op", "rc %d, %zu wrong (each rank's own scalar)", r, bad);
}

/* ------------------------------------------------------------------ processes */

static const char *g_self, *g_lib;

static char *hex(const ncclUniqueId *id) {
    static char s[257];
    for (int i = 0; i < 128; i++) sprintf(s + 2 * i, "%02x", (unsigned char)id->internal[i]);
    return s;
}

static pid_t spawn(const char *role, int rank, int n, int dev, const ncclUniqueId *id, char *const extra_env[]) {
    pid_t p = fork();
    if (p == 0) {
        for (int i = 0; extra_env && extra_env[i]; i++) putenv(extra_env[i]);
        char r[16], nn[16], dd[16];
        snprintf(r, sizeof r, "%d", rank);
        snprintf(nn, sizeof nn, "%d", n);
        snprintf(dd, sizeof dd, "%d", dev);
        execl(g_self, g_self, "--child", role, g_lib, r, nn, dd, hex(id), (char *)NULL);
        _exit(127);
    }
    return p;
}

static int reap(pid_t p, int secs) {
    for (int i = 0; i < secs * 100; i++) {
        int st;
        pid_t w = waitpid(p, &st, WNOHANG);
        if (w == p) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        usleep(10000);
    }
    kill(p, 9);
    waitpid(p, NULL, 0);
    return -1; /* still running */
}

/* A child rank. Exit status: 0 fine, 1 wrong, 10 + ncclResult of a failed init, 3 hung. */
static int child(const char *role, int rank, int n, int dev, const char *idhex) {
    ncclUniqueId id;
    for (int i = 0; i < 128; i++) {
        unsigned v;
        sscanf(idhex + 2 * i, "%2x", &v);
        id.internal[i] = (char)v;
    }
    if (!strcmp(role, "uid")) {
        ncclUniqueId fresh;
        return ncclGetUniqueId(&fresh);
    }
    cuInit(0);
    open_dev(dev);
    comm_t c;
    int r = ncclCommInitRank(&c, n, id, rank);
    if (r) {
        fprintf(stderr, "rank %d: init %d: %s\n", rank, r, ncclGetLastError(NULL));
        return 10 + r;
    }
    if (!strcmp(role, "basic")) {
        size_t count = 300000; /* 1.2 MB: several windows and channel laps */
        CUdeviceptr s = dalloc(dev, count * 4), d = dalloc(dev, count * 4);
        float *h = malloc(count * 4);
        for (size_t i = 0; i < count; i++) h[i] = (float)((i + (size_t)rank) % 3);
        up(dev, s, h, count * 4);
        ncclAllReduce((void *)s, (void *)d, count, F32, SUM, c, stream[dev]);
        down(dev, h, d, count * 4);
        for (size_t i = 0; i < count; i++) {
            float want = 0;
            for (int q = 0; q < n; q++) want += (float)((i + (size_t)q) % 3);
            if (h[i] != want) return 1;
        }
        /* ring send/recv */
        for (size_t i = 0; i < count; i++) h[i] = (float)(rank * 1000 + (int)(i % 1000));
        up(dev, s, h, count * 4);
        ncclGroupStart();
        ncclSend((void *)s, count, F32, (rank + 1) % n, c, stream[dev]);
        ncclRecv((void *)d, count, F32, (rank + n - 1) % n, c, stream[dev]);
        ncclGroupEnd();
        down(dev, h, d, count * 4);
        int from = (rank + n - 1) % n;
        for (size_t i = 0; i < count; i++)
            if (h[i] != (float)(from * 1000 + (int)(i % 1000))) return 1;
        ncclCommDestroy(c);
        return 0;
    }
    if (!strcmp(role, "die")) {
        if (rank == 1) _exit(0); /* gone without a word */
        CUdeviceptr b = dalloc(dev, 4096);
        ncclAllReduce((void *)b, (void *)b, 64, F32, SUM, c, stream[dev]);
        for (int i = 0; i < 3000; i++) {
            int e = 0;
            ncclCommGetAsyncError(c, &e);
            if (e) {
                fprintf(stderr, "rank %d: async error %d: %s\n", rank, e, ncclGetLastError(c));
                return 20 + e;
            }
            if (cuStreamQuery(stream[dev]) == 0) return 0;
            usleep(1000);
        }
        ncclCommAbort(c);
        return 3;
    }
    return 0;
}

static void test_processes(void) {
    ncclUniqueId id;
    int r = ncclGetUniqueId(&id);
    char path[200];
    snprintf(path, sizeof path, "/dev/shm%s", id.internal + 8);
    struct stat st;
    int made = !r && stat(path, &st) == 0 && (st.st_mode & 0777) == 0600;
    result(made, "unique-id-area-0600", "%s", path);
    pid_t p[3];
    for (int k = 0; k < 3; k++) p[k] = spawn("basic", k, 3, k, &id, NULL);
    int ok = 1;
    for (int k = 0; k < 3; k++) ok &= reap(p[k], 60) == 0;
    result(ok, "three-processes-allreduce-and-ring", "1.2 MB per rank through windows and channels");
    result(stat(path, &st) != 0, "unique-id-area-unlinked", "%s gone once every rank joined", path);

    /* NCCL's bootstrap: no interface NCCL_SOCKET_IFNAME names -> ncclInvalidUsage at the id. */
    static char noif[] = "NCCL_SOCKET_IFNAME==no-such-iface0";
    char *enoif[] = {noif, NULL};
    p[0] = spawn("uid", 0, 1, 0, &id, enoif);
    int u = reap(p[0], 30);
    result(u == 5, "bootstrap-no-interface", "ncclGetUniqueId -> %d (want 5 ncclInvalidUsage)", u);
    /* ... and a root nobody listens at: NCCL's connect retries, then ncclRemoteError. */
    ncclGetUniqueId(&id);
    struct sockaddr_in dead = {.sin_family = AF_INET, .sin_port = htons(1)};
    dead.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    memset(id.internal + 72, 0, 28);
    memcpy(id.internal + 72, &dead, sizeof dead);
    static char rc2[] = "NCCL_SOCKET_RETRY_CNT=2", rs[] = "NCCL_SOCKET_RETRY_SLEEP_MSEC=10";
    char *eretry[] = {rc2, rs, NULL};
    p[0] = spawn("init", 0, 2, 0, &id, eretry);
    u = reap(p[0], 30);
    result(u == 16, "bootstrap-root-unreachable", "init exit %d (want 10 + 6 ncclRemoteError after 2 retries)", u);
    char nm[65];
    memcpy(nm, id.internal + 8, 64);
    nm[64] = 0;
    shm_unlink(nm);

    /* Two ranks on one GPU of one host: NCCL's duplicate GPU check. */
    ncclGetUniqueId(&id);
    p[0] = spawn("init", 0, 2, 0, &id, NULL);
    p[1] = spawn("init", 1, 2, 0, &id, NULL);
    int a = reap(p[0], 30), b = reap(p[1], 30);
    result(a == 15 && b == 15, "duplicate-gpu-detected", "init exit %d %d (want ncclInvalidUsage)", a - 10, b - 10);
    /* ... fine with a host id each, as ringlab's --ranks-per-gpu sets. */
    ncclGetUniqueId(&id);
    static char h0[] = "NCCL_HOSTID=selftest-host0", h1[] = "NCCL_HOSTID=selftest-host1";
    char *e0[] = {h0, NULL}, *e1[] = {h1, NULL};
    p[0] = spawn("basic", 0, 2, 0, &id, e0);
    p[1] = spawn("basic", 1, 2, 0, &id, e1);
    a = reap(p[0], 60);
    b = reap(p[1], 60);
    result(a == 0 && b == 0, "shared-gpu-with-host-ids", "exit %d %d", a, b);

    /* A peer that dies: another host -> ncclRemoteError; the same host -> a hang. */
    ncclGetUniqueId(&id);
    p[0] = spawn("die", 0, 2, 0, &id, e0);
    p[1] = spawn("die", 1, 2, 0, &id, e1);
    reap(p[1], 30);
    a = reap(p[0], 30);
    result(a == 26, "dead-peer-other-host-remote-error", "exit %d (want 26: ncclRemoteError)", a);
    ncclGetUniqueId(&id);
    p[0] = spawn("die", 0, 2, 0, &id, NULL);
    p[1] = spawn("die", 1, 2, 1, &id, NULL);
    reap(p[1], 30);
    a = reap(p[0], 30);
    result(a == 3, "dead-peer-same-host-hangs", "exit %d (want 3: still waiting after 3 s, then aborted)", a);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 8 && !strcmp(argv[1], "--child")) {
        load(argv[3]);
        return child(argv[2], atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), argv[7]);
    }
    if (argc < 2) {
        fprintf(stderr, "usage: %s LIBDIR\n", argv[0]);
        return 2;
    }
    g_self = "/proc/self/exe";
    static char self[4096];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k > 0) {
        self[k] = 0;
        g_self = self;
    }
    g_lib = argv[1];
    /* Small areas force collectives into windows and p2p messages around the ring buffers. */
    setenv("STANDIN_GPUS", "4", 1);
    setenv("STANDIN_NCCL_SLOT_BYTES", "65536", 1);
    setenv("STANDIN_NCCL_CHAN_BYTES", "16384", 1);
    load(argv[1]);
    int v = 0, ng = 0;
    ncclGetVersion(&v);
    result(v == 22809, "version", "%d", v);
    int okg = cuInit(0) == 0 && cuDeviceGetCount(&ng) == 0 && ng == 4;
    result(okg, "gpus", "STANDIN_GPUS=4: %d", ng);
    for (int d = 0; d < 4; d++) open_dev(d);
    void *e1, *e2;
    cuCtxSetCurrent(ctx[0]);
    cuEventCreate(&e1, 0);
    cuEventCreate(&e2, 0);
    cuEventRecord(e1, stream[0]);
    cuEventRecord(e2, stream[0]);
    cuStreamSynchronize(stream[0]);
    float ms = -1;
    int oke = cuEventQuery(e2) == 0 && cuEventElapsedTime(&ms, e1, e2) == 0 && ms >= 0;
    result(oke, "events", "elapsed %.3f ms", ms);
    const char *es = NULL;
    cuGetErrorString(700, &es);
    result(es && strstr(es, "illegal memory access"), "cuGetErrorString", "%s", es ? es : "(null)");

    for (int n = 2; n <= 3; n++) {
        comm_t cs[MAXD];
        int devs[MAXD] = {0, 1, 2, 3};
        int r = ncclCommInitAll(cs, n, devs);
        int cnt = 0, rk = 0, dv = 0;
        ncclCommCount(cs[n - 1], &cnt);
        ncclCommUserRank(cs[n - 1], &rk);
        ncclCommCuDevice(cs[n - 1], &dv);
        result(!r && cnt == n && rk == n - 1 && dv == n - 1, n == 2 ? "initall-2" : "initall-3", "count %d rank %d dev %d", cnt, rk, dv);
        test_reductions(cs, n, 20000); /* 20000 x 8 B > the 64 KiB slot: windows */
        test_inplace_and_moves(cs, n, 10000);
        test_premulsum(cs, n);
        if (n == 2) test_bad_args(cs, n);
        for (int d = 0; d < n; d++) ncclCommDestroy(cs[d]);
    }
    test_mismatch_and_abort(3);
    test_processes();
    printf("# %d failed\n", fails);
    return fails ? 1 : 0;
}
