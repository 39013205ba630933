#!/usr/bin/env python3
"""Record a bootsim binary's verdict counts for every corpus case x adversary, over each seed count
given, as the table sim/tests/verdict_equivalence.rs reads (run from the repository root):
   record_verdict_rates.py BINARY SEEDS[,SEEDS...] OUT.tsv COMMIT
e.g. record_verdict_rates.py /tmp/bootsim-27b7073 1000,100 verdict_rates_27b7073.tsv 27b7073
Combinations the case parser refuses are written as comments, as the test expects."""
import glob, json, subprocess, sys, tomllib
binary, counts_arg, out, commit = sys.argv[1:5]
ADV = ["fifo", "rss", "lossy", "overflow", "swarm", "load", "cpu"]
HEADER = """# Verdict counts of the kernel model at COMMIT (a packet's RX-queue admission decided when it
# reaches the NIC: an arrival and a delivery entry on the agenda), recorded with that commit's
# release binary by sim/tests/data/record_verdict_rates.py: each corpus case (seeds/*.toml) under
# each adversary, seeds 0..999 and 0..99, through `bootsim sweep` (the case's other words with --set;
# its summary line omits accept= and drain_fail=, which it applies, so the table keeps the words).
# Combinations the case parser refuses (fifo with a scripted stall on queue 3, swarm draws that a
# scripted stall does not fit, turmoil with the cpu profile's application CPU) are comments.
# The same over seeds 0..99 follow, for the default test (a subset's shares compared with its own).
# file	case	seeds	counts
"""
rows = []
for seeds in [int(s) for s in counts_arg.split(",")]:
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
                why = (p.stderr.strip().splitlines() or ["?"])[-1]
                rows.append(f"# {path.split('/')[-1]}\t{want}\trefused\t{why}")
                print(rows[-1], flush=True)
                continue
            s = summ[-1]
            # The summary leaves out accept= and drain_fail=, which the sweep applies: keep the words.
            counts = " ".join(f"{k}={v}" for k, v in sorted(s["counts"].items()))
            rows.append(f"{path.split('/')[-1]}\t{want}\t{s['runs']}\t{counts}")
            print(rows[-1], flush=True)
open(out, "w").write(HEADER.replace("COMMIT", commit) + "\n".join(rows) + "\n")
