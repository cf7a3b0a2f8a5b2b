#!/usr/bin/env bash
# Self-test for one-host.sh: install, up/verify/down twice on one DIR, then on a
# second DIR, including `down` while a job is still running. Leaves nothing running.
#   scripts/slurm/test-one-host.sh [WORKDIR]     (default: a fresh mktemp -d)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ONE="$HERE/one-host.sh"
W=${1:-$(mktemp -d /tmp/one-host-test.XXXXXX)}
mkdir -p "$W"
D1="$W/a" D2="$W/b"
say() { printf '\n=== %s\n' "$*" >&2; }
cleanup() { "$ONE" down "$D1" 2>/dev/null || true; "$ONE" down "$D2" 2>/dev/null || true; }
trap cleanup EXIT

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2f", b-a}'; }

no_daemons_left() {
    local left
    # zombies (state Z) are not running; ignore them
    left=$(ps -eo pid=,stat=,comm= | awk '$2 !~ /^Z/ && $3 ~ /^(munged|slurmctld|slurmd|slurmstepd)$/')
    if [ -n "$left" ]; then echo "FAIL: still running:"; echo "$left"; return 1; fi
}

verify() { # dir
    local d=$1 out n
    export SLURM_CONF="$d/slurm.conf"
    out=$(srun -N1 -n2 env)
    n=$(grep -c '^SLURM_STEP_ID=' <<<"$out")
    [ "$n" = 2 ] || { echo "FAIL: srun -n2 printed $n SLURM_STEP_ID lines"; return 1; }
    grep -q '^SLURM_PROCID=1$' <<<"$out" || { echo "FAIL: no SLURM_PROCID=1"; return 1; }
    cat >"$d/job.sh" <<'EOF'
#!/bin/bash
#SBATCH -n 2
echo "batch STEP_ID=${SLURM_STEP_ID-unset} PROCID=${SLURM_PROCID-unset}"
srun -n2 env | grep -E '^SLURM_(PROCID|STEP_ID)=' | sort
EOF
    sbatch --wait -o "$d/job.out" "$d/job.sh" >/dev/null
    grep -q '^batch STEP_ID=unset PROCID=0$' "$d/job.out" || { echo "FAIL: batch env"; cat "$d/job.out"; return 1; }
    [ "$(grep -c '^SLURM_STEP_ID=0$' "$d/job.out")" = 2 ] || { echo "FAIL: sbatch srun"; cat "$d/job.out"; return 1; }
    echo "verify ok ($d)"
}

say install
t=$(now); "$ONE" install; echo "install: $(elapsed "$t") s"

n=0
for d in "$D1" "$D1" "$D2"; do
    n=$((n + 1))
    # second round: also wait for the first scheduling pass (faster first sbatch --wait)
    ws=0; [ $n = 2 ] && ws=1
    say "up $d (ONEHOST_WAIT_SCHED=$ws)"
    t=$(now); eval "$(ONEHOST_WAIT_SCHED=$ws "$ONE" up "$d")"; echo "up: $(elapsed "$t") s"
    [ "$SLURM_CONF" = "$d/slurm.conf" ] || { echo "FAIL: export line"; exit 1; }
    t=$(now); verify "$d"; echo "verify: $(elapsed "$t") s"
    say "up again while up (idempotent) $d"
    eval "$("$ONE" up "$d")"
    if [ "$d" = "$D2" ]; then
        say "down with a running job"
        sbatch -n2 -o "$d/sleep.out" --wrap 'srun -n2 sleep 301' >/dev/null
        for _ in $(seq 100); do [ "$(ps -C sleep -o args= | grep -c ' 301$')" = 2 ] && break; sleep 0.2; done
        squeue
        [ "$(ps -C sleep -o args= | grep -c ' 301$')" = 2 ] || { echo "FAIL: job did not start"; exit 1; }
    fi
    say "down $d"
    t=$(now); "$ONE" down "$d"; echo "down: $(elapsed "$t") s"
    no_daemons_left
    if pgrep -f 'sleep 301' >/dev/null; then echo "FAIL: job processes survived down"; pgrep -a -f 'sleep 301'; exit 1; fi
done

say "down twice is harmless"
"$ONE" down "$D2"
no_daemons_left
echo "ALL OK ($W)"
