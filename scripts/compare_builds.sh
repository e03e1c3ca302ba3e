#!/usr/bin/env bash
# Compares two builds of magpy for a change meant to keep behaviour: the
# records both capture must be the same bytes, and replay and guard times
# should agree (measured in one run, old and new alternating).
#
#   scripts/compare_builds.sh OLD_BIN NEW_BIN [OUT]
#
# OLD_BIN, NEW_BIN: bin/ folders of two builds (copy build/bin aside before
# the change). Records: every corpus program, the examples, 100 generated
# and 100 perturbed programs (tests/soundness), with torch's generator
# seeded at start (some torch builds seed it from the clock). Timing: 5
# rounds of magpy-run --repeat on mlp and resnet18, magpy-bench-guards on
# monodepth's record and bench/jit_guards.py. Programs whose records
# differ between two runs of the old build are set apart. Writes OUT/compare.md
# (default build/compare) and prints it. Exit 1 when a record differs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
old="$(cd "$1" && pwd)"
new="$(cd "$2" && pwd)"
out="$(mkdir -p "${3:-$root/build/compare}" && cd "${3:-$root/build/compare}" && pwd)"
py=/usr/bin/python3
mkdir -p "$out/site" "$out/run"
echo 'import torch; torch.manual_seed(0)' > "$out/site/sitecustomize.py"
export PYTHONPATH="$out/site" MALLOC_MMAP_THRESHOLD_=268435456

# capture BIN DIR: one record per program into DIR (a program that fails
# leaves no record, under either build).
capture() {
  local bin=$1 dir=$2
  mkdir -p "$dir"
  for f in "$root"/tests/corpus/*.py; do
    local name; name=$(basename "$f" .py)
    [ "$name" = harness ] && continue
    local args; args=$(grep -m1 '^# magpy-capture-args:' "$f" | sed 's/^# magpy-capture-args://' || true)
    (cd "$root/tests/corpus" && timeout 300 "$bin/magpy-capture" -q $args -o "$dir/$name.mgp" "$f") > /dev/null 2>&1 || true
  done
  for f in "$root"/examples/*.py; do
    (cd "$out/run" && timeout 300 "$bin/magpy-capture" -q -o "$dir/ex_$(basename "$f" .py).mgp" "$f") > /dev/null 2>&1 || true
  done
  "$py" "$root/tests/soundness/generate.py" 0 100 > "$out/run/generated.py"
  "$py" "$root/tests/soundness/perturb.py" 0 100 > "$out/run/perturbed.py"
  for g in generated perturbed; do
    (cd "$out/run" && "$bin/magpy-capture" -q --log-calls 1000000 -o "$dir/$g.mgp" "$g.py") > /dev/null 2>&1 || true
  done
}

# Programs whose records differ between two runs of the old build read
# memory nobody wrote or object addresses: they are set apart.
capture "$old" "$out/old"
capture "$old" "$out/old2"
capture "$new" "$out/new"
differ=() unstable=()
for f in "$out"/old/*.mgp; do
  name=$(basename "$f" .mgp)
  if ! cmp -s "$f" "$out/old2/$name.mgp"; then unstable+=("$name")
  elif ! cmp -s "$f" "$out/new/$name.mgp"; then differ+=("$name"); fi
done
total=$(ls "$out"/old/*.mgp | wc -l)

"$new/magpy-capture" -q -o "$out/mlp.mgp" "$root/bench/capture_model.py" mlp 1 > /dev/null
"$new/magpy-capture" -q -o "$out/resnet18.mgp" "$root/bench/capture_model.py" resnet18 1 > /dev/null
(cd "$out/run" && "$new/magpy-capture" -q -o "$out/monodepth.mgp" "$root/examples/models/monodepth.py") > /dev/null
: > "$out/times.txt"
for round in 1 2 3 4 5; do
  for side in old new; do
    bin=$old; [ $side = new ] && bin=$new
    for m in mlp:2000 resnet18:20; do
      us=$("$bin/magpy-run" --threads 1 --repeat "${m#*:}" "$out/${m%:*}.mgp" | sed -n 's/.* median \([0-9.]*\) us per call.*/\1/p')
      echo "$side replay_${m%:*}_us $us" >> "$out/times.txt"
    done
    echo "$side native_guards_monodepth_us $("$bin/magpy-bench-guards" "$out/monodepth.mgp" | grep -o '[0-9.]* us' | head -1 | cut -d' ' -f1)" >> "$out/times.txt"
    echo "$side jit_guards_us $("$bin/magpy-capture" -q --log-calls 0 -o /dev/null "$root/bench/jit_guards.py" | sed -n 's/jit guard check: \([0-9.]*\) us.*/\1/p')" >> "$out/times.txt"
  done
done

"$py" - "$out" "$total" "${unstable[*]+"${unstable[*]}"}" "${differ[@]+"${differ[@]}"}" <<'EOF'
import collections, statistics, sys
out, total, unstable, differ = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]
times = collections.defaultdict(list)
for line in open(f"{out}/times.txt"):
    side, key, value = line.split()
    times[(key, side)].append(float(value))
lines = ["# Two builds compared", "",
         f"Records: {total - len(unstable) - len(differ)} of {total - len(unstable)} byte-identical"
         + (f"; differ: {', '.join(differ)}" if differ else "")
         + (f" ({len(unstable)} set apart, not deterministic under the old build: {', '.join(unstable)})" if unstable else ""),
         "", "| measure (median of 5 alternating rounds) | old | new | new/old |", "|---|---|---|---|"]
for key in sorted({k for k, _ in times}):
    o, n = statistics.median(times[(key, "old")]), statistics.median(times[(key, "new")])
    lines.append(f"| {key} | {o:.1f} | {n:.1f} | {n / o:.3f} |")
open(f"{out}/compare.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
[ ${#differ[@]} -eq 0 ]
