"""The --shapes argument of gdn_bench and of the Python benchmarks beside it
(bench_torch_reference.py, bench_fla.py): 'B,T,Hk,Hv,K,V;B,T,Hk,Hv,K,V;...'."""


def parse_shapes(spec):
    shapes = []
    for part in spec.split(";"):
        if part.strip():
            v = [int(x) for x in part.split(",")]
            if len(v) != 6:
                raise SystemExit(f"--shapes: '{part}' has {len(v)} numbers, expected B,T,Hk,Hv,K,V")
            shapes.append(tuple(v))
    return shapes
