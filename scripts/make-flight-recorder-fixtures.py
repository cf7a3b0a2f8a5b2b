#!/usr/bin/env python3
"""Make real PyTorch Flight Recorder dumps for `ringlab doctor --trace`.

Made with: torch 2.15.0 (+cu132 wheel from PyPI, git d0f2af8b66b20da4baa50644c0cd3f887a2eae2e),
Python 3.11, run on CPU only (gloo backend, 3 processes on 127.0.0.1). Dump format version "2.10".

How to run (needs no GPU; torch is NOT a dependency of ringlab, keep it out of the repo):

    python3 -m venv /tmp/frvenv && /tmp/frvenv/bin/pip install torch numpy
    /tmp/frvenv/bin/python scripts/make-flight-recorder-fixtures.py [OUT_DIR]

OUT_DIR defaults to tests/fixtures/flight-recorder (relative to the repo root).
It takes about 40 s. Every file it writes is what torch itself returns from its own
dump functions: c10d._dump_fr_trace (pickle), c10d._dump_fr_trace_json (JSON) and
c10d._dump_fr_trace_file (pickle written by torch's DebugInfoWriter); nothing is
edited afterwards. Timestamps, thread ids and stack frames change on every run.

Cases (world size 3, collective #K = 12, 20 steps of all_reduce on float32[8]):
  healthy/                    every rank does all 20 all_reduce; dumped at the end (with stack frames).
  healthy-default-names/      5 all_reduce, written by torch's own file writer under the names
                              torch uses (<TORCH_FR_DUMP_TEMP_FILE><rank> = comm_lib_trace_rank_<rank>).
  rank-skips-collective/      rank 1 never calls #12 (stalls instead); ranks 0 and 2 are blocked
                              inside #12. All three dumped ~2 s into the hang, before the 5 s timeout.
  rank-skips-collective-after-timeout/
                              same run, but ranks 0 and 2 dumped after their #12 timed out (rank 1
                              dumped after its stall) -- gloo then shows #12 retired and counted in
                              last_completed_collective although it failed.
  size-mismatch/              rank 2 calls #12 with float32[16], ranks 0 and 1 with float32[8]. gloo
                              aborts a process (SIGABRT in its transport thread) when the sizes meet,
                              so every rank dumps right after enqueueing #12 (rank 2 enqueues 1 s late).
  shape-mismatch/             rank 2 calls #12 with float32[2,4] instead of [8]: same byte count, so gloo
                              completes it silently; all 20 steps run; dumped at the end.
  rank-gone/                  rank 2 exits (os._exit) at step 12 without dumping; ranks 0 and 1 fail
                              inside #12 ("Connection closed by peer") and dump. No rank2.* file.

Each case directory has rank<r>.pkl and rank<r>.json (same moment, two formats) and case.json,
which this script writes (it is NOT a torch output) to say what happened.
"""

import datetime
import json
import os
import sys
import threading
import time

# The recorder is a process-wide singleton that reads its size when first used,
# so these must be set before torch creates it (children inherit them).
os.environ["TORCH_FR_BUFFER_SIZE"] = "50"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch._C._distributed_c10d as c10d  # noqa: E402

WORLD = 3
STEPS = 20
K = 12
TIMEOUT_S = 5


def write_dump(out_dir, rank, stack=False):
    os.makedirs(out_dir, exist_ok=True)
    pkl = c10d._dump_fr_trace(includeCollectives=True, includeStackTraces=stack, onlyActive=False)
    js = c10d._dump_fr_trace_json(includeCollectives=True, onlyActive=False)
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        f.write(pkl)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "wb") as f:
        f.write(js)


def init(rank, port):
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=WORLD,
        timeout=datetime.timedelta(seconds=TIMEOUT_S),
    )


def log(rank, msg):
    print(f"[rank {rank}] {msg}", flush=True)


def worker(rank, case, port, out):
    init(rank, port)
    try:
        if case == "healthy":
            for _ in range(STEPS):
                dist.all_reduce(torch.ones(8))
            write_dump(os.path.join(out, "healthy"), rank, stack=True)

        elif case == "healthy-default-names":
            d = os.path.join(out, "healthy-default-names")
            os.makedirs(d, exist_ok=True)
            for _ in range(5):
                dist.all_reduce(torch.ones(8))
            # torch's own writer: <TORCH_FR_DUMP_TEMP_FILE><rank>, set by main() for this case
            c10d._dump_fr_trace_file(rank)

        elif case == "rank-skips-collective":
            mid = os.path.join(out, "rank-skips-collective")
            after = os.path.join(out, "rank-skips-collective-after-timeout")
            for step in range(1, STEPS + 1):
                if step == K and rank == 1:
                    log(rank, f"skipping all_reduce #{K}, stalling")
                    time.sleep(2.0)
                    write_dump(mid, rank)  # dumped while the others hang in #K
                    time.sleep(TIMEOUT_S + 2.0)
                    write_dump(after, rank)
                    return
                if step == K:
                    # Dump from another thread while this one is blocked inside #K.
                    # (Stack traces are off: symbolizing them needs the GIL the
                    # blocked thread holds, and the dump would never return.)
                    threading.Timer(2.0, write_dump, args=(mid, rank)).start()
                try:
                    dist.all_reduce(torch.ones(8))
                except Exception as e:  # the timeout
                    log(rank, f"#{step} failed: {str(e).splitlines()[0][:160]}")
                    time.sleep(0.5)
                    write_dump(after, rank)
                    return

        elif case == "size-mismatch":
            d = os.path.join(out, "size-mismatch")
            for step in range(1, STEPS + 1):
                n = 16 if (step == K and rank == 2) else 8
                if step == K:
                    if rank == 2:
                        time.sleep(1.0)
                    work = dist.all_reduce(torch.ones(n), async_op=True)
                    write_dump(d, rank)  # #K is recorded at enqueue
                    log(rank, f"#{K} enqueued with {n} elements, dumped")
                    work.wait()
                    log(rank, f"#{K} returned (unexpected)")
                    return
                dist.all_reduce(torch.ones(n))

        elif case == "shape-mismatch":
            for step in range(1, STEPS + 1):
                t = torch.ones(2, 4) if (step == K and rank == 2) else torch.ones(8)
                dist.all_reduce(t)
            write_dump(os.path.join(out, "shape-mismatch"), rank)

        elif case == "rank-gone":
            d = os.path.join(out, "rank-gone")
            for step in range(1, STEPS + 1):
                if step == K and rank == 2:
                    log(rank, f"exiting at step {K}")
                    os._exit(3)
                try:
                    dist.all_reduce(torch.ones(8))
                except Exception as e:
                    log(rank, f"#{step} failed: {str(e).splitlines()[0][:160]}")
                    write_dump(d, rank)
                    return
    except Exception as e:
        log(rank, f"error: {e}")
    finally:
        sys.stdout.flush()
        os._exit(0)


CASE_NOTES = {
    "healthy": {"diverged": None, "what": "all ranks completed all_reduce #1..#20; dumped at the end with stack frames"},
    "healthy-default-names": {"diverged": None, "what": "5 all_reduce; files written by torch._C._distributed_c10d._dump_fr_trace_file(rank) with TORCH_FR_DUMP_TEMP_FILE=<this dir>/comm_lib_trace_rank_ (no extension, pickle)"},
    "rank-skips-collective": {"diverged": {"rank": 1, "seq": K, "kind": "never entered"}, "what": f"rank 1 never calls all_reduce #{K}; ranks 0 and 2 are inside #{K} (entry retired=False). Dumped ~2 s into the hang, before the {TIMEOUT_S} s timeout"},
    "rank-skips-collective-after-timeout": {"diverged": {"rank": 1, "seq": K, "kind": "never entered"}, "what": f"same run; ranks 0 and 2 dumped after #{K} timed out: gloo marks it retired=True and counts it in pg_status last_completed_collective although it failed"},
    "size-mismatch": {"diverged": {"rank": 2, "seq": K, "kind": "different sizes"}, "what": f"rank 2 called #{K} with input_sizes [[16]], ranks 0 and 1 with [[8]]; each rank dumped right after enqueueing #{K} (retired=False); gloo then aborted a process"},
    "shape-mismatch": {"diverged": {"rank": 2, "seq": K, "kind": "different sizes"}, "what": f"rank 2 called #{K} with input_sizes [[2, 4]], others [[8]]; same byte count so gloo completed it; all 20 steps ran"},
    "rank-gone": {"diverged": {"rank": 2, "seq": K, "kind": "gone"}, "what": f"rank 2 exited before #{K} and left no dump; ranks 0 and 1 failed inside #{K} and dumped"},
}


def run_case(case, port, out):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=worker, args=(r, case, port, out)) for r in range(WORLD)]
    for p in procs:
        p.start()
    deadline = time.time() + 60
    for p in procs:
        p.join(max(0.1, deadline - time.time()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    codes = [p.exitcode for p in procs]
    print(f"{case}: exit codes {codes}", flush=True)
    return codes


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(repo, "tests/fixtures/flight-recorder"))
    os.makedirs(out, exist_ok=True)
    port = 29600
    for case in ["healthy", "healthy-default-names", "rank-skips-collective", "size-mismatch", "shape-mismatch", "rank-gone"]:
        if case == "healthy-default-names":
            os.environ["TORCH_FR_DUMP_TEMP_FILE"] = os.path.join(out, case, "comm_lib_trace_rank_")
        else:
            os.environ.pop("TORCH_FR_DUMP_TEMP_FILE", None)
        codes = run_case(case, port, out)
        port += 1
        names = [case] + (["rank-skips-collective-after-timeout"] if case == "rank-skips-collective" else [])
        for name in names:
            d = os.path.join(out, name)
            os.makedirs(d, exist_ok=True)
            meta = {
                "written_by": "scripts/make-flight-recorder-fixtures.py (this file is not a torch output)",
                "torch": torch.__version__,
                "torch_git": torch.version.git_version,
                "backend": "gloo",
                "world_size": WORLD,
                "collective_k": K,
                "timeout_s": TIMEOUT_S,
                "TORCH_FR_BUFFER_SIZE": 50,
                "process_exit_codes": codes,
                "files": sorted(f for f in os.listdir(d) if f != "case.json"),
                **CASE_NOTES[name],
            }
            with open(os.path.join(d, "case.json"), "w") as f:
                json.dump(meta, f, indent=2)
                f.write("\n")


if __name__ == "__main__":
    main()
