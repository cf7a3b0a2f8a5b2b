#!/usr/bin/env bash
# Drive the real ringlab binary through its whole NCCL path on the CPU stand-ins for libcuda
# and libnccl (tests/standin/cuda.c, nccl.c). See tests/standin/README.md.
#
#   tests/standin/drive.sh [PHASE...]      PHASE: build selftest sanity bench matrix faults
#                                                 lab symbols all (default: all)
#
# Environment:
#   RINGLAB=path         the binary to drive (default: target/release/ringlab, else
#                        target/debug/ringlab, waited for up to STANDIN_WAIT_S seconds; a copy
#                        is taken so that a rebuild during the run changes nothing)
#   STANDIN_OUT=dir      where the libraries, logs and results go (default: a fresh
#                        /tmp/standin-run.XXXXXX)
#   MATRIX_CONFIGS="two three rpg2-2 rpg2-3 single2 single3"   the matrix's rank layouts
#   MATRIX_COLLS, MATRIX_DTYPES, MATRIX_OPS                     narrow the matrix
#   BENCH_ARGS           default: -b 1K -e 1M -f 4 -n 2 -w 1
#
# Exit status: 0 when every check met its expectation (known ringlab defects count as XFAIL),
# 1 otherwise. Results: $OUT/results.tsv, one line per check.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${STANDIN_OUT:-$(mktemp -d /tmp/standin-run.XXXXXX)}
mkdir -p "$OUT" && chmod 700 "$OUT"
LIB=$OUT/lib
LOGS=$OUT/logs
mkdir -p "$LIB" "$LOGS"
RESULTS=$OUT/results.tsv
: >"$RESULTS"
BENCH_ARGS=${BENCH_ARGS:--b 1K -e 1M -f 4 -n 2 -w 1}
RUN_TIMEOUT=${STANDIN_RUN_TIMEOUT:-300}
FAILS=0
PASSES=0
XFAILS=0

# Nothing from the caller's environment may inject faults into the clean runs.
for v in $(env | sed -n 's/^\(STANDIN_[A-Z_]*\)=.*/\1/p'); do
    case $v in STANDIN_OUT | STANDIN_WAIT_S | STANDIN_RUN_TIMEOUT) ;; *) unset "$v" ;; esac
done
unset NCCL_DEBUG NCCL_DEBUG_FILE NCCL_DEBUG_SUBSYS NCCL_ALGO NCCL_HOSTID

say() { printf '%s\n' "$*"; }

# record SECTION NAME VERDICT DETAIL
record() {
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$RESULTS"
    case $3 in
    PASS) PASSES=$((PASSES + 1)) ;;
    XFAIL) XFAILS=$((XFAILS + 1)) ;;
    *) FAILS=$((FAILS + 1)) ;;
    esac
    printf '  %-5s %-58s %s\n' "$3" "$2" "$4"
}

# ---------------------------------------------------------------- build

build() {
    say "== build: $LIB"
    local flags="-shared -fPIC -O1 -Wall -Werror -pthread -fvisibility=hidden"
    cc $flags -Wl,-soname,libcuda.so.1 -o "$LIB/libcuda.so.1" "$HERE/cuda.c" || exit 1
    cc $flags -Wl,-soname,libnccl.so.2 -o "$LIB/libnccl.so.2" "$HERE/nccl.c" -ldl -lrt || exit 1
    export LD_LIBRARY_PATH=$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export RINGLAB_NCCL_LIB=$LIB/libnccl.so.2
}

find_ringlab() {
    local want=${RINGLAB:-} waited=0 limit=${STANDIN_WAIT_S:-1800}
    while [ -z "$want" ]; do
        for b in "$ROOT/target/release/ringlab" "$ROOT/target/debug/ringlab"; do
            if [ -x "$b" ]; then
                want=$b
                break
            fi
        done
        [ -n "$want" ] && break
        if [ "$waited" -ge "$limit" ]; then
            say "no ringlab binary in $ROOT/target after ${limit}s"
            exit 1
        fi
        say "waiting for a ringlab binary (a build is running?)"
        sleep 10
        waited=$((waited + 10))
    done
    # A copy, taken when the file has stopped changing and runs.
    mkdir -p "$OUT/bin"
    local tries=0
    while :; do
        cp "$want" "$OUT/bin/ringlab" 2>/dev/null && sleep 2 && cmp -s "$want" "$OUT/bin/ringlab" &&
            "$OUT/bin/ringlab" --version >/dev/null 2>&1 && break
        tries=$((tries + 1))
        [ "$tries" -ge 60 ] && {
            say "could not take a working copy of $want"
            exit 1
        }
        sleep 10
    done
    RL=$OUT/bin/ringlab
    say "== ringlab: $want ($(stat -c '%y' "$want" | cut -d. -f1)), copied to $RL"
}

# ---------------------------------------------------------------- one bench run

# bench_run NAME "VAR=v VAR=v" ARGS...  -> RC ROWS WRONG OUTCOME REASON PANIC RANKS
bench_run() {
    local name=$1 envs=$2
    shift 2
    local log=$LOGS/$name
    # shellcheck disable=SC2086
    env $envs timeout "$RUN_TIMEOUT" "$RL" bench --backend nccl "$@" --json >"$log.out" 2>"$log.err"
    RC=$?
    ROWS=$(grep -c '"wrong":' "$log.out")
    WRONG=$(grep -o '"wrong":[0-9]*' "$log.out" | cut -d: -f2 | awk '{s += $1} END {print s + 0}')
    OUTCOME=$(grep -o '"outcome":"[a-z]*"' "$log.out" | head -1 | cut -d'"' -f4)
    REASON=$(sed -n 's/.*"reason":"\(.*\)","size".*/\1/p; s/.*"reason":"\(.*\)"}$/\1/p' "$log.out" | head -1)
    RANKS=$(grep -o '"ranks":[0-9]*' "$log.out" | head -1 | cut -d: -f2)
    PANIC=$(grep -c 'panicked' "$log.err")
    [ "$RC" = 124 ] && OUTCOME=timeout
}

# What a clean run must give: rows for every size and placement, none wrong, the world asked.
check_clean() { # SECTION NAME WORLD
    local sec=$1 name=$2 world=$3 want_rows
    want_rows=$(($(size_rows) * 2))
    if [ "$PANIC" != 0 ]; then
        record "$sec" "$name" FAIL "ringlab panicked (see $LOGS/$name.err)"
    elif [ -n "$OUTCOME" ]; then
        if [ "${name#*all-to-all}" != "$name" ] && [ "${REASON#*no in-place all-to-all}" != "$REASON" ]; then
            record "$sec" "$name" XFAIL "ringlab defect: bench asks NCCL for an in-place all-to-all it refuses ($REASON)"
        else
            record "$sec" "$name" FAIL "$OUTCOME: $REASON"
        fi
    elif [ "$RC" != 0 ] || [ "$ROWS" != "$want_rows" ]; then
        record "$sec" "$name" FAIL "rc $RC, $ROWS rows of $want_rows (see $LOGS/$name.err)"
    elif [ "$WRONG" != 0 ]; then
        record "$sec" "$name" FAIL "#wrong $WRONG"
    elif [ "$RANKS" != "$world" ]; then
        record "$sec" "$name" FAIL "ran $RANKS ranks, asked for $world"
    else
        record "$sec" "$name" PASS "$ROWS rows, #wrong 0, $RANKS ranks"
    fi
}

# Rows per placement for BENCH_ARGS (-b, -e, -f with K/M suffixes).
size_rows() {
    local b e f n=0
    b=$(printf '%s\n' $BENCH_ARGS | awk '/^-b$/{getline; print}')
    e=$(printf '%s\n' $BENCH_ARGS | awk '/^-e$/{getline; print}')
    f=$(printf '%s\n' $BENCH_ARGS | awk '/^-f$/{getline; print}')
    tobytes() { case $1 in *K) echo $((${1%K} * 1024)) ;; *M) echo $((${1%M} * 1048576)) ;; *G) echo $((${1%G} * 1073741824)) ;; *) echo "$1" ;; esac; }
    b=$(tobytes "${b:-32M}")
    e=$(tobytes "${e:-32M}")
    f=${f:-2}
    while [ "$b" -le "$e" ]; do
        n=$((n + 1))
        b=$((b * f))
    done
    echo $n
}

# ---------------------------------------------------------------- phases

phase_selftest() {
    say "== selftest: the stand-ins on their own (tests/standin/selftest.c)"
    if [ ! -f "$HERE/selftest.c" ]; then
        record selftest selftest FAIL "selftest.c missing"
        return
    fi
    cc -O1 -Wall -Werror -pthread -o "$OUT/bin/selftest" "$HERE/selftest.c" -ldl -lrt -lm || {
        record selftest build FAIL "selftest.c does not build"
        return
    }
    (cd "$OUT" && timeout 300 "$OUT/bin/selftest" "$LIB" >"$LOGS/selftest.out" 2>&1)
    local rc=$?
    while IFS=$'\t' read -r verdict name detail; do
        record selftest "$name" "$verdict" "$detail"
    done < <(grep -E '^(PASS|FAIL)'$'\t' "$LOGS/selftest.out")
    [ "$rc" = 0 ] || record selftest selftest-exit FAIL "exit status $rc (see $LOGS/selftest.out)"
}

phase_sanity() {
    say "== sanity"
    local cfg
    for cfg in "2:STANDIN_GPUS=2:" "3:STANDIN_GPUS=3:" "2:STANDIN_GPUS=1:--ranks-per-gpu 2 --nproc-per-node 2"; do
        local world rest envs args name
        world=${cfg%%:*}
        rest=${cfg#*:}
        envs=${rest%%:*}
        args=${rest#*:}
        name="sanity-${world}ranks${args:+-rpg2}"
        # shellcheck disable=SC2086
        env $envs timeout "$RUN_TIMEOUT" "$RL" sanity --backend nccl $args --json >"$LOGS/$name.out" 2>"$LOGS/$name.err"
        local rc=$?
        if grep -q '"pass":true' "$LOGS/$name.out" && grep -q "\"world_size\":$world" "$LOGS/$name.out"; then
            record sanity "$name" PASS "all_reduce(ones) = $world on every rank"
        else
            record sanity "$name" FAIL "rc $rc: $(head -c 300 "$LOGS/$name.out") $(tail -2 "$LOGS/$name.err")"
        fi
    done
    # A stand-in that writes nothing must fail the sanity check.
    env STANDIN_NCCL_LAZY=1 timeout "$RUN_TIMEOUT" "$RL" sanity --backend nccl --json >"$LOGS/sanity-lazy.out" 2>"$LOGS/sanity-lazy.err"
    if grep -q '"pass":false' "$LOGS/sanity-lazy.out"; then
        record sanity sanity-lazy PASS "STANDIN_NCCL_LAZY=1 fails the check"
    else
        record sanity sanity-lazy FAIL "a lazy NCCL passed: $(head -c 300 "$LOGS/sanity-lazy.out")"
    fi
}

phase_bench() {
    say "== bench: every collective at 2 ranks, float sum"
    local coll
    for coll in all-reduce reduce-scatter all-gather broadcast reduce sendrecv all-to-all; do
        # shellcheck disable=SC2086
        bench_run "bench-$coll" "STANDIN_GPUS=2" $BENCH_ARGS --coll "$coll"
        check_clean bench "bench-$coll" 2
    done
}

config_env() {
    case $1 in
    two) echo "STANDIN_GPUS=2" ;;
    three) echo "STANDIN_GPUS=3" ;;
    rpg2-2) echo "STANDIN_GPUS=1" ;;
    rpg2-3) echo "STANDIN_GPUS=2" ;;
    single2) echo "STANDIN_GPUS=2" ;;
    single3) echo "STANDIN_GPUS=3" ;;
    esac
}
config_args() {
    case $1 in
    two) echo "--nproc-per-node 2" ;;
    three) echo "--nproc-per-node 3" ;;
    rpg2-2) echo "--nproc-per-node 2 --ranks-per-gpu 2" ;;
    rpg2-3) echo "--nproc-per-node 3 --ranks-per-gpu 2" ;;
    single2 | single3) echo "--single-process" ;;
    esac
}
config_world() {
    case $1 in two | rpg2-2 | single2) echo 2 ;; *) echo 3 ;; esac
}

phase_matrix() {
    local configs=${MATRIX_CONFIGS:-two three rpg2-2 rpg2-3 single2 single3}
    local colls=${MATRIX_COLLS:-all-reduce reduce-scatter reduce all-gather broadcast sendrecv all-to-all}
    local dtypes=${MATRIX_DTYPES:-u8 i8 i32 u32 i64 u64 f16 bf16 f32 f64}
    local allops=${MATRIX_OPS:-sum prod max min avg}
    say "== matrix: configs [$configs] x collectives x dtypes [$dtypes] x ops [$allops] (ops only where the collective reduces)"
    local cfg coll dt op ops
    for cfg in $configs; do
        for coll in $colls; do
            case $coll in all-reduce | reduce-scatter | reduce) ops=$allops ;; *) ops=sum ;; esac
            for dt in $dtypes; do
                for op in $ops; do
                    local name="m-$cfg-$coll-$dt-$op"
                    # shellcheck disable=SC2046,SC2086
                    bench_run "$name" "$(config_env "$cfg")" $BENCH_ARGS $(config_args "$cfg") --coll "$coll" -d "$dt" -o "$op"
                    check_clean matrix "$name" "$(config_world "$cfg")"
                done
            done
        done
    done
}

# expect_outcome SECTION NAME WANT(error|hang|wrong) PATTERN
expect_outcome() {
    local sec=$1 name=$2 want=$3 pat=$4
    if [ "$PANIC" != 0 ]; then
        record "$sec" "$name" FAIL "ringlab panicked (see $LOGS/$name.err)"
        return
    fi
    case $want in
    wrong)
        if [ -z "$OUTCOME" ] && [ "$ROWS" -gt 0 ] && [ "$WRONG" -gt 0 ]; then
            record "$sec" "$name" PASS "#wrong $WRONG over $ROWS rows"
        elif [ "${REASON#*no in-place all-to-all}" != "$REASON" ]; then
            record "$sec" "$name" XFAIL "ringlab defect: in-place all-to-all refused ($WRONG wrong before it)"
        else
            record "$sec" "$name" FAIL "wanted #wrong > 0: outcome '$OUTCOME', #wrong $WRONG, $ROWS rows"
        fi
        ;;
    *)
        local hit=0 alt
        local IFS='|'
        for alt in $pat; do [ "${REASON#*$alt}" != "$REASON" ] && hit=1; done
        unset IFS
        if [ "$OUTCOME" = "$want" ] && [ "$hit" = 1 ]; then
            record "$sec" "$name" PASS "$(echo "$want" | tr a-z A-Z): ${REASON:0:150}"
        else
            record "$sec" "$name" FAIL "wanted $want ~ '$pat': outcome '$OUTCOME', rc $RC: ${REASON:0:200}"
        fi
        ;;
    esac
}

phase_faults() {
    say "== faults"
    touch "$OUT/faults.start"
    local small="-b 1K -e 64K -f 4 -n 2 -w 1"
    local coll
    for coll in all-reduce reduce-scatter reduce all-gather broadcast sendrecv all-to-all; do
        # shellcheck disable=SC2086
        bench_run "lazy-$coll" "STANDIN_GPUS=2 STANDIN_NCCL_LAZY=1" $small --coll "$coll"
        expect_outcome faults "lazy-$coll" wrong ""
    done
    bench_run lazy-single2 "STANDIN_GPUS=2 STANDIN_NCCL_LAZY=1" $small --single-process
    expect_outcome faults lazy-single2 wrong ""
    bench_run lazy-3ranks-f16-avg "STANDIN_GPUS=3 STANDIN_NCCL_LAZY=1" $small -d f16 -o avg
    expect_outcome faults lazy-3ranks-f16-avg wrong ""

    bench_run fail-at-3 "STANDIN_GPUS=2 STANDIN_NCCL_FAIL_AT=3" $small
    expect_outcome faults fail-at-3 error "injected failure of call 3"
    bench_run fail-at-3-rank1 "STANDIN_GPUS=2 STANDIN_NCCL_FAIL_AT=3 STANDIN_NCCL_FAIL_RANK=1" $small
    expect_outcome faults fail-at-3-rank1 error "rank 1 failed"
    # Ranks on different hosts (NCCL_HOSTID): the failing rank's abort reaches the other as
    # ncclRemoteError; on one host NCCL's SHM transport notices nothing.
    bench_run fail-at-3-rank1-hosts "STANDIN_GPUS=1 STANDIN_NCCL_FAIL_AT=3 STANDIN_NCCL_FAIL_RANK=1" $small --ranks-per-gpu 2 --nproc-per-node 2
    expect_outcome faults fail-at-3-rank1-hosts error "failed during all-reduce"
    if grep -q "rank 1 aborted the communicator" "$LOGS/fail-at-3-rank1-hosts.err"; then
        record faults peer-abort-is-remote-error PASS "rank 0 saw ncclRemoteError from rank 1's abort"
    else
        record faults peer-abort-is-remote-error FAIL "rank 0 never saw rank 1's abort (see $LOGS/fail-at-3-rank1-hosts.err)"
    fi
    bench_run fail-at-4-sendrecv "STANDIN_GPUS=2 STANDIN_NCCL_FAIL_AT=4" $small --coll sendrecv
    expect_outcome faults fail-at-4-sendrecv error "injected failure of call 4 (ncclRecv)"
    bench_run fail-at-5-single2 "STANDIN_GPUS=2 STANDIN_NCCL_FAIL_AT=5" $small --single-process
    expect_outcome faults fail-at-5-single2 error "injected failure of call 5"
    bench_run fail-code-5 "STANDIN_GPUS=2 STANDIN_NCCL_FAIL_AT=2 STANDIN_NCCL_FAIL_CODE=5" $small --coll broadcast
    expect_outcome faults fail-code-5 error "ncclInvalidUsage (5)"

    bench_run async-3 "STANDIN_GPUS=2 STANDIN_NCCL_ASYNC_ERROR=3" $small
    expect_outcome faults async-3 error "injected asynchronous error after call 3"
    bench_run async-3-rank1 "STANDIN_GPUS=3 STANDIN_NCCL_ASYNC_ERROR=3 STANDIN_NCCL_FAIL_RANK=1" $small --coll all-gather
    expect_outcome faults async-3-rank1 error "ncclRemoteError"
    bench_run async-4-single3 "STANDIN_GPUS=3 STANDIN_NCCL_ASYNC_ERROR=4" $small --single-process --coll reduce-scatter
    expect_outcome faults async-4-single3 error "asynchronous error"

    bench_run stuck-3 "STANDIN_GPUS=2 STANDIN_CUDA_STUCK=3" $small --timeout 4
    expect_outcome faults stuck-3 hang "made no progress"
    bench_run stuck-dev1 "STANDIN_GPUS=2 STANDIN_CUDA_STUCK=2 STANDIN_CUDA_STUCK_DEVICE=1" $small --timeout 4 --coll sendrecv
    expect_outcome faults stuck-dev1 hang "made no progress"
    bench_run stuck-single2 "STANDIN_GPUS=2 STANDIN_CUDA_STUCK=3" $small --timeout 4 --single-process
    expect_outcome faults stuck-single2 hang "made no progress"
    # Ranks 0 and 1 share GPU 0, which sticks; rank 2 is another "host" (NCCL_HOSTID), where
    # their aborts would arrive as ncclRemoteError before its own watchdog: keep it waiting.
    bench_run stuck-3ranks-rpg2 "STANDIN_GPUS=2 STANDIN_CUDA_STUCK=5 STANDIN_CUDA_STUCK_DEVICE=0 STANDIN_NCCL_PEER_FAULT=hang" $small --timeout 4 --nproc-per-node 3 --ranks-per-gpu 2
    expect_outcome faults stuck-3ranks-rpg2 hang "made no progress"

    # GPUs without memory pools: cudarc allocates with cuMemAlloc_v2 and frees with cuMemFree_v2.
    bench_run no-mem-pools "STANDIN_GPUS=3 STANDIN_CUDA_POOLS=0" $BENCH_ARGS --coll reduce-scatter
    check_clean faults no-mem-pools 3
    bench_run no-mem-pools-single "STANDIN_GPUS=2 STANDIN_CUDA_POOLS=0" $BENCH_ARGS --single-process --coll sendrecv
    check_clean faults no-mem-pools-single 2

    bench_run cuda-fault-3 "STANDIN_GPUS=2 STANDIN_CUDA_FAULT=3" $small
    # Seen by the wait (cuStreamQuery) or by the next launch, whichever comes first.
    expect_outcome faults cuda-fault-3 error "CUDA_ERROR_ILLEGAL_ADDRESS|Cuda failure 700 'an illegal memory access was encountered'"

    # No leftovers in /dev/shm from the runs above (init unlinks the area).
    local left
    left=$(find /dev/shm -maxdepth 1 -name 'standin-nccl-*' -newer "$OUT/faults.start" 2>/dev/null | wc -l)
    if [ "$left" = 0 ]; then
        record faults shm-leftovers PASS "no /dev/shm/standin-nccl-* left"
    else
        record faults shm-leftovers FAIL "$left /dev/shm/standin-nccl-* left behind"
    fi
}

phase_lab() {
    say "== lab: every scenario with --backend nccl, staged and with --fix"
    local s
    for s in $("$RL" lab list 2>/dev/null | awk '{print $1}'); do
        local toml=$ROOT/labs/$s.toml expect culprit train=0
        expect=$(sed -n 's/^expect *= *"\(.*\)"/\1/p' "$toml" 2>/dev/null | head -1)
        culprit=$(sed -n 's/^culprit *= *"\(.*\)"/\1/p' "$toml" 2>/dev/null | head -1)
        grep -q '^\[train' "$toml" 2>/dev/null && train=1
        if [ "$train" = 1 ]; then
            # A run-time scenario runs ringlab's own training loop: --backend nccl is refused,
            # saying why (it used to run TCP ranks quietly).
            timeout "$RUN_TIMEOUT" "$RL" lab run "$s" --backend nccl --json >"$LOGS/lab-$s.out" 2>"$LOGS/lab-$s.err"
            local rc=$?
            if [ "$rc" = 2 ] && grep -q "own training loop" "$LOGS/lab-$s.err"; then
                record lab "lab-$s" PASS "refused with --backend nccl, saying why"
            else
                record lab "lab-$s" FAIL "wanted a refusal (exit 2): rc $rc: $(tail -1 "$LOGS/lab-$s.err" | cut -c1-200)"
            fi
            continue
        fi
        for fix in "" --fix; do
            local name="lab-$s${fix:+-fix}"
            timeout "$RUN_TIMEOUT" "$RL" lab run "$s" --backend nccl $fix --json >"$LOGS/$name.out" 2>"$LOGS/$name.err"
            local rc=$?
            if grep -q panicked "$LOGS/$name.err"; then
                record lab "$name" FAIL "ringlab panicked (see $LOGS/$name.err)"
                continue
            fi
            if ! grep -q '"staged"' "$LOGS/$name.out"; then
                if grep -q 'iptables' "$LOGS/$name.err"; then
                    record lab "$name" XFAIL "not run here: $(tail -1 "$LOGS/$name.err" | cut -c1-150)"
                else
                    record lab "$name" FAIL "no report, rc $rc: $(tail -1 "$LOGS/$name.err" | cut -c1-200)"
                fi
                continue
            fi
            local got gotc fixed via=""
            got=$(grep -o '"staged":{"outcome":"[a-z]*"' "$LOGS/$name.out" | cut -d'"' -f6)
            gotc=$(grep -o '"culprit":"[a-z-]*"' "$LOGS/$name.out" | head -1 | cut -d'"' -f4)
            fixed=$(grep -o '"fixed":{[^}]*"outcome":"[a-z]*"' "$LOGS/$name.out" | grep -o '"outcome":"[a-z]*"' | cut -d'"' -f4)
            [ "$train" = 1 ] && via=" (ringlab defect: a training scenario runs its TCP ranks whatever --backend says; the stand-in is never loaded)"
            if [ -n "$fix" ]; then
                if [ "${fixed:-}" = pass ]; then
                    record lab "$name" "$([ "$train" = 1 ] && echo XFAIL || echo PASS)" "the fix re-runs clean$via"
                else
                    record lab "$name" FAIL "fixed run: '${fixed:-?}' (staged '$got')"
                fi
            elif [ "$s" = silent-drop ] && [ "$got" = "$expect" ] && [ "$gotc" = unknown ]; then
                record lab "$name" XFAIL "staged $got, culprit unknown: NCCL's connect to a dropped port fails only at the kernel's SYN timeout (~2 min), the scenario's watchdog fires at 6 s, and ringlab's NCCL diagnosis has no other evidence (its NCCL ranks publish no addresses to probe)"
            elif [ "$got" = "$expect" ] && [ "$gotc" = "$culprit" ]; then
                record lab "$name" "$([ "$train" = 1 ] && echo XFAIL || echo PASS)" "staged $got, culprit $gotc, as the scenario expects$via"
            else
                record lab "$name" FAIL "staged '$got' culprit '$gotc'; the scenario expects '$expect' '$culprit'"
            fi
        done
    done
    # A failed init (or a job killed during init) may leave its area until the next id's sweep.
    say "  /dev/shm/standin-nccl-* now: $(ls /dev/shm 2>/dev/null | grep -c '^standin-nccl-') (removed by the next ncclGetUniqueId once their maker is gone)"
}

phase_symbols() {
    say "== symbols: what the binary resolves from each stand-in (LD_DEBUG=bindings)"
    local ld=$OUT/ld
    rm -rf "$ld"
    mkdir -p "$ld"
    local small="-b 1K -e 4K -f 4 -n 2 -w 1"
    run_ld() { env LD_DEBUG=bindings LD_DEBUG_OUTPUT="$ld/ld" "$@" >>"$LOGS/symbols.out" 2>>"$LOGS/symbols.err"; }
    run_ld timeout 120 "$RL" doctor
    run_ld timeout 120 "$RL" sanity --backend nccl
    run_ld env STANDIN_GPUS=0 timeout 120 "$RL" sanity
    run_ld env STANDIN_GPUS=1 timeout 120 "$RL" sanity --backend nccl --ranks-per-gpu 2 --nproc-per-node 2
    run_ld env STANDIN_GPUS=3 timeout 120 "$RL" bench --backend nccl -b 1K -e 1K -n 300 -w 1
    local c
    for c in all-reduce reduce-scatter all-gather broadcast reduce sendrecv; do
        run_ld timeout 120 "$RL" bench --backend nccl $small --coll "$c"
    done
    run_ld env STANDIN_GPUS=3 timeout 120 "$RL" bench --backend nccl $small --coll all-to-all --single-process
    run_ld env STANDIN_NCCL_FAIL_AT=3 timeout 120 "$RL" bench --backend nccl $small
    run_ld env STANDIN_CUDA_STUCK=3 timeout 120 "$RL" bench --backend nccl $small --timeout 3
    run_ld env STANDIN_CUDA_FAULT=3 timeout 120 "$RL" bench --backend nccl $small
    run_ld env STANDIN_CUDA_POOLS=0 timeout 120 "$RL" bench --backend nccl $small
    # LD_DEBUG's records from several threads can share a line: split them first. Only the
    # lookups ringlab's own code makes (cudarc's dlsym) count; the NCCL stand-in's lookups of
    # the CUDA stand-in are listed apart.
    sed 's/binding file /\nbinding file /g' "$ld"/ld.* >"$ld/all.txt"
    local who lib tag
    for who in ringlab nccl; do
        for lib in 'libcuda\.so\.1' 'libnccl\.so[.0-9]*'; do
            tag=${lib%%\\*}
            [ "$who" = nccl ] && [ "$tag" = libnccl ] && continue
            # A dlsym lookup shows as "binding file LIB to LIB" (the stand-ins never call their
            # own exports, so nothing else does); the NCCL stand-in's lookups in libcuda are
            # its standin_* entry points.
            local keep='^(cu|nccl)'
            [ "$who" = nccl ] && keep='^standin_'
            grep -E "^binding file [^ ]*${lib} \[[0-9]+\] to [^ ]*${lib} \[[0-9]+\]: normal symbol" "$ld/all.txt" |
                sed -E "s/.*normal symbol \`([^']*)'.*/\1/" | grep -E "$keep" | sort -u >"$OUT/symbols-$who-$tag.txt"
            say "  $who resolves from $tag: $(tr '\n' ' ' <"$OUT/symbols-$who-$tag.txt")"
        done
    done
    local n
    n=$(wc -l <"$OUT/symbols-ringlab-libcuda.txt")
    if [ "$n" -gt 10 ]; then
        record symbols resolved PASS "ringlab: $n from libcuda.so.1, $(wc -l <"$OUT/symbols-ringlab-libnccl.txt") from libnccl.so.2 ($OUT/symbols-*.txt)"
    else
        record symbols resolved FAIL "only $n symbols seen from libcuda.so.1"
    fi
    if grep -h 'Missing symbol' "$ld"/ld.* "$LOGS"/*.err 2>/dev/null | head -3 | grep -q .; then
        record symbols missing FAIL "cudarc asked for a symbol the stand-ins lack"
    fi
}

# ---------------------------------------------------------------- main

phases=${*:-all}
[ "$phases" = all ] && phases="selftest sanity bench faults matrix lab symbols"
build
find_ringlab
say "== output: $OUT"
for p in $phases; do
    case $p in
    build) ;;
    selftest) phase_selftest ;;
    sanity) phase_sanity ;;
    bench) phase_bench ;;
    matrix) phase_matrix ;;
    faults) phase_faults ;;
    lab) phase_lab ;;
    symbols) phase_symbols ;;
    *) say "unknown phase $p" && exit 2 ;;
    esac
done
say "== $PASSES passed, $XFAILS expected failures (known ringlab defects, stand-in limits), $FAILS failed; $RESULTS"
[ "$FAILS" = 0 ]
