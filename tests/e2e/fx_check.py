"""Exports every record of a .mgp file that has an operator graph to
torch.fx (magpy-inspect --fx) and runs each export's own check: the
GraphModule and torch.jit.script of it give the record's outputs on its
example inputs. Prints one line per record; exits 1 if any check fails.

    python3 fx_check.py MAGPY_INSPECT RECORD.mgp OUT_DIR
"""
import json
import os
import runpy
import subprocess
import sys
import traceback


def main():
    inspect, record, out_dir = sys.argv[1:4]
    summary = json.loads(subprocess.run([inspect, record, "--summary", "--format", "json"], check=True,
                                        capture_output=True, text=True).stdout)
    failed = exported = 0
    for fn in summary:
        for r in range(fn["records"]):
            py = os.path.join(out_dir, f"{fn['function'].replace('.', '_')}_{r}.py")
            export = subprocess.run([inspect, record, "--fx", "--function", fn["function"], "--record", str(r),
                                     "-o", py], capture_output=True, text=True)
            if export.returncode != 0:
                if "has no operator graph" in export.stderr:
                    print(f"{fn['function']} record {r}: graph breaks, not exported")
                    continue
                if "which the torch.fx export does not write yet" in export.stderr:
                    print(f"{fn['function']} record {r}: {export.stderr.strip().rsplit(': ', 1)[-1]}, not exported")
                    continue
                if "there is no example to export it with" in export.stderr:
                    print(f"{fn['function']} record {r}: checks values no logged call read, not exported")
                    continue
                print(f"{fn['function']} record {r}: export failed: {export.stderr.strip()}")
                failed += 1
                continue
            exported += 1
            try:
                runpy.run_path(py, run_name="__main__")
            except Exception:
                print(f"{fn['function']} record {r}: check failed:\n{traceback.format_exc()}")
                failed += 1
    print(f"{exported} records exported, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
