#!/usr/bin/env python3
"""The expert cache's hit rate against its size on a model with learned routing
(issue 20; docs/BENCHMARKS.md section 11): sotu-moe packed i4, scored token by
token (`ork ppl --decode`, each window's second half decoded one token at a
time) on its wiki text with the cache holding N experts, for each policy.
Prints a markdown table and writes an SVG plot.

  bench/expert_hit_curve.py --ork build/release/ork --testdata ../shared/testdata \
      --out docs/expert-cache-hit-rate.svg
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def ppl(ork, pack, text, mem_mib, policy, chunks):
    cmd = [ork, "ppl", "-m", pack, "-f", text, "-c", "128", "--chunks", str(chunks), "--decode", "-t", "1",
           "--mem", "%.4fM" % mem_mib, "--expert-policy", policy, "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def svg(curves, total, path):
    """curves: {label: [(slots, hit_rate)]}; a line per policy, slots on x, hit rate on y."""
    w, h, left, bottom, top, right = 560, 340, 60, 50, 20, 130
    pw, ph = w - left - right, h - top - bottom
    x = lambda s: left + pw * s / total
    y = lambda r: top + ph * (1 - r)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (w, h),
           '<rect width="100%" height="100%" fill="white"/>',
           '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (left, top + ph, left + pw, top + ph),
           '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (left, top, left, top + ph)]
    for i in range(0, 11, 2):
        r = i / 10
        out.append('<text x="%d" y="%.1f" text-anchor="end">%d %%</text>' % (left - 6, y(r) + 4, i * 10))
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (left, y(r), left + pw, y(r)))
    for s in range(0, total + 1, max(1, total // 8)):
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (x(s), top + ph + 16, s))
    out.append('<text x="%.1f" y="%d" text-anchor="middle">experts the cache holds (of %d)</text>' % (left + pw / 2, h - 10, total))
    out.append('<text x="14" y="%.1f" transform="rotate(-90 14 %.1f)" text-anchor="middle">hit rate</text>' % (top + ph / 2, top + ph / 2))
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    for i, (label, pts) in enumerate(sorted(curves.items())):
        c = colours[i % len(colours)]
        out.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' %
                   (c, " ".join("%.1f,%.1f" % (x(s), y(r)) for s, r in pts)))
        for s, r in pts:
            out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (x(s), y(r), c))
        out.append('<text x="%d" y="%d" fill="%s">%s</text>' % (left + pw + 10, top + 20 + 18 * i, c, label))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ork", default="build/release/ork")
    ap.add_argument("--testdata", default=os.environ.get("ORK_TESTDATA", "../shared/testdata"))
    ap.add_argument("--chunks", type=int, default=40)
    ap.add_argument("--out", default="docs/expert-cache-hit-rate.svg")
    a = ap.parse_args()
    model = os.path.join(a.testdata, "models/sotu-moe-f32.gguf")
    text = os.path.join(a.testdata, "fixtures/quality/sotu-moe/wiki-first150000-filtered.txt")
    with tempfile.TemporaryDirectory() as d:
        pack = os.path.join(d, "sotu-moe-i4.orkpack")
        subprocess.run([a.ork, "pack", model, "-o", pack, "--uniform", "i4"], check=True, capture_output=True)
        # The memory that is not the cache: a first run's budget less its slots.
        first, probe = None, 1.0
        while first is None:  # the least budget that makes a cache (below it: refused; above the model: none)
            probe += 0.25
            try:
                first = ppl(a.ork, pack, text, probe, "lru", 1).get("experts")
            except subprocess.CalledProcessError:
                pass
            if probe > 64:
                sys.exit("no budget between 1 and 64 MiB made an expert cache")
        slot = first["slot_bytes"] / (1 << 20)
        fixed = probe - first["slots"] * slot
        total = 32  # 4 layers of 8 experts
        curves = {}
        print("| experts held | " + " | ".join("%s hit rate | MB read" % p for p in ("lru", "lfu")) + " |")
        print("|---|" + "---|---|" * 2)
        rows = {}
        # (From about 27 the budget holds the whole model, which then loads without a cache.)
        for slots in (4, 6, 8, 10, 12, 16, 20, 24):
            for policy in ("lru", "lfu"):
                mem = fixed + (slots + 0.5) * slot
                for _ in range(4):  # the fixed part is known to a slot: correct by what was had
                    e = ppl(a.ork, pack, text, mem, policy, a.chunks)["experts"]
                    if e["slots"] == slots:
                        break
                    mem += (slots - e["slots"]) * slot
                if e["slots"] != slots:
                    sys.exit("asked for %d slots, got %d" % (slots, e["slots"]))
                rows.setdefault(slots, []).append("%.1f %% | %.1f" % (100 * e["hit_rate"], e["bytes_read"] / 1e6))
                curves.setdefault(policy, []).append((slots, e["hit_rate"]))
            print("| %d | %s |" % (slots, " | ".join(rows[slots])))
        svg(curves, total, a.out)
        print("\nplot: " + a.out)


if __name__ == "__main__":
    main()
