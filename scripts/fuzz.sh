#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS]: fuzzes what magpy-run reads from others, for
# SECONDS in all (default 600), a third each on
#   - record_fuzzer: record loading and replay, byte mutations of record
#     bodies,
#   - plan_fuzzer: the same way in, but mutations edit operator nodes
#     (arguments, references, the operator), for plan building and the
#     operators' argument checks,
#   - tensor_file_fuzzer: the tensor-file reader of --inputs and --state,
#     seeded with the pickles of torch.save files of tensors, views and
#     plain values.
# The record fuzzers are seeded with the bodies of records captured from
# the examples and of the hostile records. All are made in build-san/ by
# scripts/sanitizers.sh. Corpora grow in build-san/fuzz-corpus*; a crashing
# input lands in build-san/fuzz-findings and the script fails: make it a
# hostile test, then fix it.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
for fuzzer in record_fuzzer plan_fuzzer tensor_file_fuzzer; do
  [ -x "build-san/bin/$fuzzer" ] || { echo "fuzz: build-san/bin/$fuzzer is missing; run scripts/sanitizers.sh first" >&2; exit 2; }
done
findings=build-san/fuzz-findings
mkdir -p "$findings"

seeds=build-san/fuzz-seeds
if [ -z "$(ls -A "$seeds" 2>/dev/null)" ]; then
  mkdir -p "$seeds"
  records=$(mktemp -d)
  for example in mlp containers breaks; do
    build/bin/magpy-capture -q -o "$records/$example.mgp" "examples/$example.py" > /dev/null
  done
  build/bin/write_hostile_records "$records"
  build/bin/record_bodies "$seeds" "$records"/*.mgp
  rm -rf "$records"
fi
tensor_seeds=build-san/fuzz-seeds-tensors
if [ -z "$(ls -A "$tensor_seeds" 2>/dev/null)" ]; then
  mkdir -p "$tensor_seeds"
  /usr/bin/python3 - "$tensor_seeds" <<'PY'
import io, sys, zipfile
from collections import OrderedDict
import torch
base = torch.arange(12.0)
values = [
    torch.arange(6.0).reshape(2, 3),
    (torch.ones(3), torch.zeros(2, dtype=torch.int64)),
    {"a": base[1:5], "b": base.view(3, 4), "c": [1, 2.5, "s", None, True]},
    [base[::2], base[3:], (base, base)],
    OrderedDict(w=torch.ones(2, 2, dtype=torch.float64), b=torch.tensor([True, False])),
]
for i, v in enumerate(values):
    buf = io.BytesIO()
    torch.save(v, buf)
    archive = zipfile.ZipFile(buf)
    name = next(n for n in archive.namelist() if n.endswith("data.pkl"))
    with open(f"{sys.argv[1]}/seed{i}", "wb") as out:
        out.write(archive.read(name))
PY
fi

export ASAN_OPTIONS="detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
run() {  # fuzzer seconds corpus seeds
  mkdir -p "$3"
  echo "fuzz: $1 for $2 s from $(ls "$4" | wc -l) seeds"
  "build-san/bin/$1" -max_total_time="$2" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$findings/" -print_final_stats=1 "$3" "$4" 2>&1 | tail -n 25
}
run record_fuzzer $((seconds / 3)) build-san/fuzz-corpus "$seeds"
run plan_fuzzer $((seconds / 3)) build-san/fuzz-corpus-plans "$seeds"
run tensor_file_fuzzer $((seconds - 2 * (seconds / 3))) build-san/fuzz-corpus-tensors "$tensor_seeds"
