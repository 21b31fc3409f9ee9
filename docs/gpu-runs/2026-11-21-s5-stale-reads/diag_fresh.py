"""Scratch: the fresh scenario with share debugging, outputs kept."""
import os, sys, json, pathlib
sys.path.insert(0, "tests/python")
import mpmd_launch as ml
out = pathlib.Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
nproc = int(sys.argv[2]); tag = sys.argv[3]
extra = dict(kv.split("=", 1) for kv in sys.argv[4:])
r = ml.run_job("fresh", nproc, platform="cuda", timeout_s=120.0, bound_s=250.0, extra_env=extra)
for i, o in r["outputs"].items():
    (out / f"{tag}-p{i}.log").write_text(o)
for i in range(nproc):
    res = r.get(i)
    print(tag, i, None if res is None else (len(res.get("done", [])), len(res.get("failed", []))))
    if res:
        for f in res.get("failed", [])[:3]:
            print("   ", f.strip().splitlines()[-1][:300])
