"""Runs a command and prints its peak resident memory on stderr as
"peak_rss_kb RANK KB (exit RC)" (ru_maxrss of the child; RANK from Open MPI or PMI), for
the CLI tests' memory checks under mpirun. Exits with the command's code, or 0 with
--exit-zero first, so that mpirun does not end the other ranks' wrappers before they
report when the command is meant to fail."""
import os
import resource
import subprocess
import sys

args = sys.argv[1:]
exit_zero = bool(args) and args[0] == "--exit-zero"
if exit_zero:
    args = args[1:]
rc = subprocess.call(args)
rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print("peak_rss_kb %s %d (exit %d)" % (rank, kb, rc), file=sys.stderr, flush=True)
sys.exit(0 if exit_zero else rc)
