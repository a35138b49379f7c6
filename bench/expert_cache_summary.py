#!/usr/bin/env python3
"""Summarises bench/expert_cache.sh's output: per engine the median decode speed
with its range, each ratio to ork's expert cache taken round by round, and ork's
cache figures (hit rate, MB read per token, time stalled on reads) beside the
disk's rate - stall against bytes read over the disk's rate, the physical limit.

  bench/expert_cache.sh > run.txt; bench/expert_cache_summary.py run.txt
"""
import json
import re
import statistics
import sys


def med(v):
    return statistics.median(v) if v else float("nan")


def main():
    rounds = {}
    for line in open(sys.argv[1]):
        m = re.match(r"round (\d+) (\S+) (.*)", line.strip())
        if not m:
            continue
        r, what, rest = int(m.group(1)), m.group(2), m.group(3)
        d = rounds.setdefault(r, {})
        if what == "disk":
            d["disk"] = float(rest.split()[0])
        elif what.startswith("ork-"):
            j = json.loads(rest)
            d[what] = j["tg"]["tok_s_median"]
            if "experts" in j:
                d[what + ":experts"] = j["experts"]
        else:
            rc = int(re.match(r"rc=(\d+)", rest).group(1))
            body = rest[rest.find("["):] if "[" in rest else ""
            tg = None
            if rc == 0 and body:
                for t in json.loads(body):
                    if t.get("n_gen", 0) > 0:
                        tg = t["avg_ts"]
            d[what] = tg if rc == 0 else "rc %d%s" % (rc, " (killed: out of memory)" if rc == 137 else "")
    engines = sorted({k for d in rounds.values() for k in d if k != "disk" and ":" not in k})
    base = "ork-lru"
    print("| engine | decode tok/s, median (min-max) | ork-lru / it, per round, median (min-max) |")
    print("|---|---|---|")
    for e in engines:
        vals = [d[e] for d in rounds.values() if isinstance(d.get(e), float)]
        fails = [d[e] for d in rounds.values() if isinstance(d.get(e), str)]
        ratios = [d[base] / d[e] for d in rounds.values() if isinstance(d.get(e), float) and isinstance(d.get(base), float)]
        speed = "%.2f (%.2f-%.2f)" % (med(vals), min(vals), max(vals)) if vals else "; ".join(sorted(set(fails)))
        ratio = "%.2f (%.2f-%.2f)" % (med(ratios), min(ratios), max(ratios)) if ratios and e != base else "-"
        print("| %s | %s | %s |" % (e, speed, ratio))
    disks = [d["disk"] for d in rounds.values() if "disk" in d]
    print("\ndisk (dd, O_DIRECT, 1 GiB): %.2f GB/s median (%.2f-%.2f)" % (med(disks), min(disks), max(disks)))
    print("\n| ork | hit rate | MB read / token | stall ms / token | MB / disk rate, ms | stall / limit |")
    print("|---|---|---|---|---|---|")
    for e in engines:
        rows = [(d[e + ":experts"], d["disk"]) for d in rounds.values() if e + ":experts" in d and "disk" in d]
        if not rows:
            continue
        hit = med([x["hit_rate"] for x, _ in rows])
        mb = med([x["mb_read_per_token"] for x, _ in rows])
        stall = med([x["stall_ms_per_token"] for x, _ in rows])
        limit = med([x["mb_read_per_token"] / disk for x, disk in rows])  # MB / (GB/s) = ms
        ratio = med([x["stall_ms_per_token"] / (x["mb_read_per_token"] / disk) for x, disk in rows
                     if x["mb_read_per_token"] > 0])
        print("| %s | %.1f %% | %.1f | %.1f | %.1f | %.2f |" % (e, 100 * hit, mb, stall, limit, ratio))


if __name__ == "__main__":
    main()
