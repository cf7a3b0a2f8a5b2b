#!/usr/bin/env python3
"""ringlab's same-node transports (P2P single copy, SHM) beside Open MPI's, its own TCP transport and a memcpy ceiling, in one run.

2 ranks on this machine, float32 sum, in place, rank 0's time (ringlab's `-a 0`). Measured, with
repetitions interleaved (each repetition runs every implementation over all sizes, in fresh
processes, the order rotating from one repetition to the next) and the median taken per size:

  ringlab P2P   ringlab bench --backend tcp --nproc-per-node 2, the default: messages from 1 MiB read
                straight out of the partner's mapped buffer (one copy), smaller ones through the FIFO
  ringlab SHM   the same with NCCL_P2P_DISABLE=1 (every byte through /dev/shm FIFOs: two copies)
  ringlab NET   the same with NCCL_SHM_DISABLE=1 (loopback TCP), so the gap between transports shows
  OMPI shm      MPI_Allreduce(MPI_IN_PLACE) via mpi_bench.py under --mca pml ob1 --mca btl self,vader
                (self,sm on Open MPI 5)
  memcpy        single-thread memcpy(3) of SIZE bytes between page-aligned buffers, a tiny C program
                compiled here with cc, warm buffers reused like the collectives'; GB/s = SIZE / time

busbw follows nccl-tests (all-reduce: algbw x 2(n-1)/n, = algbw at 2 ranks), GB/s = 1e9 B/s.
Targets checked, for ringlab's default (P2P): busbw >= OMPI shm at 64 KiB..256 MiB; 1 KiB latency <=
OMPI shm's; busbw >= 50% of memcpy at 4..256 MiB. Results (with every sample) go to target/shm_compare.json.

Needs: apt-get install openmpi-bin libopenmpi-dev && pip install mpi4py numpy; cc.
Usage: scripts/compare/shm.py [--reps 5] [--quick]
"""
import argparse, datetime, json, os, re, shutil, statistics, subprocess, sys, tempfile

sys.dont_write_bytecode = True  # no __pycache__ left behind for compare.py
from compare import BIN, KiB, MiB, ROOT, have, ompi_once, ringlab_once, run_json_lines

SIZES = [1 * KiB, 64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB]
QUICK_SIZES = [1 * KiB, 64 * KiB, 4 * MiB, 64 * MiB]
NAMES = ["P2P", "SHM", "NET", "OMPI shm", "memcpy"]

MEMCPY_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
/* memcpy SIZE ITERS WARMUP [SIZE ITERS WARMUP ...]: batches of ITERS copies until 10 ms have passed */
int main(int argc, char **argv) {
    for (int a = 1; a + 2 < argc; a += 3) {
        size_t n = strtoull(argv[a], 0, 10);
        long iters = atol(argv[a + 1]), warmup = atol(argv[a + 2]), done = 0;
        /* page-aligned: two adjacent heap blocks (64K+16 B apart) would hit 4K aliasing, ~20x slow at 64 KiB */
        size_t cap = (n + 4095) / 4096 * 4096;
        char *src = aligned_alloc(4096, cap), *dst = aligned_alloc(4096, cap);
        memset(src, 1, n);
        memset(dst, 0, n);
        for (long i = 0; i < warmup; i++) { memcpy(dst, src, n); __asm__ volatile("" : : "r"(dst) : "memory"); }
        double t0 = now(), t;
        do {
            for (long i = 0; i < iters; i++) { memcpy(dst, src, n); __asm__ volatile("" : : "r"(dst) : "memory"); }
            done += iters;
        } while ((t = now()) - t0 < 0.01);
        printf("{\"size\": %zu, \"time_us\": %.4f}\n", n, (t - t0) / done * 1e6);
        fflush(stdout);
        free(src);
        free(dst);
    }
    return 0;
}
"""


def plan(budget):
    """Timed iterations and warm-ups per size: about `budget` bytes per timed loop, so big sizes stay short."""
    iters = lambda size: max(3, min(1000, budget // size))
    warmup = lambda size: max(1, min(20, budget // 8 // size))
    return iters, warmup


def build_memcpy(tmp):
    src, exe = os.path.join(tmp, "memcpy.c"), os.path.join(tmp, "memcpy")
    with open(src, "w") as f:
        f.write(MEMCPY_C)
    subprocess.run(["cc", "-O2", "-o", exe, src], check=True)
    return exe


def memcpy_once(exe, sizes, iters, warmup):
    args = [str(x) for size in sizes for x in (size, iters(size), warmup(size))]
    return {r["size"]: r["time_us"] for r in run_json_lines([exe] + args)}


def ompi_version():
    out = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout
    m = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    return m.group(0), int(m.group(1))


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def fmt_size(size):
    return f"{size // MiB}M" if size >= MiB else f"{size // KiB}K"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 5, --quick 3)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 4 sizes up to 64 MiB, 3 repetitions, shorter loops")
    a = ap.parse_args()
    reps = a.reps or (3 if a.quick else 5)
    sizes = QUICK_SIZES if a.quick else SIZES
    iters, warmup = plan(64 * MiB if a.quick else 256 * MiB)
    if not (shutil.which("mpirun") and have("mpi4py") and have("numpy")):
        sys.exit("needs Open MPI and mpi4py: apt-get install openmpi-bin libopenmpi-dev && pip install mpi4py numpy")
    if not os.path.exists(BIN):
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    version, major = ompi_version()
    btl = "self,sm" if major >= 5 else "self,vader"
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    built = datetime.datetime.fromtimestamp(os.path.getmtime(BIN)).isoformat(timespec="seconds")
    p2p_env = {k: v for k, v in os.environ.items() if k not in ("NCCL_SHM_DISABLE", "NCCL_P2P_DISABLE")}
    shm_env = dict(p2p_env, NCCL_P2P_DISABLE="1")
    net_env = dict(p2p_env, NCCL_SHM_DISABLE="1")
    tmp = tempfile.mkdtemp(prefix="ringlab-memcpy-")
    try:
        exe = build_memcpy(tmp)
        runs = {
            "P2P": lambda: ringlab_once(sizes, p2p_env, "P2P", iters, warmup),
            "SHM": lambda: ringlab_once(sizes, shm_env, "SHM", iters, warmup),
            "NET": lambda: ringlab_once(sizes, net_env, "NET", iters, warmup),
            "OMPI shm": lambda: ompi_once(sizes, btl, iters, warmup),
            "memcpy": lambda: memcpy_once(exe, sizes, iters, warmup),
        }
        print(f"# {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}  {os.cpu_count()} CPUs ({cpu_model()}), "
              f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"# ringlab binary built {built} (checkout at {rev}); Open MPI {version}, --mca pml ob1 --mca btl {btl}; memcpy: C, cc -O2, one thread")
        print(f"# 2 ranks, float32 sum, in place, rank 0's time; medians of {reps} interleaved repetitions; busbw GB/s (= algbw at 2 ranks)")
        samples = {n: {size: [] for size in sizes} for n in runs}
        loads = []
        for rep in range(reps):
            order = NAMES[rep % len(NAMES):] + NAMES[:rep % len(NAMES)]
            for n in order:
                try:
                    for size, us in runs[n]().items():
                        samples[n][size].append(us)
                except Exception as e:  # one failing must not hide the others
                    print(f"# {n}, repetition {rep + 1}, failed: {e}")
            loads.append(os.getloadavg()[0])
            print(f"# repetition {rep + 1}/{reps} done, load {loads[-1]:.2f}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    t = {n: {s: statistics.median(v) for s, v in per.items() if v} for n, per in samples.items()}
    bw = {n: {s: s / us / 1e3 for s, us in per.items()} for n, per in t.items()}  # bytes/us/1e3 = GB/s
    ratio = lambda x, y, s: bw[x][s] / bw[y][s] if s in bw[x] and s in bw[y] else None
    f3 = lambda v: f"{v:.3f}" if v is not None else "-"
    f2 = lambda v: f"{v:.2f}" if v is not None else "-"
    verdict = lambda ok: "-" if ok is None else ("PASS" if ok else "FAIL")
    print(f"{'size':>6} {'P2P':>8} {'SHM':>8} {'NET':>8} {'OMPI shm':>9} {'memcpy':>8} {'P2P/SHM':>8} {'P2P/OMPI':>9}"
          f" {'P2P/memcpy':>10} {'>=OMPI':>7} {'>=50%cpy':>9}")
    fails = {"busbw": [], "memcpy": []}
    for s in sizes:
        r_ompi, r_cpy, r_shm = ratio("P2P", "OMPI shm", s), ratio("P2P", "memcpy", s), ratio("P2P", "SHM", s)
        ok1 = (r_ompi >= 1.0 if r_ompi is not None else False) if s >= 64 * KiB else None
        ok3 = (r_cpy >= 0.5 if r_cpy is not None else False) if s >= 4 * MiB else None
        if ok1 is False: fails["busbw"].append(fmt_size(s))
        if ok3 is False: fails["memcpy"].append(fmt_size(s))
        print(f"{fmt_size(s):>6} " + " ".join(f"{f3(bw[n].get(s)):>{w}}" for n, w in zip(NAMES, (8, 8, 8, 9, 8)))
              + f" {f2(r_shm):>8} {f2(r_ompi):>9} {f2(r_cpy):>10} {verdict(ok1):>7} {verdict(ok3):>9}")
    lat_ok = None
    if KiB in sizes:
        us = {n: t[n].get(KiB) for n in NAMES}
        print("# 1 KiB time (us): " + ", ".join(f"{n} {us[n]:.2f}" if us[n] is not None else f"{n} -" for n in NAMES))
        if us["P2P"] is not None and us["OMPI shm"] is not None:
            lat_ok = us["P2P"] <= us["OMPI shm"]
            print(f"# 1 KiB latency P2P / OMPI shm = {us['P2P'] / us['OMPI shm']:.2f} (target <= 1)")
    in_range = lambda lo: [fmt_size(s) for s in sizes if s >= lo]
    print(f"# targets: busbw >= OMPI shm at {','.join(in_range(64 * KiB))}: {verdict(not fails['busbw'])}"
          + (f" (fails at {','.join(fails['busbw'])})" if fails["busbw"] else "")
          + f"; 1 KiB latency <= OMPI shm: {verdict(lat_ok)}"
          + f"; >= 50% memcpy at {','.join(in_range(4 * MiB))}: {verdict(not fails['memcpy'])}"
          + (f" (fails at {','.join(fails['memcpy'])})" if fails["memcpy"] else ""))
    print(f"# load average (1 min) after each repetition: {' '.join(f'{x:.2f}' for x in loads)}")
    with open(os.path.join(ROOT, "target", "shm_compare.json"), "w") as f:
        json.dump({"ompi": version, "btl": btl, "reps": reps, "loads": loads, "sizes": sizes,
                   "time_us": {n: {str(s): v for s, v in per.items()} for n, per in t.items()},
                   "samples_us": {n: {str(s): v for s, v in per.items()} for n, per in samples.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
