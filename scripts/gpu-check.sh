#!/usr/bin/env bash
# The GPU check for ringlab's NCCL backend: one prepared run on a machine with GPUs and no
# cargo, that brings its evidence back whatever happens. A prebuilt, stripped binary does
# everything; every output is packed into two files after every step (and on exit, TERM or
# INT), so a run cut short still returns what it saw.
#
#   RINGLAB_BIN=.gpu/ringlab scripts/gpu-check.sh [OUT_DIR]      (default: $OUT or gpu-check-out)
#
# Build on a build machine (cargo build --release; strip -o .gpu/ringlab target/release/ringlab:
# the unstripped binary does not fit the 64 MiB that travels; the README says how large each is).
# In the order of ../shared/findings/2026-12-07-nccl.md ("Device check"), what one GPU can prove
# first: the machine (driver, kernel `uname -r`, `ip`/`iptables`, compute mode, MPS, container,
# pip versions, system NCCL); doctor; sanity on 2 ranks sharing one GPU with NCCL's INIT,NET log;
# a short torch anchor (torch.distributed's all_reduce, same libnccl, same ranks), always; the
# H1 A/B (8 B .. 1 MiB, 200 iterations, as ringlab runs it and with NCCL_COMM_BLOCKING=1 and
# =0); the H2 repeat (in-place send/recv 5 times: its #wrong must be N/A); 3-rank sanity and
# bf16 avg all-reduce and reduce-scatter; a rank killed mid-sweep (ERROR or HANG, how fast);
# the all-reduce sweep 8 B .. 128 MiB (-f 4) and a table; the smoke tests (1-rank sanity,
# single-process on this node's GPUs: with one GPU they move no data, and are named smoke-);
# the docker0 hang and its fix on real NCCL (needs `ip`); the full torch anchor; and last a
# thinned matrix (every collective x float/bfloat16 x sum, bf16 avg where it reduces).
#
# Time: a global budget (GPU_CHECK_BUDGET, default 420 s): every step is capped at the time
# left; a step the budget cannot fit is INCONCLUSIVE, not failed. After sanity-2-shared fails
# the NCCL steps are skipped (they would fail the same way), but the torch anchor still runs:
# it is what tells a ringlab defect from the platform. A failed step's last stderr lines go to
# the summary. The last line is `RESULT: PASS`, `RESULT: FAIL (...)` or
# `RESULT: INCONCLUSIVE (...)`, and the exit status matches (0, 1 or 3; 2: no binary).
# Knobs for testing the script itself: GPU_CHECK_STEP_CAP (seconds, caps every step),
# GPU_CHECK_HANG=NAME (that step runs `sleep` instead: it must time out, the rest go on).
# Files back: summary.txt (the numbers, PASS/FAIL per step, RESULT), logs.tar.gz (every output).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-${OUT:-gpu-check-out}}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d)
START=$(date +%s)
BUDGET="${GPU_CHECK_BUDGET:-420}"
CAP="${GPU_CHECK_STEP_CAP:-100000}"
HANG="${GPU_CHECK_HANG:-}"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
FAILED=()
INCONCLUSIVE=()
NCCL_OK=1
FINISHED=0
say() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $(( BUDGET - ( $(date +%s) - START ) )); }
pack() { tar -C "$WORK" -czf "$OUT/logs.tar.gz.part" . 2>/dev/null && mv -f "$OUT/logs.tar.gz.part" "$OUT/logs.tar.gz"; }

CHILD=""
finish() {
  [ "$FINISHED" = 1 ] && return
  FINISHED=1
  # A step still running (the script was stopped): stop it, keep what it wrote.
  if [ -n "$CHILD" ]; then
    kill -TERM "$CHILD" 2>/dev/null
    wait "$CHILD" 2>/dev/null
  fi
  pack
  local why="${1:-}"
  say "# done in $(( $(date +%s) - START )) s"
  if [ -n "$why" ]; then
    FAILED+=("$why")
  fi
  if [ ${#FAILED[@]} -ne 0 ]; then
    say "RESULT: FAIL (${FAILED[*]})"
    rm -rf "$WORK"
    exit 1
  fi
  if [ ${#INCONCLUSIVE[@]} -ne 0 ]; then
    say "RESULT: INCONCLUSIVE (${INCONCLUSIVE[*]})"
    rm -rf "$WORK"
    exit 3
  fi
  say "RESULT: PASS"
  rm -rf "$WORK"
  exit 0
}
trap 'finish "stopped by a signal"' TERM INT
trap 'finish' EXIT

BIN="${RINGLAB_BIN:-target/release/ringlab}"
if [ ! -x "$BIN" ]; then
  say "no ringlab binary at $BIN: build it (cargo build --release), strip it, set RINGLAB_BIN"
  trap - EXIT
  say "RESULT: FAIL (no binary)"
  exit 2
fi
BIN=$(readlink -f "$BIN")

# step NAME LIMIT CMD...: run CMD under min(LIMIT, the time left, the cap); record it.
step() {
  local name=$1 limit=$2
  shift 2
  local l
  l=$(left)
  [ "$limit" -gt "$CAP" ] && limit=$CAP
  if [ "$l" -lt 5 ]; then
    say "$(printf '%-28s SKIPPED   (the %ss budget is spent)' "$name" "$BUDGET")"
    INCONCLUSIVE+=("$name:no-time")
    return 125
  fi
  [ "$limit" -gt "$l" ] && limit=$l
  local t0 rc
  t0=$(date +%s)
  # In the background, so that a TERM to this script runs its trap at once (bash waits for a
  # foreground command before it handles a signal).
  if [ "$name" = "$HANG" ]; then
    timeout -k 5 "$limit" sleep 100000 >"$WORK/$name.out" 2>"$WORK/$name.err" &
  else
    timeout -k 5 "$limit" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  fi
  CHILD=$!
  wait "$CHILD"
  rc=$?
  CHILD=""
  local what="exit $rc"
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && what="TIMEOUT after ${limit}s"
  say "$(printf '%-28s %-22s %4ss  %s' "$name" "$what" "$(( $(date +%s) - t0 ))" "$*")"
  if [ "$rc" -ne 0 ]; then
    FAILED+=("$name")
    tail -n 5 "$WORK/$name.err" | sed 's/^/   ! /' | tee -a "$SUMMARY"
  fi
  pack
  return $rc
}

# nccl_step: a step that needs NCCL; skipped once sanity on two ranks has failed.
nccl_step() {
  if [ "$NCCL_OK" = 0 ]; then
    say "$(printf '%-28s SKIPPED   (sanity-2-shared failed)' "$1")"
    return 125
  fi
  step "$@"
}

say "# ringlab GPU check $(date -u +%FT%TZ) on $(hostname), budget ${BUDGET}s"
say "# binary: $BIN ($(stat -c %s "$BIN") bytes)"

# A Python venv with torch and the nvidia-nccl wheel: on PATH, not activated; ringlab and
# torch then load the same libnccl (RINGLAB_NCCL_LIB names the wheel's file).
PY=""
for v in /opt/torch/.venv "${VIRTUAL_ENV:-}"; do
  if [ -n "$v" ] && [ -x "$v/bin/python3" ]; then PY="$v/bin/python3"; export PATH="$v/bin:$PATH"; break; fi
done
PY="${PY:-$(command -v python3 || true)}"
if [ -n "$PY" ]; then
  WHEEL=$(ls -d "$(dirname "$PY")"/../lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2 2>/dev/null | head -n 1)
  if [ -n "$WHEEL" ]; then
    export RINGLAB_NCCL_LIB
    RINGLAB_NCCL_LIB=$(readlink -f "$WHEEL")
    say "# libnccl for ringlab and torch: $RINGLAB_NCCL_LIB"
  fi
fi

env_report() {
  echo "== kernel: $(uname -r)"
  for t in ip iptables; do echo "== $t: $(command -v "$t" || echo "not found")"; done
  echo "== nvidia-smi"; nvidia-smi 2>&1 | head -n 30
  echo "== compute mode, MPS"
  nvidia-smi --query-gpu=index,name,compute_mode,driver_version,memory.total --format=csv 2>&1
  pgrep -a nvidia-cuda-mps 2>&1 || echo "no MPS daemon"
  echo "== container"
  [ -f /.dockerenv ] && echo "docker (/.dockerenv)"
  grep -E 'docker|containerd|kubepods|lxc' /proc/1/cgroup 2>/dev/null | head -n 3
  echo "ns: $(readlink /proc/1/ns/pid) uid_map: $(tr -s ' ' </proc/self/uid_map)"
  echo "== pip"
  [ -n "$PY" ] && "$PY" -m pip list 2>/dev/null | grep -Ei '^(torch|nvidia-nccl|nvidia-cuda|triton) '
  echo "== system NCCL"
  ldconfig -p 2>/dev/null | grep -i nccl || echo "none in ldconfig"
  echo "== /dev/shm"; df -h /dev/shm 2>&1
}
export -f env_report
export PY
step env 30 bash -c env_report
grep -E "kernel:|== ip|== iptables|compute_mode|Default|Exclusive|Prohibited|MPS|docker|torch|nvidia-nccl|libnccl|none" "$WORK/env.out" | sed 's/^/   /' | tee -a "$SUMMARY"
HAVE_IP=1
command -v ip >/dev/null 2>&1 || HAVE_IP=0

step doctor 60 "$BIN" doctor
step doctor-json 60 "$BIN" doctor --json
grep -E "found:|version|GPU [0-9]|warning|!" "$WORK/doctor.out" | sed 's/^/   /' | tee -a "$SUMMARY"
NG=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "${NG:-0}" -ge 1 ] 2>/dev/null || NG=1

SHARE=(--nproc-per-node 2 --ranks-per-gpu 2)
if ! NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET step sanity-2-shared 120 \
    "$BIN" sanity --backend nccl "${SHARE[@]}" --timeout 90 --json; then
  NCCL_OK=0
fi
sed 's/^/   /' "$WORK/sanity-2-shared.out" | tee -a "$SUMMARY"
grep -E "Channel .* via |Using network|NET/|NCCL version" "$WORK/sanity-2-shared.err" 2>/dev/null | sort -u | head -n 12 | sed 's/^/   /' | tee -a "$SUMMARY"

# The torch anchor: the control that tells a ringlab defect from a platform or NCCL limit, so
# it runs whatever sanity said (M2). A torch venv that is there but does not import fails the
# check (L7); no torch at all is said, and the anchor steps do not run.
TORCH=0
if [ -n "$PY" ] && "$PY" -c 'import torch' 2>"$WORK/torch-import.err"; then
  TORCH=1
elif [ -d /opt/torch/.venv ] || [ -n "${VIRTUAL_ENV:-}" ]; then
  say "torch: the venv is there but 'import torch' fails:"
  tail -n 3 "$WORK/torch-import.err" | sed 's/^/   ! /' | tee -a "$SUMMARY"
  FAILED+=("torch-import")
else
  say "torch: no python3 with torch here; the anchor steps do not run"
fi
anchor() {
  step "$1" "$2" "$PY" -m torch.distributed.run --standalone --nproc-per-node 2 \
    scripts/anchor_allreduce.py --ranks-per-gpu 2 -b 8 -e "$3" -f 4 -n 20 -w 5
}
[ "$TORCH" = 1 ] && { anchor torch-anchor-short 120 1M; tail -n 4 "$WORK/torch-anchor-short.out" 2>/dev/null | sed 's/^/   /' | tee -a "$SUMMARY"; }

# H1: every call on a non-blocking communicator costs a thread launch and a poll (NCCL >= 2.23);
# ringlab times on a blocking one. As ringlab runs it, with NCCL_COMM_BLOCKING=1 (all blocking)
# and =0 (every communicator non-blocking): the first two should agree.
H1=(bench --backend nccl "${SHARE[@]}" -b 8 -e 1M -f 8 -n 200 -w 5 --timeout 90 --json)
nccl_step h1-default 120 "$BIN" "${H1[@]}"
NCCL_COMM_BLOCKING=1 nccl_step h1-blocking 120 "$BIN" "${H1[@]}"
NCCL_COMM_BLOCKING=0 nccl_step h1-nonblocking 120 "$BIN" "${H1[@]}"
if [ -n "$PY" ] && [ -s "$WORK/h1-default.out" ]; then
  "$PY" - "$WORK"/h1-default.out "$WORK"/h1-blocking.out "$WORK"/h1-nonblocking.out <<'PY' | tee -a "$SUMMARY"
import json, sys
def rows(path):
    out = {}
    try:
        for line in open(path):
            try:
                v = json.loads(line)
            except ValueError:
                continue
            if isinstance(v, dict) and "size" in v and not v.get("in_place"):
                out[v["size"]] = v["time_us"]
    except OSError:
        pass
    return out
d, b, n = (rows(p) for p in sys.argv[1:4])
print("# H1 A/B: all-reduce out of place, 2 ranks sharing one GPU, time per call (us)")
print(f"{'size':>10} {'ringlab':>9} {'BLOCKING=1':>10} {'BLOCKING=0':>10} {'ratio d/b':>9}")
for s in sorted(d):
    r = d[s] / b[s] if b.get(s) else float("nan")
    f = lambda x: f"{x:.2f}" if isinstance(x, (int, float)) else "-"
    print(f"{s:>10} {f(d[s]):>9} {f(b.get(s)):>10} {f(n.get(s)):>10} {r:>9.2f}")
PY
fi

# H2: in-place send/recv races on a GPU; nccl-tests does not check it and neither does
# ringlab: its #wrong must read null (N/A) every time, the out-of-place one 0.
for i in 1 2 3 4 5; do
  nccl_step "h2-sendrecv-$i" 60 "$BIN" bench --backend nccl "${SHARE[@]}" --coll send-recv \
    -b 1K -e 1M -f 4 -n 20 -w 2 --timeout 45 --json || true
  say "   in-place #wrong: $(grep '"in_place":true' "$WORK/h2-sendrecv-$i.out" 2>/dev/null | grep -o '"wrong":[a-z0-9]*' | cut -d: -f2 | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
done

# Three ranks: 1/3 is not exact in floating point (avg's tolerance), and ranks >= 2 meet real
# NCCL's in-place offsets.
THREE=(--nproc-per-node 3 --ranks-per-gpu 3)
nccl_step sanity-3 120 "$BIN" sanity --backend nccl "${THREE[@]}" --timeout 90
for coll in all-reduce reduce-scatter; do
  nccl_step "three-$coll-bf16-avg" 90 "$BIN" bench --backend nccl "${THREE[@]}" --coll "$coll" \
    -d bfloat16 -o avg -b 3K -e 3M -f 32 -n 5 -w 1 --timeout 60 --json
done

# A rank killed mid-sweep: the others must end (ERROR from NCCL's remote error, or HANG from
# the watchdog), not hang past the step. The summary says which, and how long it took.
killed_run() {
  "$BIN" bench --backend nccl --nproc-per-node 2 --ranks-per-gpu 2 -b 1M -e 512M -f 2 -n 50 \
    -w 2 --timeout 30 &
  local job=$! t0 victim
  for _ in $(seq 1 300); do
    victim=$(pgrep -P "$job" -f "__rank" | sort -n | tail -n 1)
    [ -n "$victim" ] && grep -q . /proc/"$victim"/status 2>/dev/null && break
    sleep 0.1
  done
  sleep 3
  echo "killing rank process $victim" >&2
  t0=$(date +%s)
  kill -9 "$victim" 2>/dev/null
  wait "$job"
  local rc=$?
  echo "job exit $rc, $(( $(date +%s) - t0 )) s after the kill" >&2
  [ "$rc" -ne 0 ]
}
export -f killed_run
export BIN
nccl_step rank-killed 90 bash -c killed_run
grep -E "job exit|job failed|HANG|ERROR" "$WORK/rank-killed.err" 2>/dev/null | tail -n 3 | sed 's/^/   /' | tee -a "$SUMMARY"

# -a 0: rank 0's time, as the torch anchor reports it. -f 4 from 8 B ends at 128 MiB.
nccl_step bench-sweep 240 "$BIN" bench --backend nccl "${SHARE[@]}" -b 8 -e 256M -f 4 -n 20 -w 5 -a 0 --timeout 120 --json
nccl_step bench-table 120 "$BIN" bench --backend nccl "${SHARE[@]}" -b 1M -e 64M -f 8 -n 10 -w 2 --timeout 90
sed 's/^/   /' "$WORK/bench-table.out" 2>/dev/null | tee -a "$SUMMARY"

# Smoke tests: they prove init, launch and teardown, not communication (a 1-rank in-place
# all-reduce launches nothing; single-process with one GPU is one rank).
nccl_step smoke-sanity-1 120 "$BIN" sanity --backend nccl --nproc-per-node 1 --timeout 90
SP=single-process
[ "$NG" -lt 2 ] && SP=smoke-single-process
nccl_step "$SP" 120 "$BIN" bench --backend nccl --single-process --nproc-per-node "$NG" -b 1M -e 16M -f 4 -n 10 --timeout 90
tail -n 6 "$WORK/$SP.out" 2>/dev/null | sed 's/^/   /' | tee -a "$SUMMARY"

if [ "$HAVE_IP" = 1 ]; then
  nccl_step hang-nccl 120 "$BIN" lab run docker0 --backend nccl --json
  nccl_step hang-nccl-fix 120 "$BIN" lab run docker0 --backend nccl --fix --json
  grep -o '"culprit":"[^"]*"\|"outcome":"[^"]*"' "$WORK"/hang-nccl*.out 2>/dev/null | sed 's/^/   /' | tee -a "$SUMMARY"
else
  say "$(printf '%-28s SKIPPED   (no `ip` here: the hang lab stages its nodes with it)' hang-nccl)"
fi

if [ "$TORCH" = 1 ]; then
  anchor torch-anchor 240 256M
  if [ -s "$WORK/bench-sweep.out" ] && [ -s "$WORK/torch-anchor.out" ]; then
    "$PY" - "$WORK/bench-sweep.out" "$WORK/torch-anchor.out" <<'PY' | tee -a "$SUMMARY"
import json, sys
def rows(path, key):
    out = {}
    for line in open(path):
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if isinstance(v, dict) and "size" in v and key(v):
            out[v["size"]] = v
    return out
# Like for like: torch's all_reduce is in place and times rank 0; the sweep ran with -a 0.
ring = rows(sys.argv[1], lambda v: v.get("in_place") is True)
torch = rows(sys.argv[2], lambda v: True)
print("# all-reduce f32 sum, 2 ranks sharing one GPU, in place, rank 0's time, busbw GB/s")
print(f"{'size':>12} {'ringlab':>9} {'torch':>9} {'ratio':>7} {'#wrong':>6} {'torch ok':>8}")
ratios = []
for s in sorted(set(ring) & set(torch)):
    r, t = ring[s]["busbw_gbps"], torch[s]["busbw_gbps"]
    ratio = r / t if t else 0
    if s >= 1 << 20:
        ratios.append(ratio)
    print(f"{s:>12} {r:9.3f} {t:9.3f} {ratio:7.3f} {str(ring[s]['wrong']):>6} {str(torch[s]['correct']):>8}")
if ratios:
    ratios.sort()
    print(f"# ratio from 1 MiB up: median {ratios[len(ratios) // 2]:.3f}, min {ratios[0]:.3f}")
if torch:
    print("# torch's NCCL:", next(iter(torch.values())).get("nccl"), "mapped:", next(iter(torch.values())).get("libnccl"))
PY
  fi
fi

# The matrix, thinned and last: every collective x float/bfloat16 x sum, bfloat16 avg where
# the collective reduces; two sizes; checked (unchecked rows, null, are not counted).
wrong_total=0
COLLS="all-reduce reduce-scatter all-gather broadcast reduce all-to-all send-recv"
[ "$NCCL_OK" = 0 ] && { say "$(printf '%-28s SKIPPED   (sanity-2-shared failed)' "m-<collective>-<type>-<op>")"; COLLS=""; }
for coll in $COLLS; do
  combos="float:sum bfloat16:sum"
  case $coll in all-reduce|reduce-scatter|reduce) combos="$combos bfloat16:avg" ;; esac
  for c in $combos; do
    t=${c%%:*} o=${c##*:}
    n="m-$coll-$t-$o"
    nccl_step "$n" 60 "$BIN" bench --backend nccl "${SHARE[@]}" --coll "$coll" -d "$t" -o "$o" \
      -b 1K -e 256K -f 256 -n 3 -w 1 --timeout 45 --json || true
    w=$(grep -o '"wrong_total":[a-z0-9]*' "$WORK/$n.out" 2>/dev/null | cut -d: -f2)
    say "   #wrong ${w:-?}"
    case "$w" in
      ''|null) [ -f "$WORK/$n.out" ] && INCONCLUSIVE+=("$n:no-rows") ;;
      *) wrong_total=$(( wrong_total + w )) ;;
    esac
  done
done
say "# collectives x types x ops: #wrong total $wrong_total"
[ "$wrong_total" -ne 0 ] && FAILED+=("wrong:$wrong_total")

finish
