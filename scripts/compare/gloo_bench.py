"""All-reduce (float32 sum, in place) between 2 processes with PyTorch's gloo backend on loopback.
Prints one JSON line per size: {"size": bytes, "time_us": median over reps}."""
import json, os, statistics, sys, time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = [int(s) for s in sys.argv[1].split(",")]
ITERS, REPS, PORT, WARMUP = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])


def worker(rank, world):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{PORT}", rank=rank, world_size=world)
    torch.set_num_threads(1)
    for size in SIZES:
        t = torch.ones(max(size // 4, 1), dtype=torch.float32)
        for _ in range(WARMUP):
            dist.all_reduce(t)
        reps = []
        for _ in range(REPS):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(ITERS):
                dist.all_reduce(t)
            reps.append((time.perf_counter() - t0) / ITERS * 1e6)
        if rank == 0:
            print(json.dumps({"size": size, "time_us": statistics.median(reps)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2, join=True)
