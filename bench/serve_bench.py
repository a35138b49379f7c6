#!/usr/bin/env python3
"""Serving speed, side by side (a measurement, not a test; no timing is
asserted). Repetition by repetition, interleaved, with the same threads:

  1. `ork bench` decode (tg) on the model, and the read-bandwidth probe it runs;
  2. `ork serve --parallel 4`: one stream alone, then 4 streams at once;
  3. `llama-server -np 4` (../shared/peers) on the peer's GGUF: the same
     (the peer build lacks libmtmd.so.0; bench/peer_mtmd_stub.c stands in
     for it, text-only).

Each stream is a /v1/completions request of a short prompt with
max_tokens N, ignore_eos, greedy. One stream's speed is the server's own
`timings.predicted_per_second`; 4 streams' is the tokens of all four over the
wall time from the first request sent to the last answer (prefill of a
5-token prompt included). One stream and four alternate on one server
(--pairs times): the 4/1 ratio is taken within each pair, as the bandwidth
drifts. Prints the medians with min-max and the ratios.

Usage: bench/serve_bench.py --ork build/release/ork --model M.orkpack \\
         [--peer-model M-q4_0.gguf] [--peers ../shared/peers] [-t 2] [-n 64] [-r 3]
"""
import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time


def start(cmd, pattern, timeout=300, env=None):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + timeout
    log = []
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        log.append(line)
        if re.search(pattern, line):
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc
    proc.kill()
    raise SystemExit("server did not start: " + " ".join(cmd) + "\n" + "".join(log[-20:]))


def wait_healthy(port, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"port {port} never became healthy")


def complete(port, n, out, i):
    body = {"prompt": "Once upon a time", "max_tokens": n, "n_predict": n, "ignore_eos": True, "temperature": 0,
            "cache_prompt": False}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = json.loads(c.getresponse().read())
    out[i] = (r["usage"]["completion_tokens"], r.get("timings", {}).get("predicted_per_second", 0.0))


def streams(port, n, k):
    out = [None] * k
    t0 = time.time()
    threads = [threading.Thread(target=complete, args=(port, n, out, i)) for i in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    return sum(o[0] for o in out) / wall, out


def measure_server(port, n, pairs):
    """`pairs` alternations of one stream and four, on one server (the
    bandwidth drifts: a ratio is taken within each pair)."""
    complete(port, 8, [None], 0)  # warm up
    ones, fours = [], []
    for _ in range(pairs):
        one = [None]
        complete(port, n, one, 0)
        ones.append(one[0][1])
        fours.append(streams(port, n, 4)[0])
    return ones, fours


def mtmd_stand_in():
    """The environment for a llama-server that cannot load libmtmd.so.0: the
    stand-in of bench/peer_mtmd_stub.c compiled into a temporary directory."""
    out = tempfile.mkdtemp(prefix="ork-mtmd-")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer_mtmd_stub.c")
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-Wl,-soname,libmtmd.so.0", "-o", os.path.join(out, "libmtmd.so.0"), src],
                   check=True)
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = out + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def fmt(xs):
    return f"{statistics.median(xs):7.2f} ({min(xs):.2f}-{max(xs):.2f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ork", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--peer-model")
    ap.add_argument("--peers", default=os.environ.get("ORK_PEERS", "../shared/peers"))
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=3, help="one-stream / four-stream alternations per server")
    ap.add_argument("--port", type=int, default=18123)
    a = ap.parse_args()
    peer = os.path.join(a.peers, "bin", "llama-server")
    peer_bench = os.path.join(a.peers, "bin", "llama-bench")
    peer_env = None
    if a.peer_model:
        if not os.path.exists(peer):
            print(f"peer missing: {peer} (llama-server is not measured)")
            peer = None
        else:
            probe = subprocess.run([peer, "--version"], capture_output=True, text=True)
            if probe.returncode != 0 and "libmtmd.so.0" in probe.stderr:
                peer_env = mtmd_stand_in()
                print("llama-server lacks libmtmd.so.0 (the peer build does not ship it): running it text-only "
                      "against bench/peer_mtmd_stub.c, whose multimodal entry points abort if reached")
                probe = subprocess.run([peer, "--version"], capture_output=True, text=True, env=peer_env)
            if probe.returncode != 0:
                print(f"peer broken: {peer} --version exits {probe.returncode}: {probe.stderr.strip()[:300]}"
                      " (llama-server is not measured)")
                peer = None
    rows = {k: [] for k in ("bench_tg", "gbps", "ork_1", "ork_4", "ork_4_over_1", "ork_1_over_bench", "peer_bench_tg",
                            "peer_1", "peer_4")}
    for rep in range(a.reps):
        b = subprocess.run([a.ork, "bench", "-m", a.model, "-p", "16", "-n", str(a.n), "-r", "1", "-t", str(a.threads), "--json"],
                           capture_output=True, text=True, check=True)
        j = json.loads(b.stdout)
        rows["bench_tg"].append(j["tg"]["tok_s_median"])
        rows["gbps"].append(j["machine"]["read_gbps"])
        s = start([a.ork, "serve", "-m", a.model, "--port", str(a.port), "--parallel", "4", "-t", str(a.threads),
                   "-c", "4096"], r"listening on")
        try:
            ones, fours = measure_server(a.port, a.n, a.pairs)
        finally:
            s.terminate()
            s.wait()
        rows["ork_1"] += ones
        rows["ork_4"] += fours
        rows["ork_4_over_1"] += [f / o for f, o in zip(fours, ones)]
        rows["ork_1_over_bench"] += [o / rows["bench_tg"][-1] for o in ones]
        if a.peer_model and os.path.exists(peer_bench):
            pb = subprocess.run([peer_bench, "-m", a.peer_model, "-p", "0", "-n", str(a.n), "-t", str(a.threads), "-r", "1",
                                 "-o", "json"], capture_output=True, text=True)
            if pb.returncode == 0:
                rows["peer_bench_tg"].append(json.loads(pb.stdout)[0]["avg_ts"])
            else:
                print(f"llama-bench failed: {pb.stderr.strip()[:300]}")
        if a.peer_model and peer:
            p = start([peer, "-m", a.peer_model, "--port", str(a.port + 1), "-np", "4", "-c", "4096", "-t", str(a.threads)],
                      r"listening|server is listening|HTTP server", env=peer_env)
            try:
                wait_healthy(a.port + 1)
                ones, fours = measure_server(a.port + 1, a.n, a.pairs)
            finally:
                p.terminate()
                p.wait()
            rows["peer_1"] += ones
            rows["peer_4"] += fours
        print(f"rep {rep + 1}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in rows.items() if v), flush=True)
    print(f"\nmodel {a.model}, {a.threads} threads, {a.n} tokens per stream, {a.reps} reps x {a.pairs} pairs "
          "(median, min-max)")
    print(f"read bandwidth probe (GB/s)          {fmt(rows['gbps'])}")
    print(f"ork bench tg (tok/s)                 {fmt(rows['bench_tg'])}")
    print(f"ork serve, 1 stream (tok/s)          {fmt(rows['ork_1'])}")
    print(f"ork serve, 4 streams (tok/s, total)  {fmt(rows['ork_4'])}")
    r1 = rows["ork_1_over_bench"]
    r4 = rows["ork_4_over_1"]
    print(f"ork: 1 stream / ork bench            {fmt(r1)}")
    print(f"ork: 4 streams / 1 stream            {fmt(r4)}")
    if rows["peer_bench_tg"]:
        print(f"llama-bench tg, peer model (tok/s)   {fmt(rows['peer_bench_tg'])}")
        print(f"ork bench / llama-bench tg           {fmt([x / y for x, y in zip(rows['bench_tg'], rows['peer_bench_tg'])])}")
        per_rep = [statistics.median(rows["ork_1"][i * a.pairs:(i + 1) * a.pairs]) for i in range(len(rows["peer_bench_tg"]))]
        print(f"ork serve 1 stream / llama-bench tg  {fmt([x / y for x, y in zip(per_rep, rows['peer_bench_tg'])])}")
    if rows["peer_1"]:
        print(f"llama-server, 1 stream (tok/s)       {fmt(rows['peer_1'])}")
        print(f"llama-server, 4 streams (tok/s)      {fmt(rows['peer_4'])}")
        print(f"llama-server: 4 streams / 1 stream   {fmt([x / y for x, y in zip(rows['peer_4'], rows['peer_1'])])}")
        print(f"ork / llama-server, 1 stream         {fmt([x / y for x, y in zip(rows['ork_1'], rows['peer_1'])])}")
        print(f"ork / llama-server, 4 streams        {fmt([x / y for x, y in zip(rows['ork_4'], rows['peer_4'])])}")


if __name__ == "__main__":
    main()
