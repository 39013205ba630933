#!/usr/bin/env python3
"""Record a bootsim binary's verdict counts for every corpus case x adversary (run from the repository root):
   record_verdict_rates.py BINARY SEEDS OUT.tsv"""
import glob, json, subprocess, sys, tomllib
binary, seeds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ADV = ["fifo", "rss", "lossy", "overflow", "swarm", "load", "cpu"]
rows = []
for path in sorted(glob.glob("seeds/*.toml")):
    case = tomllib.load(open(path, "rb"))["case"]
    words = [w for w in case.split() if not w.startswith("seed=")]
    for adv in ADV:
        ws = [("adversary=" + adv if w.startswith("adversary=") else w) for w in words]
        kv = dict(w.split("=", 1) for w in ws)
        argv = [binary, "sweep", "--seeds", str(seeds), "--json", "--jobs", "2",
                "--engine", kv.pop("engine"), "--variant", kv.pop("variant"), "--workload", kv.pop("workload"),
                "--ranks", kv.pop("ranks"), "--adversary", kv.pop("adversary")]
        kv.pop("protocol", None)
        for k, v in kv.items():
            argv += ["--set", f"{k}={v}"]
        p = subprocess.run(argv, capture_output=True, text=True)
        want = " ".join(ws)
        summ = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{") and '"summary"' in l]
        if not summ:
            rows.append(f"{path.split('/')[-1]}\t{want}\trefused\t{(p.stderr.strip().splitlines() or ['?'])[-1]}")
            print(rows[-1], flush=True)
            continue
        s = summ[-1]
        # The summary leaves out accept= and drain_fail=, which the sweep applies: keep the words.
        counts = " ".join(f"{k}={v}" for k, v in sorted(s["counts"].items()))
        rows.append(f"{path.split('/')[-1]}\t{want}\t{s['runs']}\t{counts}")
        print(rows[-1], flush=True)
open(out, "w").write("\n".join(rows) + "\n")
