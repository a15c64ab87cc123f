#!/usr/bin/env python3
"""Instructions per tensor-core mma in the innermost mma loops of every kernel, from static SASS.

Reads `cuobjdump -sass BINARY` (sm_90 machine code of the CUDA build) and, for each kernel
that issues HMMA, finds its loops (a backward branch from b to t <= b is a loop over the
instructions [t, b]) and among those that hold an HMMA the innermost ones (no smaller
HMMA loop inside). The figure of a loop is its instructions per HMMA: how much issue
bandwidth the tensor cores' feeding costs (docs/gpu.md; issue 35's budget is 12). A kernel
whose HMMAs sit in no loop (fully unrolled) is given its whole body per HMMA. Prints one
table row per kernel: its HMMA count, its innermost HMMA loops, the worst and best
instructions per HMMA among them, and the worst among the loops of bf16 mmas
(HMMA.16816.F32.BF16: the bf16 mode's, which the budget is about; the other HMMAs are the
opt-in TF32 GEMMs', HMMA.1684.F32.TF32); --json prints the same as JSON lines.

  scripts/sass_table.py BINARY [--cuobjdump PATH] [--filter REGEX] [--json] [--loops]

scripts/sass_table.sh installs cuobjdump (the nvidia-cuda-cuobjdump wheel) and runs this on
the build's gdn_train, which holds every kernel.
"""
import argparse
import json
import re
import subprocess
import sys

INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
OPCODE = re.compile(r"^(?:@!?U?P\w+\s+)?(\S+)")
BRANCH = re.compile(r"^(?:@!?U?P\w+\s+)?BRA(?:\.\S+)?\s+(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))")


def kernels(sass):
    """(mangled name, [(address, text)]) per function of the listing."""
    name, body = None, []
    for line in sass.splitlines():
        if "Function : " in line:
            if name:
                yield name, body
            name, body = line.split("Function : ", 1)[1].strip(), []
            continue
        m = INSTR.match(line)
        if m and name:
            body.append((int(m.group(1), 16), m.group(2)))
    if name:
        yield name, body


def loops(body):
    """(first, last) index pairs of the loops: backward branches to an earlier address."""
    index = {a: i for i, (a, _) in enumerate(body)}
    out = []
    for i, (_, text) in enumerate(body):
        m = BRANCH.match(text)
        if m and m.group(1):
            t = int(m.group(1), 16)
            if t in index and index[t] <= i:
                out.append((index[t], i))
    return out


def analyse(body):
    is_mma = [OPCODE.match(t).group(1).startswith("HMMA") for _, t in body]
    hmma = sum(is_mma)
    if hmma == 0:
        return None
    mma_loops = []
    for a, b in loops(body):
        n = sum(is_mma[a:b + 1])
        if n:
            mma_loops.append((a, b, n))
    inner = [(a, b, n) for a, b, n in mma_loops
             if not any((c, d) != (a, b) and a <= c and d <= b for c, d, _ in mma_loops)]
    ratios = sorted({round((b - a + 1) / n, 1) for a, b, n in inner})
    is_bf16 = [".BF16" in t and m for (_, t), m in zip(body, is_mma)]
    bf16 = [round((b - a + 1) / n, 1) for a, b, n in inner if any(is_bf16[a:b + 1])]
    if not inner:  # unrolled: the whole body
        ratios = [round(len(body) / hmma, 1)]
        bf16 = ratios if any(is_bf16) else []
    detail = []
    for a, b, n in inner:  # each loop's instructions by opcode, most first
        ops = {}
        for _, t in body[a:b + 1]:
            op = OPCODE.match(t).group(1).split(".")[0]
            ops[op] = ops.get(op, 0) + 1
        top = sorted(ops.items(), key=lambda kv: -kv[1])[:8]
        detail.append(f"{b - a + 1} instructions, {n} HMMA ({(b - a + 1) / n:.1f}): " +
                      " ".join(f"{k} {v}" for k, v in top))
    return {"hmma": hmma, "instructions": len(body), "inner_loops": len(inner),
            "worst": max(ratios), "best": min(ratios),
            "bf16_worst": max(bf16) if bf16 else None, "loops": detail}


def short_names(names):
    """The kernels' names demangled in one c++filt call, without namespaces and parameters."""
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                             text=True).stdout.splitlines()
    except OSError:
        out = []
    if len(out) != len(names):
        out = names
    return [re.sub(r"\(.*\)$", "", re.sub(r"^void ", "", n.replace("(anonymous namespace)::", "")
                                                         .replace("gdn::", ""))) for n in out]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--cuobjdump", default="cuobjdump")
    ap.add_argument("--filter", default="", help="only kernels whose short name matches")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--loops", action="store_true",
                    help="also each innermost mma loop's instructions by opcode")
    a = ap.parse_args()
    r = subprocess.run([a.cuobjdump, "-sass", a.binary], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"sass_table: {a.cuobjdump} -sass {a.binary} failed: {r.stderr.strip()}")
    rows, seen = [], set()
    listed = list(kernels(r.stdout))
    for (name, body), label in zip(listed, short_names([n for n, _ in listed])):
        s = analyse(body)
        if not s or not re.search(a.filter, label) or (label, s["instructions"]) in seen:
            continue
        seen.add((label, s["instructions"]))
        rows.append({"kernel": label, **s})
        if not a.json and not a.loops:
            rows[-1].pop("loops")
    if a.json:
        for row in rows:
            print(json.dumps(row))
        return
    w = max([len(x["kernel"]) for x in rows] + [6])
    print(f"# {'kernel':<{w}} {'HMMA':>6} {'instr':>7} {'loops':>5} {'worst':>6} {'best':>6} "
          f"{'bf16':>6}")
    print(f"# {'':<{w}} {'':>6} {'':>7} {'(inner)':>5} {'(instr per HMMA)':>13} {'worst':>6}")
    for x in rows:
        b = "-" if x["bf16_worst"] is None else f"{x['bf16_worst']:.1f}"
        print(f"  {x['kernel']:<{w}} {x['hmma']:>6} {x['instructions']:>7} {x['inner_loops']:>5} "
              f"{x['worst']:>6.1f} {x['best']:>6.1f} {b:>6}")
        if a.loops:
            for line in x["loops"]:
                print(f"      {line}")
    bf16 = [x["bf16_worst"] for x in rows if x["bf16_worst"] is not None]
    print(f"# {len(rows)} kernels with HMMA; worst of all {max(x['worst'] for x in rows):.1f} "
          f"instructions per HMMA in an innermost mma loop, of the bf16 ones "
          f"{max(bf16, default=0):.1f}" if rows else "# no HMMA in this binary")


if __name__ == "__main__":
    main()
