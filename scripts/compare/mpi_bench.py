"""All-reduce (float32 sum, MPI_IN_PLACE) between 2 ranks with Open MPI (TCP or shared memory, per --mca btl).
Run under: mpirun -np 2 --mca pml ob1 --mca btl self,tcp (or self,vader; self,sm on Open MPI 5) python3 mpi_bench.py SIZES ITERS REPS WARMUP"""
import json, statistics, sys

import numpy as np
from mpi4py import MPI

SIZES = [int(s) for s in sys.argv[1].split(",")]
ITERS, REPS, WARMUP = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
comm = MPI.COMM_WORLD
for size in SIZES:
    buf = np.ones(max(size // 4, 1), dtype=np.float32)
    for _ in range(WARMUP):
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
    reps = []
    for _ in range(REPS):
        comm.Barrier()
        t0 = MPI.Wtime()
        for _ in range(ITERS):
            comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        reps.append((MPI.Wtime() - t0) / ITERS * 1e6)
    if comm.rank == 0:
        print(json.dumps({"size": size, "time_us": statistics.median(reps)}), flush=True)
