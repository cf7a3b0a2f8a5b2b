#!/usr/bin/env python3
"""ringlab's TCP all-reduce beside PyTorch gloo and Open MPI over TCP, on this machine, in one run.

2 ranks, loopback, float32 sum, in place, rank 0's time for every implementation (ringlab's
`-a 0`, as the peer scripts report rank 0). Repetitions are interleaved (each runs ringlab,
then every peer, over all sizes, each timed loop in fresh processes), so that slow spells of a
shared machine hit every implementation alike. For each size it takes the median of the REPS
timed loops and reports busbw (nccl-tests' definition: for all-reduce algbw x 2(n-1)/n, = algbw at n=2),
ratios against the peers, and busbw as a fraction of the loopback ceiling matched to each size
(a two-process, bidirectional socket stream of writes of that size from one reused buffer, warm,
measured by `ringlab __loopback --msg SIZE` in each repetition: a stream of 1 GiB through 4 MiB
buffers is no ceiling for a 256 KiB message, whose bytes stay in cache).

Peers run only if installed:
  gloo:     pip install torch numpy
  Open MPI: apt-get install openmpi-bin libopenmpi-dev && pip install mpi4py numpy
Usage: scripts/compare/compare.py [--reps 5] [--quick]   (RINGLAB_BIN=path: time another build)
"""
import argparse, json, os, shutil, socket, statistics, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
# RINGLAB_BIN: another build (an A/B of two checkouts, run alternately on one machine).
BIN = os.environ.get("RINGLAB_BIN") or os.path.join(ROOT, "target", "release", "ringlab")
KiB, MiB = 1024, 1024 * 1024
WARMUP = 20
SIZES = [1 * KiB, 64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 128 * MiB, 256 * MiB]


def iters_for(size):
    return max(3, min(500, int(200 * MiB / max(size, 64 * KiB) / 8)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def run_json_lines(cmd, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}... failed: {out.stderr[-800:]}")
    return [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]


def warmup_for(size):
    return WARMUP


def ringlab_once(sizes, env=None, transport=None, iters=iters_for, warmup=warmup_for):
    """One timed loop per size, each in a fresh job (rank 0's time, as the peers report).
    transport: "P2P", "SHM" or "NET" to fail unless ringlab reports having used it."""
    out = {}
    for size in sizes:
        rows = run_json_lines([BIN, "bench", "--backend", "tcp", "--nproc-per-node", "2", "-b", str(size), "-e", str(size),
                               "-n", str(iters(size)), "-w", str(warmup(size)), "-c", "0", "-a", "0", "--json"], env)
        row = [r for r in rows if r.get("in_place") is True][0]
        if transport and row.get("transport") != transport:
            raise RuntimeError(f"ringlab reported transport {row.get('transport')}, expected {transport}")
        out[size] = row["time_us"]
    return out


def gloo_once(sizes):
    out = {}
    for size in sizes:  # one process per size: each gets the same warm-up and a fresh port
        rows = run_json_lines([sys.executable, os.path.join(HERE, "gloo_bench.py"), str(size), str(iters_for(size)), "1",
                               str(free_port()), str(WARMUP)])
        out[size] = rows[0]["time_us"]
    return out


def ompi_once(sizes, btl="self,tcp", iters=iters_for, warmup=warmup_for):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = {}
    for size in sizes:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "--mca", "pml", "ob1", "--mca", "btl", btl,
               sys.executable, os.path.join(HERE, "mpi_bench.py"), str(size), str(iters(size)), "1", str(warmup(size))]
        out[size] = run_json_lines(cmd, env)[0]["time_us"]
    return out


def have(mod):
    return subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True).returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="fewer sizes")
    a = ap.parse_args()
    sizes = [1 * KiB, 1 * MiB, 64 * MiB] if a.quick else SIZES
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    peers = {}
    if have("torch"):
        peers["gloo"] = gloo_once
    else:
        print("# gloo: skipped (install with: pip install torch numpy)")
    if shutil.which("mpirun") and have("mpi4py") and have("numpy"):
        peers["ompi"] = ompi_once
    else:
        print("# Open MPI: skipped (install with: apt-get install openmpi-bin libopenmpi-dev && pip install mpi4py numpy)")
    def ceiling_once(sizes):
        """The loopback stream matched to each size: writes of that size, warm, 64 MiB or 16 messages."""
        return {s: run_json_lines([BIN, "__loopback", "--msg", str(s), "--bytes", str(max(64 * MiB, 16 * s))])[0]["per_direction_gbps"]
                for s in sizes}
    print(f"# medians of {a.reps} interleaved repetitions (one timed loop each, fresh processes); busbw in GB/s (1e9 B/s); in-place float32 sum, 2 ranks")
    names = ["ringlab"] + list(peers)
    print(f"{'size':>10} " + " ".join(f"{n + ' us':>12} {n + ' busbw':>13}" for n in names)
          + f" {'vs best peer':>12} {'vs gloo':>8} {'of ceiling':>10}")
    print("# of ceiling: busbw / the loopback stream of that size (median of one per repetition)")
    # Interleaved: every repetition runs each implementation over all sizes, in turn, so slow
    # spells of this machine hit all of them alike; then the median per size.
    # ringlab over its TCP transport: two ranks of one node would otherwise meet over shared memory
    # (scripts/compare/shm.py compares that transport with Open MPI's).
    tcp_env = dict(os.environ, NCCL_SHM_DISABLE="1")
    runs = {"ringlab": lambda s: ringlab_once(s, env=tcp_env, transport="NET"), **peers}
    samples = {n: {size: [] for size in sizes} for n in runs}
    ceilings = {size: [] for size in sizes}
    for rep in range(a.reps):
        for n, f in runs.items():
            try:
                for size, us in f(sizes).items():
                    samples[n][size].append(us)
            except Exception as e:  # a peer failing must not hide the others
                print(f"# {n}, repetition {rep + 1}, failed: {e}")
        for size, gbps in ceiling_once(sizes).items():
            ceilings[size].append(gbps)
        print(f"# repetition {rep + 1}/{a.reps} done", file=sys.stderr, flush=True)
    results = []
    for size in sizes:
        t = {n: statistics.median(v[size]) for n, v in samples.items() if v[size]}
        bw = {n: size / (us * 1e-6) / 1e9 for n, us in t.items()}
        peer_bw = [bw[n] for n in peers if n in bw]
        best = max(peer_bw) if peer_bw else None
        vs_best = f"{bw['ringlab'] / best:.2f}x" if best else "-"
        vs_gloo = f"{bw['ringlab'] / bw['gloo']:.2f}x" if "gloo" in bw else "-"
        ceil_gbps = statistics.median(ceilings[size])
        print(f"{size:>10} " + " ".join(f"{t.get(n, float('nan')):>12.1f} {bw.get(n, float('nan')):>13.3f}" for n in names)
              + f" {vs_best:>12} {vs_gloo:>8} {bw['ringlab'] / ceil_gbps:>9.0%}")
        results.append({"size": size, "time_us": t, "busbw_gbps": bw, "ceiling_gbps": ceil_gbps,
                        "samples_us": {n: v[size] for n, v in samples.items()}})
    if "ompi" in peers and results and results[0]["size"] == KiB and "ompi" in results[0]["time_us"]:
        r = results[0]["time_us"]
        print(f"# 1 KiB latency: ringlab {r['ringlab']:.1f} us, Open MPI {r['ompi']:.1f} us, ratio {r['ringlab'] / r['ompi']:.2f} (target <= 2)")
    with open(os.path.join(ROOT, "target", "compare.json"), "w") as f:
        json.dump({"results": results}, f, indent=1)


if __name__ == "__main__":
    main()
