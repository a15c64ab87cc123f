#!/usr/bin/env python3
"""Draws gdn_train runs from their JSON-lines logs (--log): against the step, the training
loss (and the validation loss where the log has one), the learning rate, tokens/s, model
TFLOP/s per rank and MFU (where logged), and the peak memory (RSS, and the device's
buffers on a GPU), several runs overlaid, each named by its file. Steps a resumed run took
again (a log holds each step once) and skipped steps (loss null) are left out.

    scripts/plot_run.py LOG.jsonl [LOG2.jsonl ...] --out run.png [--title TEXT]

matplotlib comes from the tools' venv (scripts/setup.sh makes .venv-tools): run it as
.venv-tools/bin/python scripts/plot_run.py ...
"""
import argparse
import json
import os
import sys


def read_log(path):
    """The step records of a log (the last record of a step wins) and its validation ones."""
    steps, vals = {}, {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                sys.exit(f"plot_run.py: {path} line {n} is not JSON: {line[:60]}")
            if not isinstance(r, dict) or "step" not in r:
                continue
            (vals if "val_loss" in r else steps)[r["step"]] = r
    if not steps and not vals:
        sys.exit(f"plot_run.py: {path} holds no step record (a gdn_train --log file?)")
    return [steps[k] for k in sorted(steps)], [vals[k] for k in sorted(vals)]


def series(records, key, f=lambda r, v: v):
    xs, ys = [], []
    for r in records:
        v = r.get(key)
        if v is not None:
            xs.append(r["step"] + 1)
            ys.append(f(r, v))
    return xs, ys


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("logs", nargs="+", help="gdn_train --log files (JSON lines)")
    p.add_argument("--out", required=True, help="the image to write (.png, .svg, .pdf)")
    p.add_argument("--title", default="", help="a title above the panels")
    a = p.parse_args()
    for path in a.logs:
        if not os.path.isfile(path):
            sys.exit(f"plot_run.py: no log file '{path}'")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_run.py: matplotlib is missing: run scripts/setup.sh (it adds matplotlib to "
                 ".venv-tools in the background), then this script with .venv-tools/bin/python")
    runs = [(os.path.basename(path), *read_log(path)) for path in a.logs]

    def line(ax, xy, label, color, style="-"):
        if xy[0]:  # a quantity the log does not hold draws nothing
            ax.plot(*xy, style, label=label, color=color, markersize=3)

    # Each panel: its title and what it draws of one run (name, colour, steps, validations).
    panels = [
        ("loss", lambda ax, n, c, st, va: (
            line(ax, series(st, "loss"), f"{n} train", c),
            line(ax, series(va, "val_loss"), f"{n} validation", c, "o--"))),
        ("learning rate", lambda ax, n, c, st, va: line(ax, series(st, "lr"), n, c)),
        ("tokens/s", lambda ax, n, c, st, va: line(
            ax, series(st, "tokens", lambda r, v: v / (r["step_ms"] / 1000.0)), n, c)),
        ("model TFLOP/s per rank", lambda ax, n, c, st, va: line(
            ax, series(st, "model_tflops"), n, c)),
        ("MFU (%)", lambda ax, n, c, st, va: line(
            ax, series(st, "mfu", lambda r, v: 100 * v), n, c)),
        ("peak memory (GiB)", lambda ax, n, c, st, va: (
            line(ax, series(st, "peak_rss", lambda r, v: v / 2**30), f"{n} RSS", c),
            line(ax, series(st, "peak_device", lambda r, v: v / 2**30), f"{n} device", c,
                 ":"))),
    ]
    fig, axes = plt.subplots(3, 2, figsize=(12, 10), sharex=True)
    for ax, (label, draw) in zip(axes.flat, panels):
        for i, (name, st, va) in enumerate(runs):
            draw(ax, name, f"C{i}", st, va)
        ax.set_title(label)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "not in these logs", ha="center", va="center",
                    transform=ax.transAxes, color="grey")
    for ax in axes[-1]:
        ax.set_xlabel("step")
    if a.title:
        fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.out, dpi=100)
    print(f"plot_run.py: wrote {a.out} ({len(runs)} run{'s' if len(runs) > 1 else ''})")


if __name__ == "__main__":
    main()
