#!/usr/bin/env bash
# One-host Slurm cluster for integration tests and CI (Debian/Ubuntu, run as root).
#
#   scripts/slurm/one-host.sh install        # apt-get slurm-wlm + munge if missing (idempotent)
#   eval "$(scripts/slurm/one-host.sh up DIR)"   # start munged+slurmctld+slurmd; prints export SLURM_CONF=...
#   scripts/slurm/one-host.sh status DIR     # sinfo/squeue for that cluster
#   scripts/slurm/one-host.sh down DIR       # stop everything started for DIR
#
# Everything (slurm.conf, munge key/socket, state, spool, logs, pid files) lives
# inside DIR; nothing under /etc is written and no system munged is used or
# touched: a private munged is started per DIR (slurm finds it via
# AuthInfo=socket=...), and `down` stops it again.
#
# Knobs (environment):
#   ONEHOST_TIMEOUT        seconds `up` waits for the node to be idle   [30]
#   ONEHOST_CTLD_PORT      SlurmctldPort                               [6817]
#   ONEHOST_SLURMD_PORT    SlurmdPort                                  [6818]
#   ONEHOST_CPUS           CPUs of the node                            [$(nproc)]
#   ONEHOST_WAIT_SCHED=1   also wait for slurmctld's first scheduling pass (~3 s after
#                          start). Batch jobs submitted earlier wait for it anyway, and
#                          `sbatch --wait` polls at 2 s then backs off, so the first
#                          `sbatch --wait` returns after ~10 s without this, ~2 s with it.
#
# Only stdout output of `up` is the export line; all chatter goes to stderr.
set -euo pipefail

PROG=${0##*/}
log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }

usage() {
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

need_root() {
    [ "$(id -u)" = 0 ] || die "must run as root (slurmd and the private munged run as root)"
}

# ---------------------------------------------------------------- install
BINS=(slurmctld slurmd slurmstepd srun sbatch sinfo squeue scancel scontrol munged)

missing_bins() {
    local b out=()
    for b in "${BINS[@]}"; do
        command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || out+=("$b")
    done
    echo "${out[*]:-}"
}

cmd_install() {
    local miss
    miss=$(missing_bins)
    if [ -z "$miss" ]; then
        log "slurm and munge already installed ($(slurmd -V 2>/dev/null || echo '?'))"
        return 0
    fi
    need_root
    log "missing: $miss; installing slurm-wlm munge with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    local pkgs=(slurm-wlm munge)
    local aopts=(-y -qq --no-install-recommends -o Dpkg::Use-Pty=0)
    # Try without refreshing the lists first (fast when they are current);
    # update and retry when that fails (clean images ship without lists).
    if ! apt-get install "${aopts[@]}" "${pkgs[@]}" >/tmp/one-host-apt.log 2>&1; then
        apt-get update -qq >>/tmp/one-host-apt.log 2>&1 || { tail -20 /tmp/one-host-apt.log >&2; die "apt-get update failed"; }
        apt-get install "${aopts[@]}" "${pkgs[@]}" >>/tmp/one-host-apt.log 2>&1 \
            || { tail -20 /tmp/one-host-apt.log >&2; die "apt-get install ${pkgs[*]} failed (log: /tmp/one-host-apt.log)"; }
    fi
    miss=$(missing_bins)
    [ -z "$miss" ] || die "still missing after install: $miss"
    log "installed $(slurmd -V)"
}

# ---------------------------------------------------------------- helpers
abs_dir() {
    [ -n "${1:-}" ] || usage
    mkdir -p "$1"
    (cd "$1" && pwd -P)
}

# pid from a pid file if that process is alive and its command name matches.
live_pid() { # file comm
    local f=$1 comm=$2 pid c
    [ -s "$f" ] || return 1
    pid=$(head -n1 "$f" | tr -dc 0-9)
    [ -n "$pid" ] || return 1
    c=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [ "$c" = "$comm" ] || return 1
    echo "$pid"
}

# kill a pid-file daemon: TERM, wait up to $3 s, then KILL.
stop_pidfile() { # file comm wait_s
    local f=$1 comm=$2 wait_s=${3:-10} pid i
    if pid=$(live_pid "$f" "$comm"); then
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < wait_s * 10; i++)); do
            [ -d "/proc/$pid" ] || break
            # a zombie counts as gone
            [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] && break
            sleep 0.1
        done
        if [ -d "/proc/$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]; then
            log "$comm ($pid) ignored SIGTERM; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        log "stopped $comm ($pid)"
    fi
    rm -f "$f"
}

# processes (other than us) holding a file descriptor or cwd inside DIR, by comm
procs_using_dir() { # dir comm-regex
    local dir=$1 re=$2 p pid comm
    for p in /proc/[0-9]*; do
        pid=${p#/proc/}
        [ "$pid" = $$ ] && continue
        comm=$(cat "$p/comm" 2>/dev/null) || continue
        [[ $comm =~ $re ]] || continue
        if ls -l "$p/fd/" "$p/cwd" 2>/dev/null | grep -qF -- "$dir/"; then
            echo "$pid"
        fi
    done
}

show_logs() { # dir
    local d=$1 f
    for f in "$d/log/munged.log" "$d/log/slurmctld.log" "$d/log/slurmd.log"; do
        if [ -s "$f" ]; then
            printf '\n----- tail of %s -----\n' "$f" >&2
            tail -n 25 "$f" >&2
        fi
    done
    printf '\n' >&2
}

write_conf() { # dir host cpus
    local d=$1 host=$2 cpus=$3
    local ctld_port=${ONEHOST_CTLD_PORT:-6817} slurmd_port=${ONEHOST_SLURMD_PORT:-6818}
    cat >"$d/slurm.conf" <<EOF
# Generated by scripts/slurm/one-host.sh -- one-host test cluster. Do not edit.
ClusterName=onehost
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root

AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/run/munge.socket

StateSaveLocation=$d/state/ctld
SlurmdSpoolDir=$d/state/slurmd
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$d/plugstack.conf
MailProg=/bin/true

# no cgroups anywhere: works in containers / microVMs without systemd
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none

SchedulerType=sched/backfill
# schedule batch jobs right at submit (tests submit one job at a time)
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# trust the CPU count below even if hardware detection disagrees
SlurmdParameters=config_overrides
ReturnToService=2
InactiveLimit=0
KillWait=5
MinJobAge=30
SlurmctldTimeout=30
SlurmdTimeout=60

NodeName=$host NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    : >"$d/plugstack.conf"
}

start_munged() { # dir
    local d=$1 pid
    if pid=$(live_pid "$d/run/munged.pid" munged); then
        log "munged already running for $d (pid $pid)"
        return 0
    fi
    if [ ! -s "$d/munge/etc/munge.key" ]; then
        if command -v mungekey >/dev/null 2>&1; then
            mungekey --create --keyfile="$d/munge/etc/munge.key"
        else
            dd if=/dev/urandom of="$d/munge/etc/munge.key" bs=1 count=1024 status=none
        fi
        chmod 600 "$d/munge/etc/munge.key"
        log "created munge key $d/munge/etc/munge.key"
    fi
    rm -f "$d/munge/run/munge.socket" "$d/munge/run/munge.socket.lock"
    # --force: DIR may be 0700 (mktemp -d) or under /tmp; only root uses the socket.
    munged --force \
        --key-file="$d/munge/etc/munge.key" \
        --socket="$d/munge/run/munge.socket" \
        --pid-file="$d/run/munged.pid" \
        --log-file="$d/log/munged.log" \
        --seed-file="$d/munge/lib/munged.seed" \
        2>>"$d/log/munged.log" || { show_logs "$d"; return 1; }
    local i
    for ((i = 0; i < 50; i++)); do
        [ -S "$d/munge/run/munge.socket" ] && live_pid "$d/run/munged.pid" munged >/dev/null && break
        sleep 0.1
    done
    if command -v munge >/dev/null 2>&1; then
        munge -S "$d/munge/run/munge.socket" -n </dev/null | unmunge -S "$d/munge/run/munge.socket" >/dev/null 2>&1 \
            || { log "munge self-test failed"; show_logs "$d"; return 1; }
    fi
    log "started munged (pid $(live_pid "$d/run/munged.pid" munged))"
}

port_busy() { # port -> true when something listens on 127.0.0.1:port
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

node_state() { # host
    sinfo -h -N -n "$1" -o '%t' 2>/dev/null | head -n1 || true
}

# ---------------------------------------------------------------- up
cmd_up() {
    need_root
    local d host cpus timeout pid state i
    d=$(abs_dir "${1:-}")
    [ -z "$(missing_bins)" ] || die "slurm/munge missing ($(missing_bins)); run: $0 install"
    host=$(hostname -s)
    cpus=${ONEHOST_CPUS:-$(nproc)}
    timeout=${ONEHOST_TIMEOUT:-30}
    export SLURM_CONF="$d/slurm.conf"

    mkdir -p "$d"/{run,log,state/ctld,state/slurmd,munge/etc,munge/run,munge/lib}
    chmod 700 "$d/munge/etc"
    chmod 755 "$d/munge/run"

    local ctld_up=0 slurmd_up=0
    live_pid "$d/run/slurmctld.pid" slurmctld >/dev/null && ctld_up=1
    live_pid "$d/run/slurmd.pid" slurmd >/dev/null && slurmd_up=1
    if [ $ctld_up = 0 ] || [ $slurmd_up = 0 ]; then
        write_conf "$d" "$host" "$cpus"
    else
        log "slurmctld and slurmd already running for $d"
    fi

    fail() {
        log "error: $*"
        show_logs "$d"
        log "stopping what was started for $d"
        cmd_down "$d" >/dev/null 2>&1 || true
        exit 1
    }

    # ports of the daemons still to start must be free
    local port ports=()
    [ $ctld_up = 1 ] || ports+=("${ONEHOST_CTLD_PORT:-6817}")
    [ $slurmd_up = 1 ] || ports+=("${ONEHOST_SLURMD_PORT:-6818}")
    for port in "${ports[@]}"; do
        if port_busy "$port"; then
            die "TCP port $port on 127.0.0.1 is already in use (another cluster still up? run '$PROG down' on its DIR, or set ONEHOST_CTLD_PORT/ONEHOST_SLURMD_PORT)"
        fi
    done

    start_munged "$d" || fail "munged did not start"

    local ctld_log_lines=0
    [ -f "$d/log/slurmctld.log" ] && ctld_log_lines=$(wc -l <"$d/log/slurmctld.log")
    if [ $ctld_up = 0 ]; then
        # -c: start from a clean state (no jobs recovered from an earlier `up` of the same DIR)
        slurmctld -c -f "$d/slurm.conf" >>"$d/log/slurmctld.log" 2>&1 || fail "slurmctld exited with $?"
    fi
    if [ $slurmd_up = 0 ]; then
        slurmd -f "$d/slurm.conf" >>"$d/log/slurmd.log" 2>&1 || fail "slurmd exited with $?"
    fi

    state=
    for ((i = 0; i < timeout * 5; i++)); do
        state=$(node_state "$host")
        case $state in
        idle) break ;;
        drain* | down* | fail*)
            # tolerate transient states for 5 s, then report the reason
            [ $i -lt 25 ] || fail "node $host is '$state': $(scontrol show node "$host" 2>/dev/null | grep -i reason || true)" ;;
        esac
        # let daemons write their pid files before checking for early death
        if [ $i -ge 10 ]; then
            live_pid "$d/run/slurmctld.pid" slurmctld >/dev/null || fail "slurmctld died"
            live_pid "$d/run/slurmd.pid" slurmd >/dev/null || fail "slurmd died"
        fi
        sleep 0.2
    done
    [ "$state" = idle ] || fail "node $host not idle after ${timeout}s (state: '${state:-no answer from slurmctld}')"
    if [ "${ONEHOST_WAIT_SCHED:-0}" = 1 ] && [ $ctld_up = 0 ]; then
        # slurmctld 22.05 runs its first scheduling pass ~3 s after start and
        # logs "SchedulerParameters=" then; batch jobs submitted before wait for it.
        for ((i = 0; i < timeout * 5; i++)); do
            tail -n +$((ctld_log_lines + 1)) "$d/log/slurmctld.log" | grep -q 'SchedulerParameters=' && break
            sleep 0.2
        done
    fi
    log "cluster up: node $host idle, $cpus CPUs, slurmctld $(live_pid "$d/run/slurmctld.pid" slurmctld), slurmd $(live_pid "$d/run/slurmd.pid" slurmd)"
    printf 'export SLURM_CONF=%q\n' "$d/slurm.conf"
}

# ---------------------------------------------------------------- down
cmd_down() {
    need_root
    local d pids i
    [ -n "${1:-}" ] || usage
    [ -d "$1" ] || { log "$1: no such directory; nothing to stop"; return 0; }
    d=$(cd "$1" && pwd -P)
    export SLURM_CONF="$d/slurm.conf"

    # cancel jobs so their steps end cleanly, if the controller still answers
    if [ -f "$d/slurm.conf" ] && live_pid "$d/run/slurmctld.pid" slurmctld >/dev/null; then
        local jobs
        jobs=$(squeue -h -o '%i' 2>/dev/null || true)
        if [ -n "$jobs" ]; then
            log "cancelling jobs: $(echo $jobs)"
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null || true
            for ((i = 0; i < 50; i++)); do
                [ -z "$(squeue -h -t running,completing -o '%i' 2>/dev/null || true)" ] && break
                sleep 0.2
            done
        fi
    fi

    stop_pidfile "$d/run/slurmd.pid" slurmd 10
    stop_pidfile "$d/run/slurmctld.pid" slurmctld 10

    # leftover step daemons (they hold DIR/log/slurmd.log or the spool dir open)
    pids=$(procs_using_dir "$d" '^(slurmstepd|slurmd|slurmctld)$')
    if [ -n "$pids" ]; then
        log "killing leftover slurm processes: $(echo $pids)"
        # shellcheck disable=SC2086
        kill -TERM $pids 2>/dev/null || true
        sleep 1
        # shellcheck disable=SC2086
        kill -KILL $pids 2>/dev/null || true
    fi

    # the munged for DIR was always started by this script
    stop_pidfile "$d/run/munged.pid" munged 5
    rm -f "$d/munge/run/munge.socket" "$d/munge/run/munge.socket.lock"
    log "down: $d"
}

cmd_status() {
    local d
    [ -n "${1:-}" ] || usage
    d=$(cd "$1" && pwd -P)
    export SLURM_CONF="$d/slurm.conf"
    local n
    for n in munged slurmctld slurmd; do
        if pid=$(live_pid "$d/run/$n.pid" "$n"); then echo "$n: running ($pid)"; else echo "$n: not running"; fi
    done
    sinfo 2>&1 || true
    squeue 2>&1 || true
}

case ${1:-} in
install) cmd_install ;;
up) shift; cmd_up "$@" ;;
down) shift; cmd_down "$@" ;;
status) shift; cmd_status "$@" ;;
logs) shift; show_logs "$(cd "${1:?DIR}" && pwd -P)" ;;
*) usage ;;
esac
