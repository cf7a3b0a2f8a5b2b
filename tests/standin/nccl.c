/* libnccl.so.2 stand-in: NCCL 2.28.9's API on the CPU, over the CUDA stand-in (cuda.c).
 *
 * Ranks meet in a shared-memory area. ncclGetUniqueId makes it (shm_open, O_EXCL, 0600) and
 * puts its random name in the 128-byte id; ncclCommInitRank opens it, and the last rank to join
 * unlinks the name. ncclCommInitAll uses an anonymous shared mapping. The area holds:
 *   - a header (rank count, a barrier, the abort flag),
 *   - per rank: pid, device, host id, the collective it is in, a p2p doorbell,
 *   - per rank a slot for collectives: each rank copies a window of its input there, waits
 *     for all (barrier), computes its output from every slot, waits again; big buffers go
 *     window by window,
 *   - per ordered pair of ranks a byte ring for ncclSend/ncclRecv (each message a header
 *     with its size, so mismatched counts are caught).
 * Work runs on the stream's worker thread (standin_cuda_launch): an NCCL call returns at
 * once, as NCCL's does, and completion shows on the stream. A group's operations are launched
 * at the outermost ncclGroupEnd, one "kernel" per communicator.
 *
 * Checks: every buffer against the CUDA stand-in's live allocations (ncclInvalidArgument,
 * with the reason in ncclGetLastError), NCCL's in-place rules, matching collectives across
 * ranks (a mismatch is an asynchronous ncclInvalidUsage; real NCCL would hang or corrupt),
 * and NCCL's duplicate-GPU check at init (NCCL_HOSTID respected).
 *
 * Before joining the area a rank goes through NCCL's socket bootstrap (interface choice by
 * NCCL_SOCKET_IFNAME, a root listening in the id's maker, NCCL's connect retries and log lines),
 * so that the hang lab's NIC scenarios behave as on NCCL (STANDIN_NCCL_BOOTSTRAP=0 skips it).
 * A peer's abort or death reaches the others as ncclRemoteError when it is on another host
 * (NCCL_HOSTID), and not at all on the same host (STANDIN_NCCL_PEER_FAULT=error|hang forces).
 *
 * Faults on demand:
 *   STANDIN_NCCL_FAIL_AT=k       the k-th operation call (collective, send or recv, counted
 *                                per process) returns STANDIN_NCCL_FAIL_CODE (default 2,
 *                                ncclSystemError)
 *   STANDIN_NCCL_ASYNC_ERROR=k   after operation k has run, ncclCommGetAsyncError reports
 *                                ncclRemoteError
 *   STANDIN_NCCL_FAIL_RANK=r     the two above only on rank r
 *   STANDIN_NCCL_LAZY=1          operations synchronise but write no output
 * Sizes: STANDIN_NCCL_SLOT_BYTES (per rank, default 4 MiB), STANDIN_NCCL_CHAN_BYTES (per pair,
 * default 1 MiB), taken from the environment of the process that made the id.
 * Logging follows NCCL_DEBUG (VERSION, WARN, INFO) and NCCL_DEBUG_FILE (%h, %p).
 *
 * Build: cc -shared -fPIC -O1 -Wall -Werror -pthread -Wl,-soname,libnccl.so.2 \
 *          -o libnccl.so.2 nccl.c -ldl -lrt
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "standin.h"

#define EXPORT __attribute__((visibility("default")))

/* ---------------------------------------------------------------- NCCL's types */

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclTimeout = 8,
} ncclResult_t;

enum {
    ncclInt8 = 0,
    ncclUint8 = 1,
    ncclInt32 = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6,
    ncclFloat32 = 7,
    ncclFloat64 = 8,
    ncclBfloat16 = 9,
    ncclFloat8e4m3 = 10,
    ncclFloat8e5m2 = 11,
    ncclNumTypes = 12,
};

enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4, ncclNumOps = 5 };
enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 };

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_VERSION_CODE 22809

typedef struct {
    char internal[128];
} ncclUniqueId;

/* Operation kinds. */
enum { K_ALLREDUCE, K_BROADCAST, K_REDUCE, K_ALLGATHER, K_REDUCESCATTER, K_SEND, K_RECV };
static const char *const KIND_NAME[] = {"AllReduce", "Broadcast",     "Reduce", "AllGather",
                                        "ReduceScatter", "Send", "Recv"};
/* Reduction kinds after resolving ncclAvg and user ops. */
enum { R_SUM, R_PROD, R_MAX, R_MIN, R_AVG_INT, R_PREMULSUM, R_NONE };
static const char *const RED_NAME[] = {"sum", "prod", "max", "min", "avg", "premulsum", "none"};

static const char *const TYPE_NAME[] = {"int8",  "uint8",   "int32",  "uint32",
                                        "int64", "uint64",  "half",   "float",
                                        "double", "bfloat16", "fp8e4m3", "fp8e5m2"};

static size_t type_size(int t) {
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

static int type_is_float(int t) {
    return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16;
}

/* ---------------------------------------------------------------- configuration */

static struct {
    long fail_at, fail_code, async_at, fail_rank;
    long init_stuck; /* this rank's init never joins (-1: none) */
    long connect_stuck; /* this call's launch (its connect, NCCL >= 2.22) never ends (0: none) */
    int lazy;
    size_t slot_bytes, chan_bytes;
    int debug; /* 0 none, 1 VERSION, 2 WARN, 3 INFO, 4 TRACE */
    int tuning;
    char algo[32];
    int trace;
    int peer_fault; /* how a peer's abort or death shows: 0 by host, 1 error, 2 never (hang) */
    int bootstrap;  /* meet through sockets first, as NCCL's bootstrap does */
    long retry_cnt, retry_ms;
    int family;     /* NCCL_SOCKET_FAMILY: AF_INET, AF_INET6 or -1 */
} cfg;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static FILE *g_log;
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_host[256];

static long env_long(const char *name, long dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    return *end ? dflt : x;
}

static void open_log(void) {
    const char *f = getenv("NCCL_DEBUG_FILE");
    if (!f || !*f) {
        g_log = stdout;
        return;
    }
    char path[PATH_MAX];
    size_t o = 0;
    for (const char *p = f; *p && o + 64 < sizeof path; p++) {
        if (p[0] == '%' && p[1] == 'h') {
            o += (size_t)snprintf(path + o, sizeof path - o, "%s", g_host);
            p++;
        } else if (p[0] == '%' && p[1] == 'p') {
            o += (size_t)snprintf(path + o, sizeof path - o, "%d", (int)getpid());
            p++;
        } else {
            path[o++] = *p;
        }
    }
    path[o] = 0;
    g_log = fopen(path, "w");
    if (!g_log) g_log = stdout;
    else setvbuf(g_log, NULL, _IOLBF, 0);
}

static void configure(void) {
    cfg.fail_at = env_long("STANDIN_NCCL_FAIL_AT", 0);
    cfg.fail_code = env_long("STANDIN_NCCL_FAIL_CODE", ncclSystemError);
    /* Any positive code: 9 and up are codes a newer NCCL may add (the caller must read them
     * as the int they are, not as an enum that lacks them). */
    if (cfg.fail_code < 1 || cfg.fail_code > 99) cfg.fail_code = ncclSystemError;
    cfg.init_stuck = env_long("STANDIN_NCCL_INIT_STUCK", -1);
    cfg.connect_stuck = env_long("STANDIN_NCCL_CONNECT_STUCK", 0);
    cfg.async_at = env_long("STANDIN_NCCL_ASYNC_ERROR", 0);
    cfg.fail_rank = env_long("STANDIN_NCCL_FAIL_RANK", -1);
    cfg.lazy = (int)env_long("STANDIN_NCCL_LAZY", 0);
    long slot = env_long("STANDIN_NCCL_SLOT_BYTES", 4 << 20);
    long chan = env_long("STANDIN_NCCL_CHAN_BYTES", 1 << 20);
    cfg.slot_bytes = (size_t)(slot < 4096 ? 4096 : slot) & ~(size_t)63;
    cfg.chan_bytes = (size_t)(chan < 4096 ? 4096 : chan) & ~(size_t)63;
    cfg.trace = (int)env_long("STANDIN_TRACE", 0);
    const char *pf = getenv("STANDIN_NCCL_PEER_FAULT");
    cfg.peer_fault = pf && !strcmp(pf, "error") ? 1 : pf && !strcmp(pf, "hang") ? 2 : 0;
    cfg.bootstrap = (int)env_long("STANDIN_NCCL_BOOTSTRAP", 1);
    cfg.retry_cnt = env_long("NCCL_SOCKET_RETRY_CNT", 34);
    cfg.retry_ms = env_long("NCCL_SOCKET_RETRY_SLEEP_MSEC", 100);
    const char *fam = getenv("NCCL_SOCKET_FAMILY");
    cfg.family = fam && !strcasecmp(fam, "AF_INET") ? AF_INET
                 : fam && !strcasecmp(fam, "AF_INET6") ? AF_INET6 : -1;
    const char *d = getenv("NCCL_DEBUG");
    cfg.debug = 0;
    if (d) {
        if (!strcasecmp(d, "VERSION")) cfg.debug = 1;
        else if (!strcasecmp(d, "WARN")) cfg.debug = 2;
        else if (!strcasecmp(d, "INFO")) cfg.debug = 3;
        else if (!strcasecmp(d, "TRACE")) cfg.debug = 4;
        else if (!strcasecmp(d, "ABORT")) cfg.debug = 2;
    }
    const char *sub = getenv("NCCL_DEBUG_SUBSYS");
    cfg.tuning = sub && (strcasestr(sub, "TUNING") || strcasestr(sub, "ALL"));
    const char *algo = getenv("NCCL_ALGO");
    snprintf(cfg.algo, sizeof cfg.algo, "%s", algo && *algo ? algo : "Ring");
    for (char *p = cfg.algo; *p; p++)
        if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 'a' + 'A');
    if (gethostname(g_host, sizeof g_host) != 0) snprintf(g_host, sizeof g_host, "localhost");
    g_host[sizeof g_host - 1] = 0;
    char *dot = strchr(g_host, '.');
    if (dot) *dot = 0;
    if (cfg.debug) open_log();
}

static void setup(void) { pthread_once(&g_once, configure); }

/* ---------------------------------------------------------------- the CUDA stand-in */

static standin_check_range_fn cu_check;
static standin_stream_device_fn cu_stream_dev;
static standin_launch_fn cu_launch;
static standin_current_device_fn cu_cur_dev;
static int (*cu_err_string)(int, const char **);
static pthread_once_t g_cuda_once = PTHREAD_ONCE_INIT;

static void find_cuda(void) {
    /* cudarc opened libcuda with RTLD_LOCAL: its symbols are not global, so ask the loader for
     * that very object by name; load it if nobody did yet. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return;
    cu_check = (standin_check_range_fn)dlsym(h, STANDIN_SYM_CHECK_RANGE);
    cu_stream_dev = (standin_stream_device_fn)dlsym(h, STANDIN_SYM_STREAM_DEVICE);
    cu_launch = (standin_launch_fn)dlsym(h, STANDIN_SYM_LAUNCH);
    cu_cur_dev = (standin_current_device_fn)dlsym(h, STANDIN_SYM_CURRENT_DEVICE);
}

static int have_cuda(void) {
    pthread_once(&g_cuda_once, find_cuda);
    return cu_check && cu_stream_dev && cu_launch && cu_cur_dev;
}

/* ---------------------------------------------------------------- logging, last error */

static __thread char t_last[1024];
static __thread int t_dev = -1;

static void emit(const char *level, int line, const char *msg) {
    pthread_mutex_lock(&g_log_mu);
    if (g_log) {
        if (line)
            fprintf(g_log, "%s:%d:%d [%d] standin/nccl.c:%d NCCL %s %s\n", g_host, (int)getpid(),
                    (int)syscall(SYS_gettid), t_dev < 0 ? 0 : t_dev, line, level, msg);
        else
            fprintf(g_log, "%s:%d:%d [%d] NCCL %s %s\n", g_host, (int)getpid(),
                    (int)syscall(SYS_gettid), t_dev < 0 ? 0 : t_dev, level, msg);
        fflush(g_log);
    }
    pthread_mutex_unlock(&g_log_mu);
}

static void info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void info(const char *fmt, ...) {
    if (cfg.debug < 3) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    emit("INFO", 0, buf);
}

/* A WARN: logged as NCCL does, and kept as this thread's last error. */
#define WARN(...) warn_at(__LINE__, __VA_ARGS__)
static void warn_at(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn_at(int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_last, sizeof t_last, fmt, ap);
    va_end(ap);
    if (cfg.debug >= 2) emit("WARN", line, t_last);
}

static void trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void trace(const char *fmt, ...) {
    if (!cfg.trace) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "standin-nccl[%d]: %s\n", (int)getpid(), buf);
}

/* ---------------------------------------------------------------- futex */

static void futex_wake(_Atomic uint32_t *w) {
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void futex_wait(_Atomic uint32_t *w, uint32_t old, long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, old, &ts, NULL, 0);
}

/* ---------------------------------------------------------------- the shared area */

#define AREA_MAGIC "SINCCL-AREA-v1"
#define ID_MAGIC "SINCCL01"
/* The id: magic [0,8), the area's name [8,72), the bootstrap root's sockaddr [72,100) (family 0:
 * no root), random [112,128). */
#define ID_NAME_AT 8
#define ID_NAME_LEN 64
#define ID_ROOT_AT 72
#define HDR_BYTES 4096
#define RANKINFO_BYTES 512
#define CHAN_HDR 128
#define MAX_RANKS 4096

struct area_hdr {
    char magic[16];
    uint64_t slot_bytes, chan_bytes;
    uint64_t comm_hash;
    _Atomic uint32_t nranks; /* 0 until the first rank joins */
    _Atomic uint32_t joined; /* futex */
    _Atomic uint32_t abort_by; /* 0, or 1 + the rank that aborted (futex-woken everywhere) */
    _Atomic uint32_t bar_count;
    _Atomic uint32_t bar_gen; /* futex */
};

struct desc {
    uint32_t kind, dtype, red, root;
    uint64_t count, off, len, seq;
    double scalar;
};

struct rankinfo {
    _Atomic uint32_t present;
    int32_t split_color, split_key; /* this rank's ncclCommSplit arguments */
    int32_t pid, dev;
    int64_t bus;
    _Atomic uint32_t doorbell; /* futex: p2p progress for this rank */
    _Atomic uint32_t aborted;  /* this rank ran ncclCommAbort */
    struct desc d;
    char host[256];
};

struct chan {
    _Atomic uint64_t w; /* bytes ever written */
    char pad1[56];
    _Atomic uint64_t r; /* bytes ever read */
    char pad2[56];
};

_Static_assert(sizeof(struct area_hdr) <= HDR_BYTES, "header");
_Static_assert(sizeof(struct rankinfo) <= RANKINFO_BYTES, "rankinfo");
_Static_assert(sizeof(struct chan) == CHAN_HDR, "chan");

static size_t area_bytes(size_t n, size_t slot, size_t chan) {
    return HDR_BYTES + n * RANKINFO_BYTES + n * slot + n * n * (CHAN_HDR + chan);
}

/* User-defined reduction ops (ncclRedOpCreatePreMulSum). */
#define MAX_USER_OPS 64
struct user_op {
    int used, dtype, residence;
    double scalar;
    const void *ptr;
};

#define COMM_MAGIC 0xC0AA17C5u

struct comm {
    uint32_t magic;
    int rank, nranks, dev;
    char *base;
    size_t bytes;
    struct area_hdr *hdr;
    _Atomic int async_err;
    char async_msg[1024];
    _Atomic int aborted;   /* ncclCommAbort ran here */
    _Atomic int finished;  /* destroyed or aborted: no more calls */
    _Atomic int refs;      /* the caller's, plus one per queued kernel */
    uint64_t seq;          /* collectives run (the worker's) */
    int keep_map;          /* ncclCommInitAll's shared mapping: never unmapped */
    struct user_op ops[MAX_USER_OPS];
    struct comm *next_all;
    /* A non-blocking init's handle (ncclCommInitRankConfig with blocking = 0): the caller
     * holds it at once while a thread makes the communicator it stands for (`real`);
     * `init_state` is ncclInProgress until then, and then the init's result. */
    int proxy;
    struct comm *_Atomic real;
    _Atomic int init_state;
    _Atomic int cancel;    /* ncclCommAbort during init: the init thread gives up */
    _Atomic int init_done; /* the init thread has finished */
    /* NCCL >= 2.23 on a non-blocking communicator (blocking = 0): every call's launch runs on
     * a thread of its own and the call returns ncclInProgress (NVIDIA/nccl v2.28.9-1
     * src/include/group.h:123, src/group.cc:706-738); `call_state` is ncclInProgress until
     * that thread is done, then its result (src/group.cc:628-630, ncclCommGetAsyncError
     * src/init.cc:2732-2736). */
    int blocking;
    _Atomic int call_state;
    struct comm *parent; /* ncclCommSplit's: the area is the parent's, and so is the mapping */
};

static struct comm *g_comms; /* every communicator ever made (structs are never freed) */
static pthread_mutex_t g_comms_mu = PTHREAD_MUTEX_INITIALIZER;

static struct rankinfo *RI(struct comm *c, int r) {
    return (struct rankinfo *)(c->base + HDR_BYTES + (size_t)r * RANKINFO_BYTES);
}
static char *SLOT(struct comm *c, int r) {
    return c->base + HDR_BYTES + (size_t)c->nranks * RANKINFO_BYTES + (size_t)r * c->hdr->slot_bytes;
}
static struct chan *CHAN(struct comm *c, int from, int to) {
    size_t n = (size_t)c->nranks;
    char *chans = c->base + HDR_BYTES + n * RANKINFO_BYTES + n * c->hdr->slot_bytes;
    return (struct chan *)(chans + ((size_t)from * n + (size_t)to) * (CHAN_HDR + c->hdr->chan_bytes));
}

static int comm_ok(struct comm *c) {
    if (!c) return 0;
    pthread_mutex_lock(&g_comms_mu);
    struct comm *x = g_comms;
    while (x && x != c) x = x->next_all;
    pthread_mutex_unlock(&g_comms_mu);
    return x && x->magic == COMM_MAGIC;
}

/* The communicator behind a valid handle: itself, or the one a non-blocking init made. While
 * that init runs, or after it failed, there is none: NULL, and *rc says what NCCL answers
 * (ncclCommEnsureReady: ncclInvalidArgument). */
static struct comm *fwd(struct comm *c, ncclResult_t *rc) {
    *rc = ncclSuccess;
    if (!c->proxy) return c;
    int st = atomic_load(&c->init_state);
    if (st != ncclSuccess) {
        *rc = ncclInvalidArgument;
        return NULL;
    }
    return atomic_load(&c->real);
}

static void comm_unref(struct comm *c) {
    if (atomic_fetch_sub(&c->refs, 1) == 1) {
        if (c->parent) {
            c->magic = 0;
            comm_unref(c->parent); /* the child's hold on the area it shares */
            return;
        }
        if (!c->keep_map) {
            munmap(c->base, c->bytes);
            c->base = NULL;
        }
        c->magic = 0;
    }
}

static void set_async(struct comm *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_async(struct comm *c, int code, const char *fmt, ...) {
    int zero = 0;
    if (!atomic_compare_exchange_strong(&c->async_err, &zero, -1)) return; /* first one wins */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->async_msg, sizeof c->async_msg, fmt, ap);
    va_end(ap);
    int save = t_dev;
    t_dev = c->dev;
    if (cfg.debug >= 2) emit("WARN", __LINE__, c->async_msg);
    t_dev = save;
    atomic_store(&c->async_err, code);
}

/* ---------------------------------------------------------------- waiting */

enum { WAIT_OK = 0, WAIT_ABORTED_HERE = 1, WAIT_ABORTED_PEER = 2, WAIT_PEER_GONE = 3 };

static int pid_gone(int pid) {
    if (pid <= 0) return 0;
    if (kill(pid, 0) == -1 && errno == ESRCH) return 1;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/* Does a fault of peer r (its abort, its death) reach this rank? NCCL's network transport sees
 * the connection close (ncclRemoteError); between ranks of one host NCCL's shared-memory and
 * P2P transports notice nothing and wait forever. STANDIN_NCCL_PEER_FAULT=error|hang forces
 * one or the other. */
static int peer_fault_reaches(struct comm *c, int r) {
    if (cfg.peer_fault == 1) return 1;
    if (cfg.peer_fault == 2) return 0;
    return strcmp(RI(c, r)->host, RI(c, c->rank)->host) != 0;
}

static int peer_gone(struct comm *c, int *who) {
    struct rankinfo *me = RI(c, c->rank);
    for (int r = 0; r < c->nranks; r++) {
        if (r == c->rank) continue;
        struct rankinfo *p = RI(c, r);
        if (p->pid == me->pid || !peer_fault_reaches(c, r)) continue;
        if (pid_gone(p->pid)) {
            *who = r;
            return 1;
        }
    }
    return 0;
}

static int check_stop(struct comm *c, int *who) {
    if (atomic_load(&c->aborted)) return WAIT_ABORTED_HERE;
    if (!atomic_load(&c->hdr->abort_by)) return WAIT_OK;
    for (int r = 0; r < c->nranks; r++) {
        if (r != c->rank && atomic_load(&RI(c, r)->aborted) && peer_fault_reaches(c, r)) {
            *who = r;
            return WAIT_ABORTED_PEER;
        }
    }
    return WAIT_OK;
}

/* Wait until *w differs from `old`; no timeout, but an abort (here or by a peer) or a peer on
 * another host that died ends it. */
static int wait_change(struct comm *c, _Atomic uint32_t *w, uint32_t old, int *who) {
    int spins = 0, naps = 0;
    while (atomic_load(w) == old) {
        int s = check_stop(c, who);
        if (s) return s;
        if (spins < 32) {
            spins++;
            sched_yield();
            continue;
        }
        futex_wait(w, old, 20);
        if (++naps % 50 == 0 && peer_gone(c, who)) return WAIT_PEER_GONE;
    }
    return WAIT_OK;
}

static int barrier(struct comm *c, int *who) {
    struct area_hdr *h = c->hdr;
    uint32_t gen = atomic_load(&h->bar_gen);
    if (atomic_fetch_add(&h->bar_count, 1) + 1 == (uint32_t)c->nranks) {
        atomic_store(&h->bar_count, 0);
        atomic_fetch_add(&h->bar_gen, 1);
        futex_wake(&h->bar_gen);
        return WAIT_OK;
    }
    return wait_change(c, &h->bar_gen, gen, who);
}

/* Make a stopped wait the communicator's asynchronous error. */
static void wait_failed(struct comm *c, int why, int who, const char *what) {
    switch (why) {
    case WAIT_ABORTED_HERE:
        set_async(c, ncclInvalidUsage, "%s: the communicator was aborted (ncclCommAbort)", what);
        break;
    case WAIT_ABORTED_PEER:
        set_async(c, ncclRemoteError,
                  "%s: rank %d aborted the communicator; its connections closed "
                  "(standin: NCCL reports this as a remote error)",
                  what, who);
        break;
    case WAIT_PEER_GONE:
        set_async(c, ncclRemoteError,
                  "%s: rank %d (pid %d, host %s) exited: Connection closed by remote peer", what,
                  who, RI(c, who)->pid, RI(c, who)->host);
        break;
    }
}

/* ---------------------------------------------------------------- element arithmetic */

static float half_to_float(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, f;
    if (e == 0) {
        if (m == 0) f = s;
        else { /* subnormal */
            e = 127 - 15 + 1;
            while (!(m & 0x400)) {
                m <<= 1;
                e--;
            }
            m &= 0x3ff;
            f = s | (e << 23) | (m << 13);
        }
    } else if (e == 31) {
        f = s | 0x7f800000 | (m << 13);
    } else {
        f = s | ((e + 127 - 15) << 23) | (m << 13);
    }
    float out;
    memcpy(&out, &f, 4);
    return out;
}

static uint16_t float_to_half(float x) {
    uint32_t f;
    memcpy(&f, &x, 4);
    uint32_t s = (f >> 16) & 0x8000;
    int32_t e = (int32_t)((f >> 23) & 0xff);
    uint32_t m = f & 0x7fffff;
    if (e == 255) return (uint16_t)(s | 0x7c00 | (m ? 0x200 | (m >> 13) : 0));
    int32_t he = e - 127 + 15;
    if (he >= 31) return (uint16_t)(s | 0x7c00);
    if (he <= 0) {
        if (he < -10) return (uint16_t)s;
        m |= 0x800000;
        uint32_t shift = (uint32_t)(14 - he);
        uint32_t hm = m >> shift, rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (hm & 1))) hm++;
        return (uint16_t)(s | hm);
    }
    uint32_t hm = m >> 13, rem = m & 0x1fff;
    uint32_t out = s | ((uint32_t)he << 10) | hm;
    if (rem > 0x1000 || (rem == 0x1000 && (hm & 1))) out++;
    return (uint16_t)out;
}

static float bf16_to_float(uint16_t b) {
    uint32_t f = (uint32_t)b << 16;
    float out;
    memcpy(&out, &f, 4);
    return out;
}

static uint16_t float_to_bf16(float x) {
    uint32_t f;
    memcpy(&f, &x, 4);
    if ((f & 0x7fffffff) > 0x7f800000) return (uint16_t)((f >> 16) | 0x40);
    f += 0x7fff + ((f >> 16) & 1);
    return (uint16_t)(f >> 16);
}

/* Reduce n inputs of `count` elements into dst, in rank order. scal[r]: PreMulSum's scalar
 * per rank (already in the element type's precision). */
#define RED_INT(T, UT)                                                                  \
    do {                                                                                \
        T *d = dst;                                                                     \
        for (size_t i = 0; i < count; i++) {                                            \
            T acc = ((const T *)in[0])[i];                                              \
            for (int r = 1; r < n; r++) {                                               \
                T x = ((const T *)in[r])[i];                                            \
                switch (red) {                                                          \
                case R_SUM: case R_AVG_INT: acc = (T)((UT)acc + (UT)x); break;          \
                case R_PROD: acc = (T)((UT)acc * (UT)x); break;                         \
                case R_MAX: acc = x > acc ? x : acc; break;                             \
                case R_MIN: acc = x < acc ? x : acc; break;                             \
                }                                                                       \
            }                                                                           \
            if (red == R_PREMULSUM) { /* integer PreMulSum: x * scalar, summed */       \
                acc = 0;                                                                \
                for (int r = 0; r < n; r++)                                             \
                    acc = (T)((UT)acc + (UT)(T)(((const T *)in[r])[i] * (T)scal[r]));   \
            }                                                                           \
            if (red == R_AVG_INT) acc = (T)(acc / (T)n);                                \
            d[i] = acc;                                                                 \
        }                                                                               \
    } while (0)

/* Floating types: every step rounded to the element type (F: load to float/double, S: store). */
#define RED_FLT(T, W, LOAD, STORE)                                                      \
    do {                                                                                \
        T *d = dst;                                                                     \
        for (size_t i = 0; i < count; i++) {                                            \
            W acc;                                                                      \
            if (red == R_PREMULSUM) {                                                   \
                acc = LOAD(STORE(LOAD(((const T *)in[0])[i]) * (W)scal[0]));            \
                for (int r = 1; r < n; r++) {                                           \
                    W term = LOAD(STORE(LOAD(((const T *)in[r])[i]) * (W)scal[r]));     \
                    acc = LOAD(STORE(acc + term));                                      \
                }                                                                       \
            } else {                                                                    \
                acc = LOAD(((const T *)in[0])[i]);                                      \
                for (int r = 1; r < n; r++) {                                           \
                    W x = LOAD(((const T *)in[r])[i]);                                  \
                    switch (red) {                                                      \
                    case R_SUM: acc = LOAD(STORE(acc + x)); break;                      \
                    case R_PROD: acc = LOAD(STORE(acc * x)); break;                     \
                    case R_MAX: acc = x > acc ? x : acc; break;                         \
                    case R_MIN: acc = x < acc ? x : acc; break;                         \
                    }                                                                   \
                }                                                                       \
            }                                                                           \
            d[i] = STORE(acc);                                                          \
        }                                                                               \
    } while (0)

#define ID(x) (x)
static float f32_round(float x) { volatile float v = x; return v; }
static double f64_round(double x) { volatile double v = x; return v; }

static void reduce(void *dst, const void *const *in, int n, size_t count, int dtype, int red,
                   const double *scal) {
    switch (dtype) {
    case ncclInt8: RED_INT(int8_t, uint8_t); break;
    case ncclUint8: RED_INT(uint8_t, uint8_t); break;
    case ncclInt32: RED_INT(int32_t, uint32_t); break;
    case ncclUint32: RED_INT(uint32_t, uint32_t); break;
    case ncclInt64: RED_INT(int64_t, uint64_t); break;
    case ncclUint64: RED_INT(uint64_t, uint64_t); break;
    case ncclFloat16: RED_FLT(uint16_t, float, half_to_float, float_to_half); break;
    case ncclBfloat16: RED_FLT(uint16_t, float, bf16_to_float, float_to_bf16); break;
    case ncclFloat32: RED_FLT(float, float, ID, f32_round); break;
    case ncclFloat64: RED_FLT(double, double, ID, f64_round); break;
    }
}

/* A scalar rounded to the element type, as a double. */
static double round_to_type(double v, int dtype) {
    switch (dtype) {
    case ncclFloat16: return half_to_float(float_to_half((float)v));
    case ncclBfloat16: return bf16_to_float(float_to_bf16((float)v));
    case ncclFloat32: return (float)v;
    default: return v;
    }
}

/* A scalar stored in the element type at p, as a double. */
static double load_scalar(const void *p, int dtype) {
    switch (dtype) {
    case ncclInt8: return *(const int8_t *)p;
    case ncclUint8: return *(const uint8_t *)p;
    case ncclInt32: return *(const int32_t *)p;
    case ncclUint32: return *(const uint32_t *)p;
    case ncclInt64: return (double)*(const int64_t *)p;
    case ncclUint64: return (double)*(const uint64_t *)p;
    case ncclFloat16: return half_to_float(*(const uint16_t *)p);
    case ncclBfloat16: return bf16_to_float(*(const uint16_t *)p);
    case ncclFloat32: return *(const float *)p;
    case ncclFloat64: return *(const double *)p;
    }
    return 0;
}

/* ---------------------------------------------------------------- operations */

struct op {
    int kind, dtype, red, root, peer;
    int user_op; /* index into comm->ops, or -1 */
    double scalar;
    const char *send;
    char *recv;
    size_t count;
    long callno;
    struct comm *comm;
    void *stream;
};

struct ktask { /* one kernel: a communicator's operations of one call or group */
    struct comm *comm;
    int nops;
    struct op ops[];
};

static int overlap(const void *a, size_t an, const void *b, size_t bn) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return an && bn && x < y + bn && y < x + an;
}

/* Run one collective, window by window. */
static void exec_coll(struct comm *c, struct op *o) {
    int n = c->nranks, me = c->rank, who = -1;
    size_t es = type_size(o->dtype);
    size_t L = o->kind == K_REDUCESCATTER ? o->count * (size_t)n : o->count;
    if (L == 0) return;
    size_t W = c->hdr->slot_bytes / es;
    struct rankinfo *mine = RI(c, me);
    uint64_t seq = ++c->seq;
    double *scalars = NULL;
    if (o->red == R_PREMULSUM) {
        scalars = malloc(sizeof(double) * (size_t)n);
        if (!scalars) {
            set_async(c, ncclSystemError, "out of host memory");
            return;
        }
    }
    const void **in = malloc(sizeof(void *) * (size_t)n);
    if (!in) {
        free(scalars);
        set_async(c, ncclSystemError, "out of host memory");
        return;
    }
    double my_scalar = o->scalar;
    if (o->user_op >= 0 && c->ops[o->user_op].residence == ncclScalarDevice)
        my_scalar = round_to_type(load_scalar(c->ops[o->user_op].ptr, o->dtype), o->dtype);
    for (size_t off = 0; off < L; off += W) {
        size_t w = L - off < W ? L - off : W;
        mine->d = (struct desc){(uint32_t)o->kind, (uint32_t)o->dtype, (uint32_t)o->red,
                                (uint32_t)o->root, o->count, off, w, seq, my_scalar};
        if (o->kind != K_BROADCAST || me == o->root) memcpy(SLOT(c, me), o->send + off * es, w * es);
        int s = barrier(c, &who);
        if (s) {
            wait_failed(c, s, who, KIND_NAME[o->kind]);
            goto out;
        }
        for (int r = 0; r < n; r++) {
            struct desc *d = &RI(c, r)->d;
            int red_differs = (o->kind == K_ALLREDUCE || o->kind == K_REDUCE ||
                               o->kind == K_REDUCESCATTER) && d->red != mine->d.red;
            int root_differs = (o->kind == K_BROADCAST || o->kind == K_REDUCE) &&
                               d->root != mine->d.root;
            if (d->kind != mine->d.kind || d->dtype != mine->d.dtype || d->count != o->count ||
                d->seq != seq || red_differs || root_differs) {
                set_async(c, ncclInvalidUsage,
                          "standin: mismatched collectives: rank %d called %s(count %llu, %s, "
                          "%s, root %u) as its call %llu while rank %d called %s(count %llu, "
                          "%s, %s, root %u) as its call %llu (real NCCL would hang or return "
                          "garbage)",
                          me, KIND_NAME[o->kind], (unsigned long long)o->count,
                          TYPE_NAME[o->dtype], RED_NAME[o->red], (unsigned)o->root,
                          (unsigned long long)seq, r,
                          d->kind < 7 ? KIND_NAME[d->kind] : "?", (unsigned long long)d->count,
                          d->dtype < ncclNumTypes ? TYPE_NAME[d->dtype] : "?",
                          d->red <= R_NONE ? RED_NAME[d->red] : "?", (unsigned)d->root,
                          (unsigned long long)d->seq);
                goto out;
            }
            in[r] = SLOT(c, r);
            if (scalars) scalars[r] = d->scalar;
        }
        if (!cfg.lazy) {
            switch (o->kind) {
            case K_ALLREDUCE:
                reduce(o->recv + off * es, in, n, w, o->dtype, o->red, scalars);
                break;
            case K_REDUCE:
                if (me == o->root) reduce(o->recv + off * es, in, n, w, o->dtype, o->red, scalars);
                break;
            case K_BROADCAST:
                memcpy(o->recv + off * es, SLOT(c, o->root), w * es);
                break;
            case K_ALLGATHER:
                for (int r = 0; r < n; r++)
                    memmove(o->recv + ((size_t)r * o->count + off) * es, SLOT(c, r), w * es);
                break;
            case K_REDUCESCATTER: {
                size_t lo = (size_t)me * o->count, hi = lo + o->count;
                if (lo < off) lo = off;
                if (hi > off + w) hi = off + w;
                if (lo < hi) {
                    for (int r = 0; r < n; r++) in[r] = SLOT(c, r) + (lo - off) * es;
                    reduce(o->recv + (lo - (size_t)me * o->count) * es, in, n, hi - lo, o->dtype,
                           o->red, scalars);
                }
                break;
            }
            }
        }
        s = barrier(c, &who);
        if (s) {
            wait_failed(c, s, who, KIND_NAME[o->kind]);
            goto out;
        }
    }
out:
    free(in);
    free(scalars);
}

/* Point to point: every send and receive of one group on this communicator progresses
 * together (a ring of sends and receives must not wait on itself). */
#define MSG_MAGIC 0x5EAD5EADu
struct msg_hdr {
    uint32_t magic, dtype;
    uint64_t bytes;
};

static uint64_t chan_write(struct comm *c, struct chan *ch, const char *src, uint64_t n) {
    uint64_t cap = c->hdr->chan_bytes;
    uint64_t w = atomic_load_explicit(&ch->w, memory_order_relaxed);
    uint64_t r = atomic_load_explicit(&ch->r, memory_order_acquire);
    uint64_t room = cap - (w - r);
    if (n > room) n = room;
    char *data = (char *)ch + CHAN_HDR;
    uint64_t at = w % cap, first = cap - at < n ? cap - at : n;
    memcpy(data + at, src, first);
    memcpy(data, src + first, n - first);
    atomic_store_explicit(&ch->w, w + n, memory_order_release);
    return n;
}

/* dst NULL: consume without copying (STANDIN_NCCL_LAZY). */
static uint64_t chan_read(struct comm *c, struct chan *ch, char *dst, uint64_t n) {
    uint64_t cap = c->hdr->chan_bytes;
    uint64_t r = atomic_load_explicit(&ch->r, memory_order_relaxed);
    uint64_t w = atomic_load_explicit(&ch->w, memory_order_acquire);
    if (n > w - r) n = w - r;
    const char *data = (const char *)ch + CHAN_HDR;
    uint64_t at = r % cap, first = cap - at < n ? cap - at : n;
    if (dst) {
        memcpy(dst, data + at, first);
        memcpy(dst + first, data, n - first);
    }
    atomic_store_explicit(&ch->r, r + n, memory_order_release);
    return n;
}

static uint64_t chan_avail(struct chan *ch) {
    return atomic_load_explicit(&ch->w, memory_order_acquire) - atomic_load(&ch->r);
}

static void ring(struct comm *c, int r) {
    atomic_fetch_add(&RI(c, r)->doorbell, 1);
    futex_wake(&RI(c, r)->doorbell);
}

static void exec_p2p(struct comm *c, struct op *ops, int nops) {
    int n = c->nranks, me = c->rank, who = -1;
    uint64_t *done = calloc((size_t)nops, sizeof *done);
    char *hdr = calloc((size_t)nops, 1), *fin = calloc((size_t)nops, 1);
    char *busy_s = calloc((size_t)n, 1), *busy_r = calloc((size_t)n, 1);
    int *gate = malloc(sizeof *gate * ((size_t)nops + 1));
    if (!done || !hdr || !fin || !busy_s || !busy_r || !gate) {
        set_async(c, ncclSystemError, "out of host memory");
        goto out;
    }
    /* A send whose buffer a receive of the same group writes (in-place send/recv or
     * all-to-all: one buffer as both) races that receive: NCCL runs send and receive warps at
     * once (NVIDIA/nccl v2.28.9-1 src/device/sendrecv.h:143-169) and promises nothing, and
     * nccl-tests does not check it (v2.19.6 src/sendrecv.cu:33-34). The stand-in plays one
     * schedule of that race, the same every run: a receive from a lower rank lands before the
     * send that shares its buffer reads it (a chain that always ends at a rank with no such
     * wait, so it never deadlocks). */
    for (int i = 0; i < nops; i++) {
        gate[i] = -1;
        if (ops[i].kind != K_SEND) continue;
        size_t sb = ops[i].count * type_size(ops[i].dtype);
        for (int j = 0; j < nops; j++) {
            if (ops[j].kind != K_RECV || ops[j].peer >= me ||
                !overlap(ops[i].send, sb, ops[j].recv, ops[j].count * type_size(ops[j].dtype)))
                continue;
            gate[i] = j;
            trace("rank %d: send %d reads a buffer receive %d writes (in place): the receive "
                  "lands first", me, i, j);
            break;
        }
    }
    for (;;) {
        uint32_t bell = atomic_load(&RI(c, me)->doorbell);
        int pending = 0, moved = 0;
        memset(busy_s, 0, (size_t)n);
        memset(busy_r, 0, (size_t)n);
        for (int i = 0; i < nops; i++) {
            struct op *o = &ops[i];
            if (fin[i]) continue;
            pending++;
            int p = o->peer;
            uint64_t bytes = o->count * type_size(o->dtype);
            if (o->kind == K_SEND) {
                if (busy_s[p]) continue; /* an earlier send to p goes first */
                busy_s[p] = 1;
                if (gate[i] >= 0 && !fin[gate[i]]) continue; /* in place: its receive first */
                struct chan *ch = CHAN(c, me, p);
                if (!hdr[i]) {
                    uint64_t cap = c->hdr->chan_bytes;
                    uint64_t used = atomic_load(&ch->w) - atomic_load(&ch->r);
                    if (cap - used < sizeof(struct msg_hdr)) continue;
                    struct msg_hdr h = {MSG_MAGIC, (uint32_t)o->dtype, bytes};
                    chan_write(c, ch, (const char *)&h, sizeof h);
                    hdr[i] = 1;
                    moved = 1;
                    ring(c, p);
                }
                if (done[i] < bytes) {
                    uint64_t k = chan_write(c, ch, (const char *)o->send + done[i], bytes - done[i]);
                    if (k) {
                        done[i] += k;
                        moved = 1;
                        ring(c, p);
                    }
                }
                if (done[i] == bytes) fin[i] = 1;
            } else {
                if (busy_r[p]) continue;
                busy_r[p] = 1;
                struct chan *ch = CHAN(c, p, me);
                if (!hdr[i]) {
                    if (chan_avail(ch) < sizeof(struct msg_hdr)) continue;
                    struct msg_hdr h;
                    chan_read(c, ch, (char *)&h, sizeof h);
                    hdr[i] = 1;
                    moved = 1;
                    ring(c, p);
                    if (h.magic != MSG_MAGIC || h.bytes != bytes) {
                        set_async(c, ncclInvalidUsage,
                                  "standin: rank %d's ncclRecv from rank %d expects %llu B "
                                  "(%zu x %s) but rank %d sent %llu B (%s): send and receive "
                                  "sizes differ (real NCCL would truncate, hang or corrupt)",
                                  me, p, (unsigned long long)bytes, o->count,
                                  TYPE_NAME[o->dtype], p, (unsigned long long)h.bytes,
                                  h.dtype < ncclNumTypes ? TYPE_NAME[h.dtype] : "?");
                        goto out;
                    }
                }
                if (done[i] < bytes) {
                    uint64_t k = chan_read(c, ch, cfg.lazy ? NULL : o->recv + done[i],
                                           bytes - done[i]);
                    if (k) {
                        done[i] += k;
                        moved = 1;
                        ring(c, p);
                    }
                }
                if (done[i] == bytes) fin[i] = 1;
            }
            if (fin[i]) pending--;
        }
        if (!pending) break;
        if (!moved) {
            int s = wait_change(c, &RI(c, me)->doorbell, bell, &who);
            if (s) {
                wait_failed(c, s, who, "Send/Recv");
                goto out;
            }
        }
    }
out:
    free(gate);
    free(done);
    free(hdr);
    free(fin);
    free(busy_s);
    free(busy_r);
}

static int rank_selected(struct comm *c) {
    return cfg.fail_rank < 0 || cfg.fail_rank == c->rank;
}

/* The kernel: runs on the stream's worker. */
static void run_ktask(void *p) {
    struct ktask *t = p;
    struct comm *c = t->comm;
    t_dev = c->dev;
    for (int i = 0; i < t->nops;) {
        if (atomic_load(&c->async_err) || atomic_load(&c->aborted)) break;
        if (t->ops[i].kind == K_SEND || t->ops[i].kind == K_RECV) {
            int j = i;
            while (j < t->nops && (t->ops[j].kind == K_SEND || t->ops[j].kind == K_RECV)) j++;
            exec_p2p(c, &t->ops[i], j - i);
            i = j;
        } else {
            exec_coll(c, &t->ops[i]);
            i++;
        }
    }
    for (int i = 0; i < t->nops; i++)
        if (cfg.async_at > 0 && t->ops[i].callno == cfg.async_at && rank_selected(c))
            set_async(c, ncclRemoteError,
                      "standin: injected asynchronous error after call %ld (nccl%s) on rank %d "
                      "(STANDIN_NCCL_ASYNC_ERROR=%ld)",
                      cfg.async_at, KIND_NAME[t->ops[i].kind], c->rank, cfg.async_at);
    comm_unref(c);
    free(t);
}

/* ---------------------------------------------------------------- groups */

static __thread int t_depth;
static __thread struct op *t_ops;
static __thread int t_nops, t_cap;
static __thread ncclResult_t t_group_err;

static _Atomic long g_calls;

static ncclResult_t launch_ops(struct comm *c, struct op *ops, int nops) {
    if (cfg.connect_stuck > 0 && ops[0].callno == cfg.connect_stuck && rank_selected(c)) {
        /* A launch that never ends (STANDIN_NCCL_CONNECT_STUCK): NCCL >= 2.22 connects a
         * communicator's peers at its first collective, inside the launch, and a connect to a
         * peer that never answers waits there (until ncclCommAbort). */
        WARN("standin: rank %d: call %ld's connect never completes (STANDIN_NCCL_CONNECT_STUCK=%ld)",
             c->rank, ops[0].callno, cfg.connect_stuck);
        while (!atomic_load(&c->aborted)) usleep(20000);
        return ncclInvalidUsage;
    }
    struct ktask *t = malloc(sizeof *t + sizeof(struct op) * (size_t)nops);
    if (!t) {
        WARN("standin: out of host memory");
        return ncclSystemError;
    }
    t->comm = c;
    t->nops = nops;
    memcpy(t->ops, ops, sizeof(struct op) * (size_t)nops);
    atomic_fetch_add(&c->refs, 1);
    const char *name = nops == 1 ? KIND_NAME[ops[0].kind] : "group";
    int r = cu_launch(ops[0].stream, run_ktask, t, name);
    if (r) {
        atomic_fetch_sub(&c->refs, 1);
        free(t);
        const char *text = NULL;
        /* Looked up only here, so that LD_DEBUG's list of lookups stays ringlab's own. */
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (h && !cu_err_string) *(void **)&cu_err_string = dlsym(h, "cuGetErrorString");
        if (!cu_err_string || cu_err_string(r, &text) != 0 || !text) text = "unknown error";
        WARN("Cuda failure %d '%s'", r, text);
        return ncclUnhandledCudaError;
    }
    return ncclSuccess;
}

static void tuning_line(struct op *o) {
    if (cfg.debug < 3 || !cfg.tuning || o->comm->rank != 0 || o->kind >= K_SEND) return;
    size_t bytes = o->count * type_size(o->dtype);
    if (o->kind == K_ALLGATHER || o->kind == K_REDUCESCATTER) bytes *= (size_t)o->comm->nranks;
    int save = t_dev;
    t_dev = o->comm->dev;
    info("%s: %zu Bytes -> Algo %s proto SIMPLE channel{Lo..Hi}={0..0}", KIND_NAME[o->kind], bytes,
         o->kind == K_ALLREDUCE ? cfg.algo : "RING");
    t_dev = save;
}

/* One kernel per communicator, its operations in call order, on one stream. */
static ncclResult_t launch_group(struct op *ops, int nops) {
    ncclResult_t res = ncclSuccess;
    char *taken = calloc((size_t)nops + 1, 1);
    struct op *mine = malloc(sizeof *mine * ((size_t)nops + 1));
    if (!taken || !mine) {
        WARN("standin: out of host memory");
        res = ncclSystemError;
    }
    for (int i = 0; res == ncclSuccess && i < nops; i++) {
        if (taken[i]) continue;
        struct comm *c = ops[i].comm;
        int k = 0;
        for (int j = i; j < nops; j++) {
            if (taken[j] || ops[j].comm != c) continue;
            if (ops[j].stream != ops[i].stream) {
                WARN("standin: rank %d's operations in one group use streams %p and %p; the "
                     "stand-in runs a communicator's group on one stream",
                     c->rank, ops[i].stream, ops[j].stream);
                res = ncclInvalidUsage;
                break;
            }
            taken[j] = 1;
            mine[k++] = ops[j];
        }
        if (res == ncclSuccess) res = launch_ops(c, mine, k);
    }
    free(taken);
    free(mine);
    return res;
}

/* Whether ops[i] is the first of its communicator among ops[0..i]: each communicator once. */
static int first_of_comm(const struct op *ops, int i) {
    for (int k = 0; k < i; k++)
        if (ops[k].comm == ops[i].comm) return 0;
    return 1;
}

/* A non-blocking launch: the operations, and the thread that launches them. */
struct async_launch {
    int nops;
    struct op ops[];
};

static void *async_launch_main(void *p) {
    struct async_launch *j = p;
    if (j->nops > 0) t_dev = j->ops[0].comm->dev;
    ncclResult_t r = launch_group(j->ops, j->nops);
    for (int i = 0; i < j->nops; i++)
        if (first_of_comm(j->ops, i)) atomic_store(&j->ops[i].comm->call_state, (int)r);
    for (int i = 0; i < j->nops; i++)
        if (first_of_comm(j->ops, i)) comm_unref(j->ops[i].comm);
    free(j);
    return NULL;
}

/* Run `fn(arg)` on a detached thread of its own; 0 or the pthread error. */
static int spawn(void *(*fn)(void *), void *arg) {
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int e = pthread_create(&th, &at, fn, arg);
    pthread_attr_destroy(&at);
    if (e) WARN("standin: pthread_create: %s", strerror(e));
    return e;
}

/* Launch `ops` as NCCL does for a non-blocking group: each communicator in progress, the
 * launch on a new thread, ncclInProgress to the caller. */
static ncclResult_t launch_nonblocking(struct op *ops, int nops) {
    struct async_launch *j = malloc(sizeof *j + sizeof(struct op) * (size_t)nops);
    if (!j) {
        WARN("standin: out of host memory");
        return ncclSystemError;
    }
    j->nops = nops;
    memcpy(j->ops, ops, sizeof(struct op) * (size_t)nops);
    for (int i = 0; i < nops; i++) {
        if (!first_of_comm(ops, i)) continue;
        atomic_fetch_add(&ops[i].comm->refs, 1);
        atomic_store(&ops[i].comm->call_state, ncclInProgress);
    }
    if (spawn(async_launch_main, j)) {
        for (int i = 0; i < nops; i++) atomic_store(&ops[i].comm->call_state, ncclSuccess);
        for (int i = 0; i < nops; i++)
            if (first_of_comm(ops, i)) comm_unref(ops[i].comm);
        free(j);
        return ncclSystemError;
    }
    return ncclInProgress;
}

/* Queue an operation that passed its checks: now, or at the group's end. */
static ncclResult_t submit(struct op *o) {
    tuning_line(o);
    if (t_depth == 0)
        return o->comm->blocking ? launch_ops(o->comm, o, 1) : launch_nonblocking(o, 1);
    if (t_nops == t_cap) {
        int cap = t_cap ? t_cap * 2 : 16;
        struct op *n = realloc(t_ops, sizeof *n * (size_t)cap);
        if (!n) {
            WARN("standin: out of host memory");
            return ncclSystemError;
        }
        t_ops = n;
        t_cap = cap;
    }
    t_ops[t_nops++] = *o;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclGroupStart(void) {
    setup();
    trace("ncclGroupStart (depth %d)", t_depth);
    t_depth++;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclGroupEnd(void) {
    setup();
    trace("ncclGroupEnd (depth %d, %d ops)", t_depth, t_nops);
    if (t_depth == 0) {
        WARN("ncclGroupEnd: not in a group call.");
        return ncclInvalidUsage;
    }
    if (--t_depth > 0) return ncclSuccess;
    ncclResult_t res = t_group_err;
    t_group_err = ncclSuccess;
    /* The group's mode is its communicators' (NVIDIA/nccl v2.28.9-1 src/group.cc:51-60). */
    int blocking = t_nops == 0 || t_ops[0].comm->blocking;
    for (int i = 1; res == ncclSuccess && i < t_nops; i++)
        if (t_ops[i].comm->blocking != blocking) {
            WARN("Blocking and nonblocking communicators are not allowed in the same group.");
            res = ncclInvalidArgument;
        }
    if (res == ncclSuccess && t_nops > 0)
        res = blocking ? launch_group(t_ops, t_nops) : launch_nonblocking(t_ops, t_nops);
    t_nops = 0;
    return res;
}

/* ---------------------------------------------------------------- argument checks */

static ncclResult_t fail_call(ncclResult_t r) {
    if (t_depth > 0 && t_group_err == ncclSuccess) t_group_err = r;
    return r;
}

/* The buffer check NCCL makes (CudaPtrCheck), against the stand-in's allocation table. */
static ncclResult_t check_buf(struct comm *c, const char *op, const char *which, const void *p,
                              size_t bytes) {
    unsigned long long base = 0;
    size_t size = 0;
    int dev = -1;
    if (!p) {
        WARN("%s : %s is NULL (%zu bytes to %s)", op, which, bytes,
             strcmp(which, "sendbuff") ? "write" : "read");
        return ncclInvalidArgument;
    }
    int r = cu_check((unsigned long long)(uintptr_t)p, bytes, &dev, &base, &size);
    switch (r) {
    case STANDIN_RANGE_OK:
        if (dev != c->dev) {
            WARN("%s : %s allocated on device %d mismatchs with NCCL device %d", op, which, dev,
                 c->dev);
            return ncclInvalidArgument;
        }
        return ncclSuccess;
    case STANDIN_RANGE_UNKNOWN:
        WARN("%s : %s %p is not a valid pointer (standin: no live device allocation holds it)",
             op, which, p);
        return ncclInvalidArgument;
    case STANDIN_RANGE_FREED:
        WARN("%s : %s %p is not a valid pointer (standin: it is in the freed allocation 0x%llx "
             "of %zu B)",
             op, which, p, base, size);
        return ncclInvalidArgument;
    default:
        WARN("%s : %s %p + %zu B runs past the end of its allocation (0x%llx, %zu B: %lld B "
             "too many) (standin: NCCL would read or write out of bounds)",
             op, which, p, bytes, base, size,
             (long long)((unsigned long long)(uintptr_t)p + bytes - (base + size)));
        return ncclInvalidArgument;
    }
}


static const char *op_fn(int kind) {
    static const char *const names[] = {"AllReduce", "Broadcast",     "Reduce", "AllGather",
                                        "ReduceScatter", "Send", "Recv"};
    return names[kind];
}

/* Validate and queue one operation. */
static ncclResult_t call(int kind, const void *send, void *recv, size_t count, int dtype,
                         int redop, int root_or_peer, struct comm *c, void *stream) {
    setup();
    const char *name = op_fn(kind);
    long callno = atomic_fetch_add(&g_calls, 1) + 1;
    trace("call %ld: nccl%s(send %p, recv %p, count %zu, type %d, op %d, root/peer %d, comm %p, "
          "stream %p)",
          callno, name, send, recv, count, dtype, redop, root_or_peer, (void *)c, stream);
    if (!have_cuda()) {
        WARN("standin: the CUDA stand-in (libcuda.so.1 with standin_cuda_*) is not loaded");
        return fail_call(ncclSystemError);
    }
    if (!comm_ok(c)) {
        WARN("%s : invalid communicator %p", name, (void *)c);
        return fail_call(ncclInvalidArgument);
    }
    ncclResult_t fr;
    struct comm *handle = c;
    if (!(c = fwd(handle, &fr))) {
        WARN("%s : communicator %p is not ready (its non-blocking init %s)", name, (void *)handle,
             atomic_load(&handle->init_state) == ncclInProgress ? "is still in progress"
                                                                 : "failed");
        return fail_call(fr);
    }
    t_dev = c->dev;
    if (atomic_load(&c->finished)) {
        WARN("%s : communicator %p was destroyed or aborted", name, (void *)c);
        return fail_call(ncclInvalidUsage);
    }
    if (atomic_load(&c->call_state) == ncclInProgress) {
        /* ncclCommEnsureReady (NVIDIA/nccl v2.28.9-1 src/init.cc:373-386). */
        WARN("Attempt to use communicator before the previous operation returned ncclSuccess");
        return fail_call(ncclInvalidArgument);
    }
    int ae = atomic_load(&c->async_err);
    if (ae > 0) {
        WARN("%s : the communicator has an asynchronous error (%d): %s", name, ae, c->async_msg);
        return fail_call((ncclResult_t)ae);
    }
    if (cfg.fail_at > 0 && callno == cfg.fail_at && rank_selected(c)) {
        WARN("standin: injected failure of call %ld (nccl%s) on rank %d (STANDIN_NCCL_FAIL_AT=%ld)",
             callno, name, c->rank, cfg.fail_at);
        return fail_call((ncclResult_t)cfg.fail_code);
    }
    int sdev = cu_stream_dev(stream);
    if (sdev < 0) {
        WARN("%s : invalid stream %p (standin: not a stream of the CUDA stand-in, or no current "
             "context for the default stream)",
             name, stream);
        return fail_call(ncclInvalidArgument);
    }
    if (sdev != c->dev) {
        WARN("%s : stream %p is on device %d but the communicator is on device %d", name, stream,
             sdev, c->dev);
        return fail_call(ncclInvalidArgument);
    }
    if (dtype < 0 || dtype >= ncclNumTypes) {
        WARN("%s : invalid type %d", name, dtype);
        return fail_call(ncclInvalidArgument);
    }
    if (dtype == ncclFloat8e4m3 || dtype == ncclFloat8e5m2) {
        WARN("%s : type %s is not implemented by the stand-in", name, TYPE_NAME[dtype]);
        return fail_call(ncclInvalidArgument);
    }
    struct op o = {kind, dtype, R_NONE, 0, 0, -1, 0, send, recv, count, callno, c, stream};
    int n = c->nranks;
    if (kind == K_ALLREDUCE || kind == K_REDUCE || kind == K_REDUCESCATTER) {
        if (redop >= 0 && redop < ncclNumOps) {
            static const int map[] = {R_SUM, R_PROD, R_MAX, R_MIN, -1};
            o.red = map[redop];
            if (redop == ncclAvg) {
                if (type_is_float(dtype)) {
                    o.red = R_PREMULSUM;
                    o.scalar = round_to_type(1.0 / n, dtype);
                } else {
                    o.red = R_AVG_INT;
                }
            }
        } else if (redop >= ncclNumOps && redop < ncclNumOps + MAX_USER_OPS &&
                   c->ops[redop - ncclNumOps].used) {
            struct user_op *u = &c->ops[redop - ncclNumOps];
            if (u->dtype != dtype) {
                WARN("%s : user-defined reduction operation %d was made for type %s, not %s",
                     name, redop, TYPE_NAME[u->dtype], TYPE_NAME[dtype]);
                return fail_call(ncclInvalidArgument);
            }
            o.red = R_PREMULSUM;
            o.user_op = redop - ncclNumOps;
            o.scalar = u->scalar;
        } else {
            WARN("%s : invalid reduction operation %d", name, redop);
            return fail_call(ncclInvalidArgument);
        }
    }
    if (kind == K_BROADCAST || kind == K_REDUCE) {
        if (root_or_peer < 0 || root_or_peer >= n) {
            WARN("%s : invalid root %d (root should be in the 0..%d range)", name, root_or_peer, n);
            return fail_call(ncclInvalidArgument);
        }
        o.root = root_or_peer;
    }
    if (kind == K_SEND || kind == K_RECV) {
        if (root_or_peer < 0 || root_or_peer >= n) {
            WARN("%s : invalid peer %d (peer should be in the 0..%d range)", name, root_or_peer,
                 n - 1);
            return fail_call(ncclInvalidArgument);
        }
        o.peer = root_or_peer;
    }
    size_t es = type_size(dtype);
    size_t mult = kind == K_ALLGATHER || kind == K_REDUCESCATTER ? (size_t)n : 1;
    if (count > SIZE_MAX / es / mult) {
        WARN("%s : count %zu x %zu B overflows", name, count, es);
        return fail_call(ncclInvalidArgument);
    }
    /* What NCCL reads and writes on this rank. */
    size_t sbytes = 0, rbytes = 0;
    switch (kind) {
    case K_ALLREDUCE: sbytes = rbytes = count * es; break;
    case K_BROADCAST:
        sbytes = c->rank == o.root ? count * es : 0;
        rbytes = count * es;
        break;
    case K_REDUCE:
        sbytes = count * es;
        rbytes = c->rank == o.root ? count * es : 0;
        break;
    case K_ALLGATHER: sbytes = count * es; rbytes = count * es * (size_t)n; break;
    case K_REDUCESCATTER: sbytes = count * es * (size_t)n; rbytes = count * es; break;
    case K_SEND: sbytes = count * es; break;
    case K_RECV: rbytes = count * es; break;
    }
    ncclResult_t r;
    if (sbytes && (r = check_buf(c, name, "sendbuff", send, sbytes))) return fail_call(r);
    if (rbytes && (r = check_buf(c, name, "recvbuff", recv, rbytes))) return fail_call(r);
    /* In place is one exact position; any other overlap is a bug NCCL does not catch. */
    if (n == 1 && kind != K_SEND && kind != K_RECV && o.red != R_PREMULSUM && send == recv) {
        /* One rank, in place, no scaling: NCCL launches nothing at all (NVIDIA/nccl v2.28.9-1
         * src/enqueue.cc:2569-2571 -> ncclLaunchOneRank, src/device/onerank.cu:51). */
        trace("nccl%s on 1 rank in place: nothing to launch", name);
        return ncclSuccess;
    }
    if (sbytes && rbytes && overlap(send, sbytes, recv, rbytes)) {
        const char *want = recv;
        const char *rule = "sendbuff == recvbuff";
        if (kind == K_ALLGATHER) {
            want = (const char *)recv + (size_t)c->rank * count * es;
            rule = "sendbuff == recvbuff + rank * sendcount * size";
        } else if (kind == K_REDUCESCATTER) {
            want = (const char *)send + (size_t)c->rank * count * es;
            rule = "recvbuff == sendbuff + rank * recvcount * size";
        }
        int ok = kind == K_REDUCESCATTER ? (const char *)recv == want : (const char *)send == want;
        if (!ok) {
            WARN("%s : sendbuff %p (%zu B) and recvbuff %p (%zu B) overlap but are not in place "
                 "(NCCL's in-place rule on rank %d: %s, i.e. %s %p) (standin: real NCCL would "
                 "silently corrupt)",
                 name, send, sbytes, recv, rbytes, c->rank, rule,
                 kind == K_REDUCESCATTER ? "recvbuff" : "sendbuff", (const void *)want);
            return fail_call(ncclInvalidArgument);
        }
    }
    return submit(&o);
}

/* ---------------------------------------------------------------- the collective API */

EXPORT ncclResult_t ncclAllReduce(const void *s, void *r, size_t count, int dtype, int op,
                                  struct comm *c, void *stream) {
    return call(K_ALLREDUCE, s, r, count, dtype, op, 0, c, stream);
}

EXPORT ncclResult_t ncclBroadcast(const void *s, void *r, size_t count, int dtype, int root,
                                  struct comm *c, void *stream) {
    return call(K_BROADCAST, s, r, count, dtype, 0, root, c, stream);
}

EXPORT ncclResult_t ncclBcast(void *buf, size_t count, int dtype, int root, struct comm *c,
                              void *stream) {
    return call(K_BROADCAST, buf, buf, count, dtype, 0, root, c, stream);
}

EXPORT ncclResult_t ncclReduce(const void *s, void *r, size_t count, int dtype, int op, int root,
                               struct comm *c, void *stream) {
    return call(K_REDUCE, s, r, count, dtype, op, root, c, stream);
}

EXPORT ncclResult_t ncclAllGather(const void *s, void *r, size_t sendcount, int dtype,
                                  struct comm *c, void *stream) {
    return call(K_ALLGATHER, s, r, sendcount, dtype, 0, 0, c, stream);
}

EXPORT ncclResult_t ncclReduceScatter(const void *s, void *r, size_t recvcount, int dtype, int op,
                                      struct comm *c, void *stream) {
    return call(K_REDUCESCATTER, s, r, recvcount, dtype, op, 0, c, stream);
}

EXPORT ncclResult_t ncclSend(const void *s, size_t count, int dtype, int peer, struct comm *c,
                             void *stream) {
    return call(K_SEND, s, NULL, count, dtype, 0, peer, c, stream);
}

EXPORT ncclResult_t ncclRecv(void *r, size_t count, int dtype, int peer, struct comm *c,
                             void *stream) {
    return call(K_RECV, NULL, r, count, dtype, 0, peer, c, stream);
}

/* ---------------------------------------------------------------- user reduction ops */

EXPORT ncclResult_t ncclRedOpCreatePreMulSum(int *op, void *scalar, int dtype, int residence,
                                             struct comm *c) {
    setup();
    if (comm_ok(c) && c->proxy) {
        ncclResult_t fr;
        struct comm *r = fwd(c, &fr);
        if (!r) return fr;
        c = r;
    }
    if (!comm_ok(c) || !op || !scalar || dtype < 0 || dtype >= ncclNumTypes ||
        type_size(dtype) == 0 || dtype == ncclFloat8e4m3 || dtype == ncclFloat8e5m2) {
        WARN("ncclRedOpCreatePreMulSum : invalid argument");
        return ncclInvalidArgument;
    }
    for (int k = 0; k < MAX_USER_OPS; k++) {
        if (c->ops[k].used) continue;
        struct user_op *u = &c->ops[k];
        u->used = 1;
        u->dtype = dtype;
        u->residence = residence;
        u->ptr = scalar;
        u->scalar = residence == ncclScalarHostImmediate
                        ? round_to_type(load_scalar(scalar, dtype), dtype)
                        : 0;
        if (residence == ncclScalarDevice && have_cuda() &&
            cu_check((unsigned long long)(uintptr_t)scalar, type_size(dtype), NULL, NULL, NULL)) {
            u->used = 0;
            WARN("ncclRedOpCreatePreMulSum : scalar %p is not device memory", scalar);
            return ncclInvalidArgument;
        }
        *op = ncclNumOps + k;
        return ncclSuccess;
    }
    WARN("ncclRedOpCreatePreMulSum : too many user-defined operations");
    return ncclInvalidUsage;
}

EXPORT ncclResult_t ncclRedOpDestroy(int op, struct comm *c) {
    setup();
    if (comm_ok(c) && c->proxy) {
        ncclResult_t fr;
        struct comm *r = fwd(c, &fr);
        if (!r) return fr;
        c = r;
    }
    if (!comm_ok(c) || op < ncclNumOps || op >= ncclNumOps + MAX_USER_OPS ||
        !c->ops[op - ncclNumOps].used) {
        WARN("ncclRedOpDestroy : operation %d is not a user-defined operation", op);
        return ncclInvalidArgument;
    }
    c->ops[op - ncclNumOps].used = 0;
    return ncclSuccess;
}

/* ---------------------------------------------------------------- version, errors */

EXPORT ncclResult_t ncclGetVersion(int *v) {
    setup();
    if (!v) return ncclInvalidArgument;
    *v = NCCL_VERSION_CODE;
    return ncclSuccess;
}

EXPORT const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclTimeout: return "operation timed out";
    default: return "unknown result code";
    }
}

/* NCCL keeps the last WARN per thread; a communicator's asynchronous error, raised on the
 * stream's worker, is that communicator's last error. */
EXPORT const char *ncclGetLastError(struct comm *c) {
    setup();
    if (c && comm_ok(c) && c->proxy) c = atomic_load(&c->real);
    if (c && comm_ok(c) && atomic_load(&c->async_err) > 0) return c->async_msg;
    return t_last;
}

EXPORT ncclResult_t ncclCommGetAsyncError(struct comm *c, ncclResult_t *err) {
    setup();
    if (!err) return ncclInvalidArgument;
    if (!comm_ok(c)) {
        WARN("ncclCommGetAsyncError : invalid communicator %p", (void *)c);
        return ncclInvalidArgument;
    }
    if (c->proxy) {
        /* A non-blocking init: in progress, failed, or done (then the communicator's own). */
        int st = atomic_load(&c->init_state);
        struct comm *real = atomic_load(&c->real);
        if (st != ncclSuccess || !real) {
            *err = (ncclResult_t)st;
            return ncclSuccess;
        }
        c = real;
    }
    int st = atomic_load(&c->call_state);
    if (st != ncclSuccess) {
        *err = (ncclResult_t)st; /* in progress, or the launch thread's failure */
        return ncclSuccess;
    }
    int e = atomic_load(&c->async_err);
    *err = e > 0 ? (ncclResult_t)e : ncclSuccess;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommCount(const struct comm *c, int *count) {
    if (!comm_ok((struct comm *)c) || !count) return ncclInvalidArgument;
    *count = c->nranks;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommCuDevice(const struct comm *c, int *dev) {
    if (!comm_ok((struct comm *)c) || !dev) return ncclInvalidArgument;
    *dev = c->dev;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommUserRank(const struct comm *c, int *rank) {
    if (!comm_ok((struct comm *)c) || !rank) return ncclInvalidArgument;
    *rank = c->rank;
    return ncclSuccess;
}


/* ---------------------------------------------------------------- bootstrap over sockets */
/* NCCL's bootstrap, enough of it for the hang lab: the interface NCCL_SOCKET_IFNAME selects
 * (NCCL's rules: prefixes, ^ to exclude, = for exact names; unset: ib*, then anything but
 * docker*, lo, virbr*, then docker*, then lo), a root listening in the process that made the
 * id, every rank dialling it with NCCL's retries and log lines, then each rank dialling the next
 * one's advertised address. The data itself then goes through the shared-memory area. */

struct iface {
    char name[64];
    struct sockaddr_storage sa;
    socklen_t len;
};

static int match_if(const char *name, const char *list, int exact) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *colon = strchr(tok, ':'); /* NCCL allows "eth0:port"; the port is ignored here */
        if (colon) *colon = 0;
        if (!*tok) continue;
        if (exact ? strcmp(name, tok) == 0 : strncmp(name, tok, strlen(tok)) == 0) return 1;
    }
    return 0;
}

static int find_if_list(const char *spec, struct iface *out) {
    int not = 0, exact = 0;
    if (*spec == '^') {
        not = 1;
        spec++;
    }
    if (*spec == '=') {
        exact = 1;
        spec++;
    }
    struct ifaddrs *all, *a;
    if (getifaddrs(&all) != 0) return 0;
    int found = 0;
    for (a = all; a && !found; a = a->ifa_next) {
        if (!a->ifa_addr) continue;
        int fam = a->ifa_addr->sa_family;
        if (fam != AF_INET && fam != AF_INET6) continue;
        if (cfg.family != -1 && fam != cfg.family) continue;
        if (fam == AF_INET6) {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)a->ifa_addr;
            if (IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr) || IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) continue;
        }
        if (!(match_if(a->ifa_name, spec, exact) ^ not)) continue;
        snprintf(out->name, sizeof out->name, "%s", a->ifa_name);
        out->len = fam == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
        memcpy(&out->sa, a->ifa_addr, out->len);
        found = 1;
    }
    freeifaddrs(all);
    return found;
}

static int find_if(struct iface *out) {
    const char *env = getenv("NCCL_SOCKET_IFNAME");
    if (env && *env) {
        static _Atomic int said;
        if (!atomic_exchange(&said, 1)) info("NCCL_SOCKET_IFNAME set by environment to %s", env);
        return find_if_list(env, out);
    }
    return find_if_list("ib", out) || find_if_list("^docker,lo,virbr", out) ||
           find_if_list("docker", out) || find_if_list("lo", out);
}

/* "10.0.0.1<29500>", as NCCL writes an address. */
static const char *addr_str(const struct sockaddr_storage *sa, char *buf, size_t n) {
    char ip[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip);
        port = ntohs(s4->sin_port);
    } else if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof ip);
        port = ntohs(s6->sin6_port);
    }
    snprintf(buf, n, "%s<%u>", ip, port);
    return buf;
}

static socklen_t sa_len(const struct sockaddr_storage *sa) {
    return sa->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* A listening socket on the interface's address, port chosen by the kernel. */
static int listen_on(struct iface *f, struct sockaddr_storage *bound) {
    int fd = socket(f->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_storage sa = f->sa;
    if (sa.ss_family == AF_INET) ((struct sockaddr_in *)&sa)->sin_port = 0;
    else ((struct sockaddr_in6 *)&sa)->sin6_port = 0;
    socklen_t len = f->len;
    if (bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *)bound, &len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
        if (k <= 0) {
            if (k < 0 && errno == EINTR) continue;
            return -1;
        }
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

static int recv_all(int fd, void *p, size_t n) {
    char *c = p;
    while (n) {
        ssize_t k = recv(fd, c, n, 0);
        if (k <= 0) {
            if (k < 0 && errno == EINTR) continue;
            return -1;
        }
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* NCCL's socketPollConnect with its retries: refused, unreachable and timed out connects are
 * retried NCCL_SOCKET_RETRY_CNT times after k x NCCL_SOCKET_RETRY_SLEEP_MSEC. */
static ncclResult_t dial(const struct sockaddr_storage *to, int *out) {
    char a[96];
    for (long tries = 0;; tries++) {
        int fd = socket(to->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            WARN("socketPollConnect: socket: %s", strerror(errno));
            return ncclSystemError;
        }
        if (connect(fd, (const struct sockaddr *)to, sa_len(to)) == 0) {
            *out = fd;
            return ncclSuccess;
        }
        int e = errno;
        close(fd);
        if (e != ECONNREFUSED && e != ETIMEDOUT && e != EHOSTUNREACH && e != ENETUNREACH) {
            WARN("socketPollConnect: connect to %s failed : %s", addr_str(to, a, sizeof a), strerror(e));
            return ncclSystemError;
        }
        if (tries + 1 > cfg.retry_cnt) {
            WARN("socketPollConnect: connect to %s returned %s, exceeded error retry count after %ld "
                 "attempts",
                 addr_str(to, a, sizeof a), strerror(e), tries + 1);
            return ncclRemoteError;
        }
        long ms = (tries + 1) * cfg.retry_ms;
        info("socketPollConnect: connect to %s returned %s, retrying (%ld/%ld) after sleep for %ld "
             "msec",
             addr_str(to, a, sizeof a), strerror(e), tries + 1, cfg.retry_cnt, ms);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

#define HELLO_MAGIC 0x51A4B007u
struct hello {
    uint32_t magic, rank, nranks, pad;
    struct sockaddr_storage addr; /* where this rank listens */
};

struct root_arg {
    int fd;
};

/* The bootstrap root: gathers every rank's address, tells each the next rank's. */
static void *root_main(void *p) {
    int lfd = ((struct root_arg *)p)->fd;
    free(p);
    int *fds = NULL;
    struct sockaddr_storage *addrs = NULL;
    uint32_t n = 0, got = 0;
    for (;;) {
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            break;
        }
        struct hello h;
        if (recv_all(c, &h, sizeof h) != 0 || h.magic != HELLO_MAGIC || h.nranks == 0 ||
            h.nranks > MAX_RANKS || (n && h.nranks != n) || h.rank >= h.nranks) {
            close(c);
            continue;
        }
        if (!n) {
            n = h.nranks;
            fds = calloc(n, sizeof *fds);
            addrs = calloc(n, sizeof *addrs);
            if (!fds || !addrs) break;
            for (uint32_t i = 0; i < n; i++) fds[i] = -1;
        }
        if (fds[h.rank] >= 0) {
            close(c); /* a rank twice: the shared area reports it */
            continue;
        }
        fds[h.rank] = c;
        addrs[h.rank] = h.addr;
        if (++got == n) break;
    }
    for (uint32_t r = 0; fds && got == n && r < n; r++) {
        send_all(fds[r], &addrs[(r + 1) % n], sizeof addrs[0]);
        close(fds[r]);
    }
    free(fds);
    free(addrs);
    close(lfd);
    return NULL;
}

/* Rank side: NCCL's bootstrap ring. */
static ncclResult_t bootstrap(const struct sockaddr_storage *root, int rank, int nranks) {
    struct iface f;
    if (!find_if(&f)) {
        WARN("Bootstrap : no socket interface found");
        return ncclInvalidUsage;
    }
    char a[96], b[96];
    struct sockaddr_storage me;
    int lfd = listen_on(&f, &me);
    if (lfd < 0) {
        WARN("standin: listen on %s %s: %s", f.name, addr_str(&f.sa, a, sizeof a), strerror(errno));
        return ncclSystemError;
    }
    struct sockaddr_storage shown = f.sa;
    if (shown.ss_family == AF_INET) ((struct sockaddr_in *)&shown)->sin_port = 0;
    else ((struct sockaddr_in6 *)&shown)->sin6_port = 0;
    info("Bootstrap: Using %s:%s", f.name, addr_str(&shown, a, sizeof a));
    int fd;
    ncclResult_t r = dial(root, &fd);
    if (r) {
        close(lfd);
        return r;
    }
    struct hello h = {HELLO_MAGIC, (uint32_t)rank, (uint32_t)nranks, 0, me};
    struct sockaddr_storage next;
    if (send_all(fd, &h, sizeof h) != 0 || recv_all(fd, &next, sizeof next) != 0) {
        WARN("bootstrap: the root at %s closed the connection: Connection closed by remote peer",
             addr_str(root, a, sizeof a));
        close(fd);
        close(lfd);
        return ncclRemoteError;
    }
    close(fd);
    /* The ring: dial the next rank's advertised address, take the previous rank's call. */
    int nfd;
    if ((r = dial(&next, &nfd))) {
        close(lfd);
        return r;
    }
    uint32_t token = (uint32_t)rank, prev_token = 0;
    send_all(nfd, &token, sizeof token);
    int pfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (pfd < 0 || recv_all(pfd, &prev_token, sizeof prev_token) != 0 ||
        prev_token != (uint32_t)((rank + nranks - 1) % nranks)) {
        WARN("bootstrap: no word from rank %d on %s", (rank + nranks - 1) % nranks,
             addr_str(&me, b, sizeof b));
        if (pfd >= 0) close(pfd);
        close(nfd);
        close(lfd);
        return ncclRemoteError;
    }
    close(pfd);
    close(nfd);
    close(lfd);
    info("NET/Socket : Using [0]%s:%s", f.name, addr_str(&shown, a, sizeof a));
    info("Using network Socket");
    return ncclSuccess;
}

/* The root for a new id: listen, serve in a thread; *root gets the address. */
static ncclResult_t start_root(struct sockaddr_storage *root) {
    struct iface f;
    if (!find_if(&f)) {
        WARN("Bootstrap : no socket interface found");
        return ncclInvalidUsage;
    }
    char a[96];
    int lfd = listen_on(&f, root);
    if (lfd < 0) {
        WARN("standin: listen on %s %s: %s", f.name, addr_str(&f.sa, a, sizeof a), strerror(errno));
        return ncclSystemError;
    }
    struct root_arg *arg = malloc(sizeof *arg);
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (!arg || (arg->fd = lfd, pthread_create(&th, &at, root_main, arg)) != 0) {
        free(arg);
        close(lfd);
        pthread_attr_destroy(&at);
        WARN("standin: starting the bootstrap root thread failed");
        return ncclSystemError;
    }
    pthread_attr_destroy(&at);
    return ncclSuccess;
}

/* ---------------------------------------------------------------- ids and init */

static void host_id(char *out, size_t n) {
    const char *h = getenv("NCCL_HOSTID");
    if (h && *h) {
        snprintf(out, n, "%s", h);
        return;
    }
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f)) boot[0] = 0;
        fclose(f);
        boot[strcspn(boot, "\n")] = 0;
    }
    char host[256];
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = 0;
    snprintf(out, n, "%s%s", host, boot);
}

static void banner(void) {
    static _Atomic int once;
    if (atomic_exchange(&once, 1)) return;
    if (cfg.debug >= 3) info("NCCL version %d.%d.%d+cuda12.8 (standin: CPU stand-in)", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
    else if (cfg.debug >= 1) {
        pthread_mutex_lock(&g_log_mu);
        if (g_log) fprintf(g_log, "NCCL version %d.%d.%d+cuda12.8\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
        pthread_mutex_unlock(&g_log_mu);
    }
}

/* Areas whose maker died before every rank joined (a job killed during init) would stay in
 * /dev/shm: remove those of dead makers, a while old. */
static void sweep(void) {
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    struct dirent *e;
    time_t now = time(NULL);
    while ((e = readdir(d))) {
        int pid = 0;
        if (sscanf(e->d_name, "standin-nccl-%d-", &pid) != 1 || pid == getpid()) continue;
        char path[512];
        snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || now - st.st_mtime < 10 || !pid_gone(pid)) continue;
        char name[300];
        snprintf(name, sizeof name, "/%s", e->d_name);
        if (shm_unlink(name) == 0) trace("swept the stale area %s (maker pid %d is gone)", name, pid);
    }
    closedir(d);
}

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    setup();
    if (!id) return ncclInvalidArgument;
    banner();
    sweep();
    unsigned char rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        WARN("standin: getrandom failed: %s", strerror(errno));
        return ncclSystemError;
    }
    char name[ID_NAME_LEN];
    int o = snprintf(name, sizeof name, "/standin-nccl-%d-", (int)getpid());
    for (int i = 0; i < 12; i++) o += snprintf(name + o, sizeof name - (size_t)o, "%02x", rnd[i]);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        WARN("standin: shm_open %s: %s", name, strerror(errno));
        return ncclSystemError;
    }
    if (ftruncate(fd, HDR_BYTES) != 0) {
        WARN("Error: failed to extend /dev/shm%s to %d bytes, error: %s (%d)", name, HDR_BYTES,
             strerror(errno), errno);
        close(fd);
        shm_unlink(name);
        return ncclSystemError;
    }
    struct area_hdr *h = mmap(NULL, HDR_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (h == MAP_FAILED) {
        WARN("standin: mmap %s: %s", name, strerror(errno));
        shm_unlink(name);
        return ncclSystemError;
    }
    h->slot_bytes = cfg.slot_bytes;
    h->chan_bytes = cfg.chan_bytes;
    memcpy(&h->comm_hash, rnd + 8, 8);
    memcpy(h->magic, AREA_MAGIC, sizeof AREA_MAGIC);
    munmap(h, HDR_BYTES);
    memset(id, 0, sizeof *id);
    memcpy(id->internal, ID_MAGIC, 8);
    snprintf(id->internal + ID_NAME_AT, ID_NAME_LEN, "%s", name);
    if (cfg.bootstrap) {
        struct sockaddr_storage root;
        memset(&root, 0, sizeof root);
        ncclResult_t r = start_root(&root);
        if (r) {
            shm_unlink(name);
            return r;
        }
        memcpy(id->internal + ID_ROOT_AT, &root, sa_len(&root));
    }
    memcpy(id->internal + 112, rnd, 16);
    trace("ncclGetUniqueId -> %s", name);
    return ncclSuccess;
}

static struct comm *comm_new(char *base, size_t bytes, int rank, int nranks, int dev) {
    struct comm *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->magic = COMM_MAGIC;
    c->base = base;
    c->bytes = bytes;
    c->hdr = (struct area_hdr *)base;
    c->rank = rank;
    c->nranks = nranks;
    c->dev = dev;
    c->blocking = 1;
    atomic_store(&c->refs, 1);
    pthread_mutex_lock(&g_comms_mu);
    c->next_all = g_comms;
    g_comms = c;
    pthread_mutex_unlock(&g_comms_mu);
    return c;
}

/* Claim `rank` in the area; 0 or an NCCL error. */
static ncclResult_t join(struct comm *c, int *last) {
    struct rankinfo *ri = RI(c, c->rank);
    uint32_t zero = 0;
    if (!atomic_compare_exchange_strong(&ri->present, &zero, 1)) {
        WARN("standin: rank %d joined this communicator twice (two processes gave the same "
             "rank to ncclCommInitRank)",
             c->rank);
        return ncclInvalidUsage;
    }
    ri->pid = (int32_t)getpid();
    ri->dev = c->dev;
    ri->bus = (int64_t)(0x18 + c->dev) << 12;
    host_id(ri->host, sizeof ri->host);
    uint32_t j = atomic_fetch_add(&c->hdr->joined, 1) + 1;
    futex_wake(&c->hdr->joined);
    *last = j == (uint32_t)c->nranks;
    return ncclSuccess;
}

/* Once every rank has joined: NCCL's duplicate GPU check (NVIDIA/nccl v2.28.9-1
 * src/init.cc:901-907; ncclCommInitAll's repeated device, :2095-2099, is caught here too). */
static ncclResult_t after_join(struct comm *c) {
    struct rankinfo *me = RI(c, c->rank);
    for (int r = 0; r < c->nranks; r++) {
        struct rankinfo *p = RI(c, r);
        if (r != c->rank && p->dev == me->dev && strcmp(p->host, me->host) == 0) {
            WARN("Duplicate GPU detected : rank %d and rank %d both on CUDA device %llx", c->rank,
                 r, (unsigned long long)me->bus);
            return ncclInvalidUsage;
        }
    }
    /* Nodes as NCCL counts them: distinct host ids. */
    int nodes = 0, local = 0, local_rank = 0;
    for (int r = 0; r < c->nranks; r++) {
        int first = 1;
        for (int q = 0; q < r; q++)
            if (strcmp(RI(c, q)->host, RI(c, r)->host) == 0) first = 0;
        nodes += first;
        if (strcmp(RI(c, r)->host, me->host) == 0) {
            if (r < c->rank) local_rank++;
            local++;
        }
    }
    info("comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL 0", (void *)c,
         c->rank, c->nranks, nodes, local, local_rank);
    info("ncclCommInitRank comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %llx commId "
         "0x%llx - Init COMPLETE",
         (void *)c, c->rank, c->nranks, c->dev, c->dev, (unsigned long long)me->bus,
         (unsigned long long)c->hdr->comm_hash);
    return ncclSuccess;
}

static int current_device(void) {
    int d = cu_cur_dev();
    return d < 0 ? 0 : d; /* the runtime's default device */
}

/* Join the communicator of `id` on device `dev`. `cancel`, when set by ncclCommAbort during a
 * non-blocking init, makes the wait for the other ranks give up. */
static ncclResult_t init_rank(struct comm **out, int nranks, ncclUniqueId id, int rank, int dev,
                              _Atomic int *cancel) {
    setup();
    if (!out) return ncclInvalidArgument;
    *out = NULL;
    if (!have_cuda()) {
        WARN("standin: the CUDA stand-in (libcuda.so.1 with standin_cuda_*) is not loaded");
        return ncclSystemError;
    }
    t_dev = dev;
    banner();
    if (nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks) {
        WARN("Invalid rank requested : %d/%d", rank, nranks);
        return ncclInvalidArgument;
    }
    if (memcmp(id.internal, ID_MAGIC, 8) != 0) {
        WARN("standin: this unique id was not made by the stand-in's ncclGetUniqueId");
        return ncclInvalidArgument;
    }
    char name[ID_NAME_LEN + 1];
    memcpy(name, id.internal + ID_NAME_AT, ID_NAME_LEN);
    name[ID_NAME_LEN] = 0;
    uint64_t comm_id;
    memcpy(&comm_id, id.internal + 120, 8);
    info("ncclCommInitRank comm (nil) rank %d nranks %d cudaDev %d nvmlDev %d busId %llx commId "
         "0x%llx - Init START",
         rank, nranks, dev, dev, (unsigned long long)(0x18 + dev) << 12, (unsigned long long)comm_id);
    info("standin: the ranks meet in /dev/shm%s", name);
    struct sockaddr_storage root;
    memset(&root, 0, sizeof root);
    memcpy(&root, id.internal + ID_ROOT_AT, sizeof(struct sockaddr_in6));
    if (root.ss_family == AF_INET || root.ss_family == AF_INET6) {
        ncclResult_t br = bootstrap(&root, rank, nranks);
        if (br) return br;
    }
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        WARN("standin: the unique id's area /dev/shm%s: %s (its maker is gone, the id was used "
             "up by a finished init, or this process sees another /dev/shm)",
             name, strerror(errno));
        return ncclSystemError;
    }
    struct area_hdr *h = mmap(NULL, HDR_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (h == MAP_FAILED) {
        WARN("standin: mmap /dev/shm%s: %s", name, strerror(errno));
        close(fd);
        return ncclSystemError;
    }
    if (memcmp(h->magic, AREA_MAGIC, sizeof AREA_MAGIC) != 0) {
        WARN("standin: /dev/shm%s is not a stand-in area", name);
        munmap(h, HDR_BYTES);
        close(fd);
        return ncclInvalidArgument;
    }
    uint32_t zero = 0;
    if (!atomic_compare_exchange_strong(&h->nranks, &zero, (uint32_t)nranks) &&
        zero != (uint32_t)nranks) {
        WARN("standin: rank %d says nranks %d, but an earlier rank said %u", rank, nranks, zero);
        munmap(h, HDR_BYTES);
        close(fd);
        return ncclInvalidUsage;
    }
    size_t total = area_bytes((size_t)nranks, h->slot_bytes, h->chan_bytes);
    munmap(h, HDR_BYTES);
    struct stat st;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size < total) {
        int e = posix_fallocate(fd, 0, (off_t)total);
        if (e) {
            WARN("Error: failed to extend /dev/shm%s to %zu bytes, error: %s (%d)", name, total,
                 strerror(e), e);
            /* Give the space back but keep the name: every other rank then fails the same
             * way, as on NCCL; the stale name goes with the next id's sweep. */
            if (ftruncate(fd, HDR_BYTES) != 0) trace("ftruncate: %s", strerror(errno));
            close(fd);
            return ncclSystemError;
        }
    }
    char *base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        WARN("standin: mmap /dev/shm%s (%zu bytes): %s", name, total, strerror(errno));
        return ncclSystemError;
    }
    if (cfg.init_stuck == rank) {
        /* A rank whose init never gets to join (STANDIN_NCCL_INIT_STUCK): the others wait for
         * it, as behind a peer stuck in CUDA or in its bootstrap. */
        WARN("standin: rank %d is stuck in init (STANDIN_NCCL_INIT_STUCK=%ld)", rank,
             cfg.init_stuck);
        while (!(cancel && atomic_load(cancel))) usleep(20000);
        munmap(base, total);
        WARN("standin: rank %d: init aborted (ncclCommAbort)", rank);
        return ncclInvalidUsage;
    }
    struct comm *c = comm_new(base, total, rank, nranks, dev);
    if (!c) {
        munmap(base, total);
        return ncclSystemError;
    }
    int last = 0;
    ncclResult_t r = join(c, &last);
    if (r) {
        c->magic = 0;
        munmap(base, total);
        shm_unlink(name);
        return r;
    }
    if (last) shm_unlink(name); /* everyone has it mapped; nothing is left behind */
    /* NCCL's init blocks until every rank is there (no timeout of its own). */
    for (;;) {
        uint32_t j = atomic_load(&c->hdr->joined);
        if (j >= (uint32_t)nranks) break;
        uint32_t a = atomic_load(&c->hdr->abort_by);
        if (a) {
            WARN("standin: rank %u aborted the communicator during init", a - 1);
            atomic_store(&c->finished, 1);
            comm_unref(c);
            return ncclRemoteError;
        }
        if (cancel && atomic_load(cancel)) {
            WARN("standin: rank %d: init aborted (ncclCommAbort) with %u of %d ranks joined",
                 rank, j, nranks);
            atomic_store(&c->finished, 1);
            comm_unref(c);
            return ncclInvalidUsage;
        }
        futex_wait(&c->hdr->joined, j, 50);
    }
    if ((r = after_join(c))) {
        /* Every rank sees the same duplicate: all fail, as in NCCL. */
        atomic_store(&c->finished, 1);
        comm_unref(c);
        return r;
    }
    trace("ncclCommInitRank: comm %p rank %d/%d on device %d", (void *)c, rank, nranks, dev);
    *out = c;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommInitRank(struct comm **out, int nranks, ncclUniqueId id, int rank) {
    setup();
    return init_rank(out, nranks, id, rank, have_cuda() ? current_device() : 0, NULL);
}

/* NCCL_COMM_BLOCKING overrides a communicator's mode when it is 0 or 1, and only then
 * (NVIDIA/nccl v2.28.9-1 src/init.cc:1647-1649, envConfigOverride; read with strtoll, base 0). */
static int env_blocking(int dflt) {
    const char *env = getenv("NCCL_COMM_BLOCKING");
    if (!env || !*env) return dflt;
    char *end;
    long long v = strtoll(env, &end, 0);
    return v == 0 || v == 1 ? (int)v : dflt;
}

/* The fields of ncclConfig_t every release since 2.14 has, in its order (nccl.h). NCCL copies
 * min(size, its own sizeof) bytes over its defaults and resets fields newer than `version`. */
struct config14 {
    size_t size;
    unsigned int magic, version;
    int blocking;
};
#define CONFIG_MAGIC 0xcafebeefu
#define CONFIG_UNDEF_INT INT_MIN

struct init_job {
    struct comm *proxy;
    int nranks, rank, dev;
    ncclUniqueId id;
};

static void *init_main(void *arg) {
    struct init_job *j = arg;
    struct comm *real = NULL;
    t_dev = j->dev;
    ncclResult_t r = init_rank(&real, j->nranks, j->id, j->rank, j->dev, &j->proxy->cancel);
    if (real) real->blocking = 0; /* the config's mode is the communicator's, for every call */
    atomic_store(&j->proxy->real, real);
    atomic_store(&j->proxy->init_state, (int)r);
    atomic_store(&j->proxy->init_done, 1);
    free(j);
    return NULL;
}

EXPORT ncclResult_t ncclCommInitRankConfig(struct comm **out, int nranks, ncclUniqueId id,
                                           int rank, struct config14 *config) {
    setup();
    if (!out) return ncclInvalidArgument;
    *out = NULL;
    int blocking = 1;
    if (config) {
        if (config->size < offsetof(struct config14, blocking) + sizeof(int) ||
            config->magic != CONFIG_MAGIC) {
            WARN("ncclCommInitRankConfig : invalid config (size %zu, magic 0x%x): build it from "
                 "NCCL_CONFIG_INITIALIZER",
                 config->size, config->magic);
            return ncclInvalidArgument;
        }
        if (config->blocking != CONFIG_UNDEF_INT) blocking = config->blocking;
    }
    blocking = env_blocking(blocking);
    int dev = have_cuda() ? current_device() : 0;
    if (blocking) return init_rank(out, nranks, id, rank, dev, NULL);
    if (!have_cuda()) {
        WARN("standin: the CUDA stand-in (libcuda.so.1 with standin_cuda_*) is not loaded");
        return ncclSystemError;
    }
    if (nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks) {
        WARN("Invalid rank requested : %d/%d", rank, nranks);
        return ncclInvalidArgument;
    }
    /* As NCCL: the handle at once, in progress; the work on a thread of its own. */
    struct comm *p = comm_new(NULL, 0, rank, nranks, dev);
    struct init_job *j = calloc(1, sizeof *j);
    if (!p || !j) {
        free(j);
        return ncclSystemError;
    }
    p->proxy = 1;
    atomic_store(&p->init_state, ncclInProgress);
    *j = (struct init_job){p, nranks, rank, dev, id};
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int e = pthread_create(&th, &at, init_main, j);
    pthread_attr_destroy(&at);
    if (e) {
        WARN("standin: pthread_create: %s", strerror(e));
        free(j);
        p->magic = 0;
        return ncclSystemError;
    }
    *out = p;
    return (ncclResult_t)atomic_load(&p->init_state);
}

/* The rest of ncclCommInitAll: every device joins, then NCCL's checks; each communicator's
 * state says how it ended (a failed one stays unusable). */
struct initall_job {
    struct comm **made;
    int ndev;
};

static ncclResult_t initall_finish(struct initall_job *j) {
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < j->ndev && r == ncclSuccess; i++) {
        int last;
        r = join(j->made[i], &last);
    }
    for (int i = 0; i < j->ndev && r == ncclSuccess; i++) {
        t_dev = j->made[i]->dev;
        r = after_join(j->made[i]);
    }
    for (int i = 0; i < j->ndev; i++) {
        if (r) atomic_store(&j->made[i]->finished, 1);
        atomic_store(&j->made[i]->call_state, (int)r);
    }
    free(j->made);
    free(j);
    return r;
}

static void *initall_main(void *p) {
    initall_finish(p);
    return NULL;
}

EXPORT ncclResult_t ncclCommInitAll(struct comm **comms, int ndev, const int *devlist) {
    setup();
    banner();
    if (!comms || ndev < 1 || ndev > MAX_RANKS) {
        WARN("ncclCommInitAll : invalid argument (ndev %d)", ndev);
        return ncclInvalidArgument;
    }
    if (!have_cuda()) {
        WARN("standin: the CUDA stand-in (libcuda.so.1 with standin_cuda_*) is not loaded");
        return ncclSystemError;
    }
    size_t total = area_bytes((size_t)ndev, cfg.slot_bytes, cfg.chan_bytes);
    char *base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        WARN("standin: mmap %zu bytes: %s", total, strerror(errno));
        return ncclSystemError;
    }
    struct area_hdr *h = (struct area_hdr *)base;
    memcpy(h->magic, AREA_MAGIC, sizeof AREA_MAGIC);
    h->slot_bytes = cfg.slot_bytes;
    h->chan_bytes = cfg.chan_bytes;
    getrandom(&h->comm_hash, sizeof h->comm_hash, 0);
    atomic_store(&h->nranks, (uint32_t)ndev);
    struct comm **made = calloc((size_t)ndev, sizeof *made);
    if (!made) {
        munmap(base, total);
        return ncclSystemError;
    }
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < ndev && r == ncclSuccess; i++) {
        int dev = devlist ? devlist[i] : i;
        made[i] = comm_new(base, total, i, ndev, dev);
        if (!made[i]) r = ncclSystemError;
    }
    if (r) {
        for (int i = 0; i < ndev; i++)
            if (made[i]) made[i]->magic = 0;
        munmap(base, total);
        free(made);
        return r;
    }
    /* Blocking unless NCCL_COMM_BLOCKING=0, which makes even these non-blocking
     * (envConfigOverride): the handles at once, ncclInProgress, the init on a thread. */
    int blocking = env_blocking(1);
    for (int i = 0; i < ndev; i++) {
        made[i]->keep_map = 1; /* one anonymous mapping serves them all, for the process's life */
        made[i]->blocking = blocking;
        comms[i] = made[i];
    }
    struct initall_job *j = malloc(sizeof *j);
    if (!j) {
        free(made);
        return ncclSystemError;
    }
    *j = (struct initall_job){made, ndev};
    if (blocking) {
        r = initall_finish(j);
        if (r)
            for (int i = 0; i < ndev; i++) comms[i] = NULL; /* nothing to use or to free */
        return r;
    }
    for (int i = 0; i < ndev; i++) atomic_store(&made[i]->call_state, ncclInProgress);
    if (spawn(initall_main, j)) {
        for (int i = 0; i < ndev; i++) {
            made[i]->magic = 0; /* never handed over: nothing to use or to free */
            comms[i] = NULL;
        }
        free(made);
        free(j);
        return ncclSystemError;
    }
    return ncclInProgress;
}

/* ---------------------------------------------------------------- ncclCommSplit */

/* The head of ncclConfig_t up to splitShare (2.18's layout; later releases append). */
struct config18 {
    size_t size;
    unsigned int magic, version;
    int blocking, cgaClusterSize, minCTAs, maxCTAs;
    const char *netName;
    int splitShare;
};

struct split_job {
    struct comm *parent;
    int color, key, blocking;
    struct comm **out;
};

/* Every rank's color and key, exchanged through the area: only the split that keeps every
 * rank, in its order, is modelled (what ringlab asks); anything else is refused. */
static ncclResult_t split_work(struct split_job *j) {
    struct comm *p = j->parent;
    int who = -1, me = p->rank;
    RI(p, me)->split_color = j->color;
    RI(p, me)->split_key = j->key;
    int w = barrier(p, &who);
    for (int r = 0; w == WAIT_OK && r < p->nranks; r++) {
        struct rankinfo *ri = RI(p, r);
        if (ri->split_color != RI(p, 0)->split_color || (r > 0 && ri->split_key <= RI(p, r - 1)->split_key)) {
            WARN("standin: ncclCommSplit: rank %d gave color %d key %d; the stand-in models only "
                 "a split that keeps every rank in its order (one color, keys rising with rank)",
                 r, ri->split_color, ri->split_key);
            return ncclInvalidUsage;
        }
    }
    if (w == WAIT_OK) w = barrier(p, &who); /* everyone has read the others' arguments */
    if (w) {
        wait_failed(p, w, who, "ncclCommSplit");
        return (ncclResult_t)atomic_load(&p->async_err);
    }
    struct comm *c = comm_new(p->base, p->bytes, me, p->nranks, p->dev);
    if (!c) return ncclSystemError;
    c->blocking = j->blocking;
    c->seq = p->seq;
    c->parent = p;
    atomic_fetch_add(&p->refs, 1);
    t_dev = p->dev;
    info("ncclCommSplit comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %llx parent %p "
         "splitCount 1 color %d key %d - Init COMPLETE",
         (void *)c, me, p->nranks, p->dev, p->dev, (unsigned long long)RI(p, me)->bus, (void *)p,
         j->color, j->key);
    /* NCCL hands the child over only once it is made (ncclCommInitRankFunc). */
    __atomic_store_n(j->out, c, __ATOMIC_RELEASE);
    return ncclSuccess;
}

static void *split_main(void *arg) {
    struct split_job *j = arg;
    t_dev = j->parent->dev;
    ncclResult_t r = split_work(j);
    atomic_store(&j->parent->call_state, (int)r);
    comm_unref(j->parent);
    free(j);
    return NULL;
}

/* The split runs in the parent's mode (its job is queued on the parent: NVIDIA/nccl v2.28.9-1
 * src/init.cc:2550-2681, src/group.cc:28-60): on a non-blocking parent it returns
 * ncclInProgress and the parent's state says when it is done; the child's own mode is the
 * config's, else the parent's, NCCL_COMM_BLOCKING over both (envConfigOverride). */
EXPORT ncclResult_t ncclCommSplit(struct comm *c, int color, int key, struct comm **newcomm,
                                  struct config18 *config) {
    setup();
    if (!newcomm) return ncclInvalidArgument;
    *newcomm = NULL;
    if (!comm_ok(c)) {
        WARN("ncclCommSplit : invalid communicator %p", (void *)c);
        return ncclInvalidArgument;
    }
    ncclResult_t fr;
    struct comm *p = fwd(c, &fr);
    if (!p || atomic_load(&p->call_state) == ncclInProgress) {
        WARN("Attempt to use communicator before the previous operation returned ncclSuccess");
        return ncclInvalidArgument;
    }
    if (atomic_load(&p->finished)) {
        WARN("ncclCommSplit : communicator %p was destroyed or aborted", (void *)c);
        return ncclInvalidUsage;
    }
    int blocking = p->blocking;
    if (config) {
        if (config->magic != CONFIG_MAGIC) {
            WARN("ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER");
            return ncclInvalidArgument;
        }
        if (config->size >= offsetof(struct config18, blocking) + sizeof(int) &&
            config->blocking != CONFIG_UNDEF_INT)
            blocking = config->blocking;
    }
    struct split_job *j = malloc(sizeof *j);
    if (!j) return ncclSystemError;
    *j = (struct split_job){p, color, key, env_blocking(blocking), newcomm};
    atomic_fetch_add(&p->refs, 1);
    if (p->blocking) {
        ncclResult_t r = split_work(j);
        comm_unref(p);
        free(j);
        return r;
    }
    atomic_store(&p->call_state, ncclInProgress);
    if (spawn(split_main, j)) {
        atomic_store(&p->call_state, ncclSuccess);
        comm_unref(p);
        free(j);
        return ncclSystemError;
    }
    return ncclInProgress;
}

/* ---------------------------------------------------------------- teardown */

static void wake_all(struct comm *c) {
    futex_wake(&c->hdr->bar_gen);
    futex_wake(&c->hdr->joined);
    for (int r = 0; r < c->nranks; r++) ring(c, r);
}

EXPORT ncclResult_t ncclCommAbort(struct comm *c) {
    setup();
    trace("ncclCommAbort(%p)", (void *)c);
    if (!c) return ncclSuccess;
    if (!comm_ok(c)) {
        WARN("ncclCommAbort : invalid communicator %p", (void *)c);
        return ncclInvalidArgument;
    }
    if (c->proxy) {
        /* NCCL flags the init thread, joins it and ignores its error; here the thread is given
         * up to 2 s (a dial in the bootstrap does not see the flag) and then left behind. */
        if (atomic_exchange(&c->finished, 1)) {
            WARN("ncclCommAbort : communicator %p was already destroyed or aborted", (void *)c);
            return ncclInvalidUsage;
        }
        atomic_store(&c->cancel, 1);
        for (int i = 0; i < 100 && !atomic_load(&c->init_done); i++) usleep(20000);
        struct comm *real = atomic_load(&c->real);
        return real ? ncclCommAbort(real) : ncclSuccess;
    }
    if (atomic_exchange(&c->finished, 1)) {
        WARN("ncclCommAbort : communicator %p was already destroyed or aborted", (void *)c);
        return ncclInvalidUsage;
    }
    atomic_store(&c->aborted, 1);
    atomic_store(&RI(c, c->rank)->aborted, 1);
    uint32_t zero = 0;
    atomic_compare_exchange_strong(&c->hdr->abort_by, &zero, (uint32_t)c->rank + 1);
    wake_all(c);
    comm_unref(c);
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommFinalize(struct comm *c) {
    setup();
    if (!comm_ok(c)) return ncclInvalidArgument;
    if (c->proxy) {
        ncclResult_t fr;
        if (!fwd(c, &fr)) {
            WARN("ncclCommFinalize : communicator %p is not ready", (void *)c);
            return fr;
        }
    }
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommDestroy(struct comm *c) {
    setup();
    trace("ncclCommDestroy(%p)", (void *)c);
    if (!c) return ncclSuccess;
    if (!comm_ok(c)) {
        WARN("ncclCommDestroy : invalid communicator %p", (void *)c);
        return ncclInvalidArgument;
    }
    if (atomic_exchange(&c->finished, 1)) {
        WARN("ncclCommDestroy : communicator %p was already destroyed or aborted", (void *)c);
        return ncclInvalidUsage;
    }
    if (c->proxy) {
        ncclResult_t fr;
        struct comm *real = fwd(c, &fr);
        if (!real) {
            WARN("ncclCommDestroy : communicator %p is not ready (abort it instead)", (void *)c);
            return fr;
        }
        return ncclCommDestroy(real);
    }
    comm_unref(c);
    return ncclSuccess;
}
