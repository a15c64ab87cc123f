"""Compares the losses of two gdn_train JSON-lines logs (--log): prints the step count and
the largest |loss difference|, and exits 1 when it is above TOL, or when a log is missing,
has no loss lines, or a different number of steps (a run that failed must not pass).

    python3 scripts/compare_losses.py A.jsonl B.jsonl TOL"""
import json
import sys


def losses(path):
    try:
        with open(path) as f:
            out = [json.loads(line)["loss"] for line in f if '"loss"' in line]
    except OSError as e:
        sys.exit(f"compare_losses: {e}")
    if not out:
        sys.exit(f"compare_losses: {path} has no loss lines")
    return out


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
    if len(a) != len(b):
        sys.exit(f"compare_losses: {len(a)} steps in {sys.argv[1]} against {len(b)} in {sys.argv[2]}")
    d = max(abs(x - y) for x, y in zip(a, b))
    print(f"{len(a)} steps, max |loss diff| {d:.3e} (tol {tol:g})")
    sys.exit(0 if d <= tol else 1)


if __name__ == "__main__":
    main()
