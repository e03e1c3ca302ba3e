#!/usr/bin/env bash
# Data-parallel training end to end (examples/train_ddp.py), on Gloo over
# loopback: ranks started with torchrun's environment, as torchrun would.
#   1. DDP and manual all_reduce, 2 ranks (DDP also 4): magpy-capture on
#      every rank equals plain Python on every rank (the loss of every step,
#      the final weights), in at most 2 records per rank with no break.
#   2. magpy-run --nproc-per-node on each rank's shard: rank 0's trained
#      weights equal eager DDP training's.
#   3. Failures: a rank killed mid-run ends the other with a clear error in
#      under 60 s; ranks given different records refuse to start; a record
#      with collectives and no rank environment is refused.
# usage: ddp_test.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$(cd "$1" && pwd)
work=$2
here=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work"
export PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}"
python=/usr/bin/python3
fail() { echo "FAIL: $*" >&2; exit 1; }
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT  # no rank outlives the test

free_port() { $python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# ranks N PORT CMD...: runs CMD once per rank with torchrun's environment;
# fails if any rank fails.
ranks() {
  local n=$1 port=$2; shift 2
  local pids=() r
  rm -f "$work"/log.*
  for ((r = 0; r < n; r++)); do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" > "$work/log.$r" 2>&1 &
    pids+=($!)
  done
  local status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  if [ $status -ne 0 ]; then cat "$work"/log.*; return 1; fi
}

capture_and_compare() {  # mode nproc
  local mode=$1 n=$2 out="$work/$1-$2"
  ranks "$n" "$(free_port)" "$bin/magpy-capture" -o "$out/jit/step.{rank}.mgp" "$here/examples/train_ddp.py" \
    "$out/jit" --mode "$mode" || fail "$mode x$n: capture"
  for ((r = 0; r < n; r++)); do
    grep -q "step: 20 calls, [12] records ([12] graphs, 0 breaks)" "$work/log.$r" ||
      { cat "$work/log.$r"; fail "$mode x$n: rank $r did not capture the step whole in at most 2 records"; }
  done
  ranks "$n" "$(free_port)" $python "$here/examples/train_ddp.py" "$out/eager" --mode "$mode" || fail "$mode x$n: eager"
  $python "$here/examples/train_ddp.py" --compare "$out/jit" "$out/eager" || fail "$mode x$n: JIT differs from eager"
  "$bin/magpy-run" --nproc-per-node "$n" "$out/jit/step.{rank}.mgp" --batches "$out/jit/shard_{rank}.pt" \
    --save-state "$out/trained.pt" > "$work/native.log" 2>&1 || { cat "$work/native.log"; fail "$mode x$n: native training"; }
  $python "$here/examples/train_ddp.py" --compare-state "$out/trained.pt" "$out/eager" ||
    fail "$mode x$n: native training differs from eager DDP"
  echo "ok: $mode with $n ranks"
}

capture_and_compare ddp 2
capture_and_compare manual 2
capture_and_compare ddp 4

# Programs that change what a record depends on between calls: on 2
# ranks, the JIT's printed results are plain Python's.
agrees_with_eager() {
  local name=$1
  ranks 2 "$(free_port)" "$bin/magpy-capture" -o "$work/$name.{rank}.mgp" "$here/tests/distributed/$name.py" ||
    fail "$name: capture"
  cat "$work/log.0" "$work/log.1" | grep "^[01] " | sort > "$work/$name.jit"
  ranks 2 "$(free_port)" $python "$here/tests/distributed/$name.py" || fail "$name: eager"
  cat "$work/log.0" "$work/log.1" | grep "^[01] " | sort > "$work/$name.eager"
  diff "$work/$name.jit" "$work/$name.eager" || fail "$name: the JIT's results differ from eager's"
  echo "ok: $name agrees with eager"
}
agrees_with_eager reduce_op_switch
agrees_with_eager ddp_changes

# A rank killed mid-run: the other ends with one clear error, in time.
ddp="$work/ddp-2/jit"
port=$(free_port)
start=$(date +%s)
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port stdbuf -oL "$bin/magpy-run" "$ddp/step.{rank}.mgp" --repeat 1000000 \
  > "$work/kill.0" 2>&1 &
survivor=$!
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port stdbuf -oL "$bin/magpy-run" "$ddp/step.{rank}.mgp" --repeat 1000000 \
  > "$work/kill.1" 2>&1 &
victim=$!
for _ in $(seq 100); do grep -q "calls natively" "$work/kill.1" 2>/dev/null && break; sleep 0.2; done
grep -q "calls natively" "$work/kill.1" || { cat "$work/kill.1"; fail "kill: rank 1 never got to its timed calls"; }
kill -9 $victim
status=0
wait $survivor || status=$?
elapsed=$(( $(date +%s) - start ))
[ $status -eq 2 ] || { cat "$work/kill.0"; fail "kill: rank 0 exited with $status, not 2"; }
[ $elapsed -lt 60 ] || fail "kill: rank 0 took $elapsed s to notice"
grep -Eq "^magpy-run: error: .*while running %(allreduce|broadcast)_.*another rank of the group failed" "$work/kill.0" || { cat "$work/kill.0"; fail "kill: no error naming the collective"; }
echo "ok: a killed rank ends the other in ${elapsed}s: $(grep '^magpy-run: error' "$work/kill.0" | cut -c1-160)"

# Different records on the two ranks: refused before any call.
manual="$work/manual-2/jit"
status=0
ranks 2 "$(free_port)" sh -c 'exec "$0" "$([ "$RANK" = 0 ] && echo "$1" || echo "$2")"' "$bin/magpy-run" \
  "$ddp/step.0.mgp" "$manual/step.1.mgp" || status=$?
[ $status -ne 0 ] || fail "mismatch: ranks with different records ran"
grep -q "replays other records" "$work/log.0" && grep -q "replays other records" "$work/log.1" ||
  { cat "$work"/log.*; fail "mismatch: not refused with its reason on both ranks"; }
! grep -q "^call 0" "$work"/log.* || fail "mismatch: a call ran before the refusal"
echo "ok: different records refused: $(grep -h 'replays other' "$work/log.0" | cut -c1-160)"

# No rank environment.
status=0
env -u RANK -u WORLD_SIZE "$bin/magpy-run" "$ddp/step.0.mgp" > "$work/alone.log" 2>&1 || status=$?
[ $status -eq 2 ] && grep -q "runs collectives (torch.distributed): start magpy-run once per rank" "$work/alone.log" ||
  { cat "$work/alone.log"; fail "no environment: not refused clearly"; }
echo "ok: a record with collectives needs the rank environment"
