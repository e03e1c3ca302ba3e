"""measure.py REPORT command...: runs the command (its output untouched),
then writes "<peak RSS in MB> <wall seconds>" to REPORT and exits with the
command's status. A command still running after 60 s is killed (status 124)."""
import resource
import subprocess
import sys
import time

report, command = sys.argv[1], sys.argv[2:]
start = time.monotonic()
try:
    status = subprocess.run(command, timeout=60).returncode
except subprocess.TimeoutExpired:
    status = 124
seconds = time.monotonic() - start
peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
with open(report, "w") as out:
    out.write(f"{peak_mb:.0f} {seconds:.2f}\n")
sys.exit(status if status >= 0 else 128 - status)
