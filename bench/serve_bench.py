#!/usr/bin/env python3
"""Serving speed, side by side (a measurement, not a test; no timing is
asserted). Repetition by repetition, interleaved, with the same threads:

  1. `ork bench` decode (tg) on the model, and the read-bandwidth probe it runs;
  2. `ork serve --parallel 4`: one stream alone, then 4 streams at once;
  3. `llama-server -np 4` (../shared/peers) on the peer's GGUF: the same.

Each stream is a /v1/completions request of a short prompt with
max_tokens N, ignore_eos, greedy. One stream's speed is the server's own
`timings.predicted_per_second`; 4 streams' is the tokens of all four over the
wall time from the first request sent to the last answer (prefill of a
5-token prompt included). Prints the medians with min-max and the ratios.

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
import threading
import time


def start(cmd, pattern, timeout=300):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
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


def measure_server(port, n):
    complete(port, 8, [None], 0)  # warm up
    one = [None]
    complete(port, n, one, 0)
    four, _ = streams(port, n, 4)
    return one[0][1], four


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
    ap.add_argument("--port", type=int, default=18123)
    a = ap.parse_args()
    peer = os.path.join(a.peers, "bin", "llama-server")
    if a.peer_model and not os.path.exists(peer):
        print(f"peer missing: {peer} (llama-server is not measured)")
        a.peer_model = None
    rows = {k: [] for k in ("bench_tg", "gbps", "ork_1", "ork_4", "peer_1", "peer_4")}
    for rep in range(a.reps):
        b = subprocess.run([a.ork, "bench", "-m", a.model, "-p", "16", "-n", str(a.n), "-r", "1", "-t", str(a.threads), "--json"],
                           capture_output=True, text=True, check=True)
        j = json.loads(b.stdout)
        rows["bench_tg"].append(j["tg"]["tok_s_median"])
        rows["gbps"].append(j["machine"]["read_gbps"])
        s = start([a.ork, "serve", "-m", a.model, "--port", str(a.port), "--parallel", "4", "-t", str(a.threads),
                   "-c", "4096"], r"listening on")
        try:
            one, four = measure_server(a.port, a.n)
        finally:
            s.terminate()
            s.wait()
        rows["ork_1"].append(one)
        rows["ork_4"].append(four)
        if a.peer_model:
            p = start([peer, "-m", a.peer_model, "--port", str(a.port + 1), "-np", "4", "-c", "4096", "-t", str(a.threads)],
                      r"listening|server is listening|HTTP server")
            try:
                wait_healthy(a.port + 1)
                one, four = measure_server(a.port + 1, a.n)
            finally:
                p.terminate()
                p.wait()
            rows["peer_1"].append(one)
            rows["peer_4"].append(four)
        print(f"rep {rep + 1}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in rows.items() if v), flush=True)
    print(f"\nmodel {a.model}, {a.threads} threads, {a.n} tokens per stream, {a.reps} reps (median, min-max)")
    print(f"read bandwidth probe (GB/s)          {fmt(rows['gbps'])}")
    print(f"ork bench tg (tok/s)                 {fmt(rows['bench_tg'])}")
    print(f"ork serve, 1 stream (tok/s)          {fmt(rows['ork_1'])}")
    print(f"ork serve, 4 streams (tok/s, total)  {fmt(rows['ork_4'])}")
    r1 = [x / y for x, y in zip(rows["ork_1"], rows["bench_tg"])]
    r4 = [x / y for x, y in zip(rows["ork_4"], rows["ork_1"])]
    print(f"ork: 1 stream / ork bench            {fmt(r1)}")
    print(f"ork: 4 streams / 1 stream            {fmt(r4)}")
    if rows["peer_1"]:
        print(f"llama-server, 1 stream (tok/s)       {fmt(rows['peer_1'])}")
        print(f"llama-server, 4 streams (tok/s)      {fmt(rows['peer_4'])}")
        print(f"llama-server: 4 streams / 1 stream   {fmt([x / y for x, y in zip(rows['peer_4'], rows['peer_1'])])}")
        print(f"ork / llama-server, 1 stream         {fmt([x / y for x, y in zip(rows['ork_1'], rows['peer_1'])])}")
        print(f"ork / llama-server, 4 streams        {fmt([x / y for x, y in zip(rows['ork_4'], rows['peer_4'])])}")


if __name__ == "__main__":
    main()
