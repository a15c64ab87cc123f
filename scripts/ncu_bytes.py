#!/usr/bin/env python3
"""The device memory traffic of a profiled run, per kernel and in all, from ncu's raw page
(`ncu --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum ...`, then
`ncu --import REPORT --csv --page raw`): the measured side of issue 35's byte budget (<= 20
GB per bf16 forward + backward at (1, 32768, 16, 32, 128, 128)). Prints scripts/
device_check.sh's summary rows (name, result, detail, tab-separated): the total, then the
kernels by bytes, largest first, launches of one kernel summed.

    ncu_bytes.py RAW_CSV [--top N]
"""
import argparse
import csv
import re


def number(text):
    return float(text.replace(",", "")) if text and re.match(r"^[0-9.,eE+-]+$", text) else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw_csv")
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args()
    rows = list(csv.reader(open(a.raw_csv)))
    head = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if head is None:
        print("ncu bytes\tFAILED\tno kernel rows in the report")
        return
    names = rows[head]
    col = {n: names.index(n) for n in names}
    units = rows[head + 1] if len(rows) > head + 1 else []
    scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "nsecond": 1e-9,
             "usecond": 1e-6, "msecond": 1e-3, "second": 1}
    def value(r, metric):
        i = col.get(metric)
        if i is None or i >= len(r):
            return 0.0
        unit = units[i] if i < len(units) else ""
        return number(r[i]) * scale.get(unit, 1)
    kernels = {}
    for r in rows[head + 1:]:
        if len(r) < len(names) or not r[col["Kernel Name"]] or r[col["Kernel Name"]] == "":
            continue
        if not re.match(r"^\d+$", r[col["ID"]]):  # the units row
            continue
        name = re.sub(r"\(.*", "", r[col["Kernel Name"]]).replace("(anonymous namespace)::", "")
        k = kernels.setdefault(name, [0, 0.0, 0.0, 0.0])
        k[0] += 1
        k[1] += value(r, "dram__bytes_read.sum")
        k[2] += value(r, "dram__bytes_write.sum")
        k[3] += value(r, "gpu__time_duration.sum")
    read = sum(k[1] for k in kernels.values())
    write = sum(k[2] for k in kernels.values())
    secs = sum(k[3] for k in kernels.values())
    launches = sum(k[0] for k in kernels.values())
    print(f"ncu bytes: all kernels\tinfo\t{(read + write) / 1e9:.2f} GB ({read / 1e9:.2f} read, "
          f"{write / 1e9:.2f} written) in {launches} launches, {secs * 1e3:.2f} ms of kernel "
          f"time: {(read + write) / secs / 1e12 if secs else 0:.2f} TB/s")
    top = sorted(kernels.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))[:a.top]
    for name, (n, rd, wr, t) in top:
        print(f"ncu bytes: {name[-70:]}\tinfo\t{(rd + wr) / 1e9:.2f} GB in {n} launches, "
              f"{t * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
