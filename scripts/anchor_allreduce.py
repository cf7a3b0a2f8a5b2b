#!/usr/bin/env python3
"""The anchor for ringlab's NCCL bench: torch.distributed's NCCL all_reduce, float32 sum, on
the same ranks and the same transport as `ringlab bench --backend nccl --ranks-per-gpu K`.

Started by torchrun (RANK, LOCAL_RANK, WORLD_SIZE set). With --ranks-per-gpu K, K ranks share
each GPU and each rank is a host of its own to NCCL (NCCL_HOSTID), so the bytes cross
NET/Socket exactly as in ringlab's shared-GPU mode. Timed like nccl-tests and ringlab: warm-up,
one untimed call, a barrier, then N calls between a host clock read and a stream
synchronisation. Prints one JSON line per size from rank 0:
{"size": B, "time_us": t, "algbw_gbps": a, "busbw_gbps": b}.

    torchrun --nproc-per-node 2 scripts/anchor_allreduce.py --ranks-per-gpu 2 -b 8 -e 256M
"""
import argparse
import json
import os
import socket
import time


def size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1]] if s[-1] in units else int(s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-b", type=size, default=8)
    ap.add_argument("-e", type=size, default=256 << 20)
    ap.add_argument("-f", type=int, default=4)
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("-w", type=int, default=5)
    ap.add_argument("--ranks-per-gpu", type=int, default=1)
    a = ap.parse_args()
    rank = int(os.environ["RANK"])
    local = int(os.environ["LOCAL_RANK"])
    if a.ranks_per_gpu > 1:
        # Before torch loads NCCL: each rank its own NCCL host (as ringlab does).
        os.environ["NCCL_HOSTID"] = f"{socket.gethostname()}-anchor-rank{rank}"
    import torch
    import torch.distributed as dist

    dev = torch.device("cuda", local // a.ranks_per_gpu)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    n = dist.get_world_size()
    assert n >= 2, "an all-reduce of one rank moves nothing"
    dist.all_reduce(torch.ones(1, device=dev))  # NCCL is loaded and initialised by now

    def mapped_libnccl():
        # The libnccl file this process really mapped (the comparison needs ringlab's too).
        with open("/proc/self/maps") as maps:
            for line in maps:
                if "libnccl" in line:
                    return line.split()[-1]
        return None

    libnccl = mapped_libnccl()
    s = a.b
    while s <= a.e:
        count = max(s // 4, 1)
        x = torch.ones(count, dtype=torch.float32, device=dev)
        for _ in range(a.w):
            dist.all_reduce(x)
        dist.all_reduce(x)
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(a.n):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        t = (time.perf_counter() - t0) / a.n
        x.fill_(1.0)
        dist.all_reduce(x)
        ok = bool(torch.all(x == n).item())
        if rank == 0:
            algbw = count * 4 / t / 1e9
            print(json.dumps({
                "size": count * 4, "time_us": t * 1e6, "algbw_gbps": algbw,
                "busbw_gbps": algbw * 2 * (n - 1) / n, "correct": ok,
                "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                "libnccl": libnccl,
            }), flush=True)
        s *= a.f
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
