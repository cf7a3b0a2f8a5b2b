#!/usr/bin/env python3
"""A/B two ringlab binaries on the TCP bench: the same sizes, repetitions interleaved
(A, B, A, B, ...) in fresh processes, medians of busbw (GB/s) per size and placement, and the
ratio B / A. For checking that a change to the measurement or the engine costs nothing.

    scripts/compare/ab.py OLD_BINARY NEW_BINARY [--reps 5] [--sizes 1K,1M,64M] [--ranks 2] [--warmup 1]
"""
import argparse
import json
import statistics
import subprocess


def run(binary, size, ranks, iters, warmup):
    out = subprocess.run(
        [binary, "bench", "--backend", "tcp", "--nproc-per-node", str(ranks),
         "-b", size, "-e", size, "-n", str(iters), "-w", str(warmup), "--json"],
        capture_output=True, text=True, check=True)
    rows = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
    return {r["in_place"]: (r["busbw_gbps"], r["time_us"]) for r in rows if "in_place" in r}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sizes", default="1K,1M,64M")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=1)
    args = ap.parse_args()
    print(f"# A = {args.a}\n# B = {args.b}\n# {args.ranks} ranks, TCP, float sum, "
          f"{args.reps} interleaved repetitions, medians")
    print(f"{'size':>6} {'placement':>12} {'A busbw':>9} {'B busbw':>9} {'B/A':>6} "
          f"{'A us':>9} {'B us':>9}")
    for size in args.sizes.split(","):
        samples = {("a", p): [] for p in (False, True)}
        samples.update({("b", p): [] for p in (False, True)})
        for _ in range(args.reps):
            for who, binary in (("a", args.a), ("b", args.b)):
                for p, v in run(binary, size, args.ranks, args.iters, args.warmup).items():
                    samples[(who, p)].append(v)
        for p in (False, True):
            a = samples[("a", p)]
            b = samples[("b", p)]
            ab = statistics.median(x[0] for x in a)
            bb = statistics.median(x[0] for x in b)
            at = statistics.median(x[1] for x in a)
            bt = statistics.median(x[1] for x in b)
            print(f"{size:>6} {'in-place' if p else 'out-of-place':>12} {ab:9.3f} {bb:9.3f} "
                  f"{bb / ab if ab else 0:6.3f} {at:9.1f} {bt:9.1f}")


if __name__ == "__main__":
    main()
