#!/usr/bin/env python3
"""ork serve end to end, as its clients use it: each case starts a server
on a free loopback port (the built-in model unless it says otherwise),
talks to it, and checks what comes back.

Usage: server_test.py --ork BIN --case NAME   (ctest runs each)
       server_test.py --ork BIN --list | --all
Exit 77 (skipped, with the reason) when something a case needs is missing.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILTIN_GGUF = os.path.join(ROOT, "data", "models", "stories260K-f32.gguf")


class Skip(Exception):
    pass


class Server:
    """`ork serve --port 0 ARGS`, its port read from its log."""

    def __init__(self, ork, args=(), env=None):
        self.proc = subprocess.Popen([ork, "serve", "--port", "0", *args], stderr=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, text=True, env=env)
        self.log = []
        deadline = time.time() + 60
        self.port = None
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.kill()
            raise AssertionError("the server did not start:\n" + "".join(self.log))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def conn(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=60):
        c = self.conn(timeout)
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        c.request(method, path, body=data, headers=headers or {"Content-Type": "application/json"})
        r = c.getresponse()
        raw = r.read()
        c.close()
        return r.status, raw, dict(r.getheaders())

    def json(self, method, path, body=None, headers=None, expect=200):
        status, raw, _ = self.request(method, path, body, headers)
        assert status == expect, f"{method} {path}: HTTP {status}, expected {expect}: {raw[:400]!r}"
        return json.loads(raw)

    def stream(self, path, body, headers=None):
        """The events of a streamed answer (the [DONE] marker last)."""
        c = self.conn()
        c.request("POST", path, body=json.dumps(dict(body, stream=True)).encode(),
                  headers=headers or {"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 200, f"stream {path}: HTTP {r.status}: {r.read()[:300]!r}"
        assert r.getheader("Content-Type", "").startswith("text/event-stream")
        events = []
        for block in r.read().decode().split("\n\n"):
            for line in block.split("\n"):
                if line.startswith("data: "):
                    data = line[6:]
                    events.append(data if data == "[DONE]" else json.loads(data))
        c.close()
        return events

    def metrics(self):
        _, raw, _ = self.request("GET", "/metrics")
        out = {}
        for line in raw.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.split()
                out[name] = float(value)
        return out

    def close(self):
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("the server did not stop on SIGTERM")
        assert rc == 0, f"the server exited with {rc}:\n" + "".join(self.log[-30:])
        assert not any("runtime error" in l or "AddressSanitizer" in l for l in self.log), "".join(self.log[-40:])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.close()
        else:
            self.proc.kill()


def stream_text(events, chat):
    assert events[-1] == "[DONE]", events[-3:]
    text = ""
    for e in events[:-1]:
        for c in e.get("choices", []):
            text += c["delta"].get("content", "") if chat else c.get("text", "")
    return text


def finish_reason(events):
    for e in events:
        if isinstance(e, dict):
            for c in e.get("choices", []):
                if c.get("finish_reason"):
                    return c["finish_reason"]
    return None


def ork_run_greedy(ork, prompt, n, model=None):
    cmd = [ork, "run", "-p", prompt, "-n", str(n), "--temp", "0"] + (["-m", model] if model else [])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.startswith(prompt), out[:100]
    return out[len(prompt):].rstrip("\n")


# ------------------------------------------------------------------ cases

def case_endpoints(ork):
    with Server(ork) as s:
        assert s.json("GET", "/health") == {"status": "ok"}
        models = s.json("GET", "/v1/models")
        assert models["object"] == "list" and models["data"][0]["id"] == "stories260K", models
        assert models["data"][0]["meta"]["n_ctx_slot"] == 512
        status, page, headers = s.request("GET", "/")
        assert status == 200 and b"<title>ork</title>" in page and headers["Content-Type"].startswith("text/html")
        m = s.metrics()
        assert m["ork_slots"] == 4 and m["ork_requests_processing"] == 0, m
        body = s.json("POST", "/v1/chat/completions",
                      {"model": "whatever-name", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8})
        assert body["object"] == "chat.completion" and body["model"] == "whatever-name", body
        choice = body["choices"][0]
        assert choice["message"]["role"] == "assistant" and choice["finish_reason"] in ("length", "stop"), body
        u = body["usage"]
        assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] and u["completion_tokens"] <= 8, u
        assert body["timings"]["predicted_n"] == u["completion_tokens"]
        m = s.metrics()
        assert m["ork_requests_total"] == 1 and m["ork_tokens_predicted_total"] == u["completion_tokens"], m
    with Server(ork, ["--no-webui"]) as s:
        status, raw, _ = s.request("GET", "/")
        assert status == 404 and json.loads(raw)["error"]["type"] == "invalid_request_error"


def case_greedy_equals_run(ork):
    prompt = "Once upon a time"
    want = ork_run_greedy(ork, prompt, 64)
    with Server(ork, ["--parallel", "2"]) as s:
        body = s.json("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 64, "temperature": 0})
        assert body["choices"][0]["text"] == want, (body["choices"][0]["text"], want)
        assert body["choices"][0]["finish_reason"] == "length"
        events = s.stream("/v1/completions", {"prompt": prompt, "max_tokens": 64, "temperature": 0,
                                              "stream_options": {"include_usage": True}})
        assert stream_text(events, chat=False) == want
        assert events[-2]["usage"]["completion_tokens"] == 64, events[-2]
        # The second request found its prompt in a slot's cache.
        assert events[-3]["timings"]["cache_n"] >= len(prompt.split()) - 1, events[-3]
        # A chat answers the same streamed and not.
        req = {"messages": [{"role": "system", "content": "You tell stories."},
                            {"role": "user", "content": "Tell me about a dog"}], "max_tokens": 40, "temperature": 0}
        whole = s.json("POST", "/v1/chat/completions", req)["choices"][0]["message"]["content"]
        events = s.stream("/v1/chat/completions", req)
        assert events[0]["choices"][0]["delta"].get("role") == "assistant"
        assert stream_text(events, chat=True) == whole and whole, (whole, events[:3])
        # Stop strings end the text before them, streamed or not.
        cut = want[: want.index("Lily")] if "Lily" in want else None
        if cut is not None:
            body = s.json("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 64, "temperature": 0, "stop": ["Lily"]})
            assert body["choices"][0]["text"] == cut and body["choices"][0]["finish_reason"] == "stop", body
            events = s.stream("/v1/completions", {"prompt": prompt, "max_tokens": 64, "temperature": 0, "stop": "Lily"})
            assert stream_text(events, chat=False) == cut and finish_reason(events) == "stop"
        # A seed makes sampling repeatable.
        a = s.json("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 32, "temperature": 1.0, "seed": 42})
        b = s.json("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 32, "temperature": 1.0, "seed": 42})
        assert a["choices"][0]["text"] == b["choices"][0]["text"]


def quantized_builtin(ork, tmp):
    """stories260K packed to uniform i8s: its batched matmuls are exact (one
    int8 activation scale per token, integer sums), so a sequence gives the
    same tokens batched with others as alone. (Not i8: its activations take a
    scale per 32 and its blocks sum in float, so a batch and a token alone
    agree only to rounding, which can flip a greedy choice.)"""
    out = os.path.join(tmp, "stories260K-i8s.orkpack")
    subprocess.run([ork, "pack", BUILTIN_GGUF, "--uniform", "i8s", "-o", out], capture_output=True, check=True, timeout=300)
    return out


def case_concurrent_clients(ork):
    """32 clients at once on 4 slots: every answer equals the same request
    served alone (continuous batching changes nothing but the speed)."""
    with tempfile.TemporaryDirectory() as tmp:
        pack = quantized_builtin(ork, tmp)
        words = ["dog", "cat", "bird", "tree", "ball", "boat", "sun", "cake"]
        reqs = [{"prompt": f"Once upon a time there was a {w}" + " and" * (i % 4), "max_tokens": 24 + (i % 8) * 3,
                 "temperature": 0} for i, w in enumerate(words * 4)]
        with Server(ork, ["-m", pack, "--parallel", "1"]) as s:
            alone = [s.json("POST", "/v1/completions", r)["choices"][0]["text"] for r in reqs[:8]]
        with Server(ork, ["-m", pack, "--parallel", "4", "--threads-http", "40"]) as s:
            results = [None] * len(reqs)
            errors = []

            def client(i):
                try:
                    if i % 2:
                        results[i] = stream_text(s.stream("/v1/completions", reqs[i]), chat=False)
                    else:
                        results[i] = s.json("POST", "/v1/completions", reqs[i])["choices"][0]["text"]
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(f"client {i}: {e!r}")

            threads = [threading.Thread(target=client, args=(i,)) for i in range(len(reqs))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=300)
            assert not errors, errors
            for i, r in enumerate(results):
                assert r == alone[i % 8], (i, r, alone[i % 8])
            m = s.metrics()
            assert m["ork_requests_total"] == len(reqs) and m["ork_requests_processing"] == 0, m
            # Steps were shared: far fewer batches than tokens generated.
            assert m["ork_batch_steps_total"] < m["ork_tokens_predicted_total"], m


def expect_error(s, body, status, param=None, path="/v1/chat/completions", headers=None, text=None):
    st, raw, _ = s.request("POST", path, body, headers)
    assert st == status, f"{body if isinstance(body, dict) else body[:80]!r}: HTTP {st}, expected {status}: {raw[:300]!r}"
    err = json.loads(raw)["error"]
    assert err["message"] and err["type"], err
    if param is not None:
        assert err["param"] == param, err
    if text is not None:
        assert text in err["message"], err
    return err


def case_bad_requests(ork):
    msgs = [{"role": "user", "content": "Hi"}]
    with Server(ork, ["--max-body", "1048576"]) as s:
        expect_error(s, b"{not json", 400, text="not valid JSON")
        expect_error(s, b'{"messages": [{"role": "user", "content": "Hi"}', 400, text="not valid JSON")  # truncated
        expect_error(s, b"[1, 2]", 400, text="JSON object")
        expect_error(s, b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', 400)  # invalid UTF-8
        expect_error(s, {}, 400, "messages")
        expect_error(s, {"messages": "Hi"}, 400, "messages")
        expect_error(s, {"messages": [{"content": "Hi"}]}, 400, "messages[0].role")
        expect_error(s, {"messages": [{"role": "user", "content": 7}]}, 400, "messages[0].content")
        expect_error(s, {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "messages[0].content")
        expect_error(s, {"messages": msgs, "temperature": "hot"}, 400, "temperature")
        expect_error(s, {"messages": msgs, "temperature": -1}, 400, "temperature")
        expect_error(s, {"messages": msgs, "top_p": 2}, 400, "top_p")
        expect_error(s, {"messages": msgs, "max_tokens": 1.5}, 400, "max_tokens")
        expect_error(s, {"messages": msgs, "max_tokens": 10**30}, 400)
        expect_error(s, {"messages": msgs, "n": 2}, 400, "n")
        expect_error(s, {"messages": msgs, "stop": [1]}, 400, "stop")
        expect_error(s, {"messages": msgs, "stream": "yes"}, 400, "stream")
        expect_error(s, {"messages": msgs, "presence_penalty": 1}, 400, "presence_penalty")
        expect_error(s, {"prompt": 5}, 400, "prompt", path="/v1/completions")
        expect_error(s, {"prompt": [1, 99999]}, 400, "prompt", path="/v1/completions")
        expect_error(s, {"prompt": "once " * 2000}, 400, "prompt", path="/v1/completions", text="context holds 512")
        # A body over --max-body: 413, in the same error shape.
        expect_error(s, b'{"prompt": "' + b"a" * (2 << 20) + b'"}', 413, path="/v1/completions")
        st, raw, _ = s.request("GET", "/no/such/route")
        assert st == 404 and "no route" in json.loads(raw)["error"]["message"]
        # A garbage request line, and a connection closed half-way: no harm.
        for junk in (b"GARBAGE\r\n\r\n", b"POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"pro"):
            with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
                sock.sendall(junk)
                sock.shutdown(socket.SHUT_WR)
                sock.recv(4096)
        assert s.json("GET", "/health") == {"status": "ok"}
        m = s.metrics()
        assert m["ork_requests_total"] == 0 and m["ork_http_errors_total"] >= 20, m
    # 100 MB with the default limit (16 MiB): refused, the server unharmed.
    with Server(ork) as s:
        with socket.create_connection(("127.0.0.1", s.port), timeout=60) as sock:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 104857600\r\n\r\n")
            chunk = b"a" * (1 << 20)
            try:
                for _ in range(100):
                    sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server may stop reading early; either is fine
            reply = b""
            try:
                while b"\r\n\r\n" not in reply:
                    data = sock.recv(65536)
                    if not data:
                        break
                    reply += data
            except ConnectionResetError:
                pass
            assert reply == b"" or reply.startswith(b"HTTP/1.1 413"), reply[:200]
        assert s.json("GET", "/health") == {"status": "ok"}
    # An API key: /v1 and /metrics need it, /health does not.
    with Server(ork, ["--api-key", "sekret"]) as s:
        err = expect_error(s, {"messages": msgs, "max_tokens": 2}, 401)
        assert err["type"] == "authentication_error"
        expect_error(s, {"messages": msgs, "max_tokens": 2}, 401, headers={"Authorization": "Bearer wrong",
                                                                           "Content-Type": "application/json"})
        st, _, _ = s.request("GET", "/v1/models")
        assert st == 401
        assert s.json("GET", "/health") == {"status": "ok"}
        body = s.json("POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 2},
                      headers={"Authorization": "Bearer sekret", "Content-Type": "application/json"})
        assert body["choices"][0]["message"]["role"] == "assistant"


def case_vanishing_and_slow_clients(ork):
    """Clients that leave mid-stream, or before a plain answer, free their
    slots; clients that send slowly are dropped after --timeout; neither
    holds up anyone else."""
    with Server(ork, ["--parallel", "2", "--timeout", "2", "-c", "8192"]) as s:
        # Streams that read a little and hang up, with long generations pending.
        for _ in range(6):
            sock = socket.create_connection(("127.0.0.1", s.port), timeout=30)
            body = json.dumps({"prompt": "Once upon a time", "max_tokens": 4000, "ignore_eos": True, "stream": True}).encode()
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            got = b""
            while b"data: " not in got:
                got += sock.recv(4096)
            sock.close()
        deadline = time.time() + 30
        while time.time() < deadline:
            m = s.metrics()
            if m["ork_requests_processing"] == 0 and m["ork_requests_cancelled_total"] == 6:
                break
            time.sleep(0.1)
        assert m["ork_requests_processing"] == 0 and m["ork_requests_cancelled_total"] == 6, m
        assert m["ork_tokens_predicted_total"] < 6 * 4000, m
        # Plain (not streamed) requests whose clients hang up once they have
        # sent them: cancelled as well, their slots freed long before 4000 tokens.
        before = m["ork_tokens_predicted_total"]
        for _ in range(4):
            sock = socket.create_connection(("127.0.0.1", s.port), timeout=30)
            body = json.dumps({"prompt": "Once upon a time", "max_tokens": 4000, "ignore_eos": True}).encode()
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            time.sleep(0.05)
            sock.close()
        deadline = time.time() + 30
        while time.time() < deadline:
            m = s.metrics()
            if m["ork_requests_processing"] == 0 and m["ork_requests_deferred"] == 0 and m["ork_requests_cancelled_total"] == 10:
                break
            time.sleep(0.1)
        assert m["ork_requests_processing"] == 0 and m["ork_requests_cancelled_total"] == 10, m
        assert m["ork_tokens_predicted_total"] - before < 2 * 4000, m
        # Slow clients: headers a byte at a time, a body that never comes.
        slow = []
        for _ in range(3):
            sock = socket.create_connection(("127.0.0.1", s.port), timeout=30)
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{\"prompt\"")
            slow.append(sock)
        t0 = time.time()
        body = s.json("POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 8})
        assert body["choices"][0]["text"] is not None and time.time() - t0 < 10
        for sock in slow:  # dropped by the server after --timeout
            sock.settimeout(10)
            try:
                data = sock.recv(4096)
            except (ConnectionResetError, socket.timeout):
                data = b""
            assert not data.startswith(b"HTTP/1.1 200"), data[:100]
            sock.close()
        assert s.json("GET", "/health") == {"status": "ok"}


def case_openai_client(ork):
    node = shutil.which("node")
    client = os.path.join(HERE, "node_modules", "openai")
    if not node or not os.path.isdir(client):
        raise Skip("the OpenAI npm client is not installed (scripts/install-deps.sh runs npm install in tests/server)")
    with Server(ork, ["--api-key", "test-key"]) as s:
        r = subprocess.run([node, os.path.join(HERE, "openai_client.mjs"), f"http://127.0.0.1:{s.port}/v1", "test-key",
                            ork_run_greedy(ork, "Once upon a time", 24)],
                           capture_output=True, text=True, timeout=120)
        sys.stdout.write(r.stdout)
        assert r.returncode == 0, r.stdout + r.stderr


class Browser:
    """Headless chromium driven over the DevTools protocol on a pipe
    (--remote-debugging-pipe: fds 3 and 4, JSON messages ended by NUL)."""

    def __init__(self, chromium, profile):
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        # The child reads fd 3 and writes fd 4.
        def setup():  # (through fresh copies: dup2 onto the same number keeps close-on-exec)
            r, w = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(r, 3)
            os.dup2(w, 4)
        self.proc = subprocess.Popen([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                                      "--remote-debugging-pipe",
                                      "--user-data-dir=" + profile, "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=setup,
                                     close_fds=False)  # (closing would happen after setup, and take fds 3 and 4)
        os.close(to_child_r)
        os.close(from_child_w)
        self.buf = b""
        self.next_id = 0
        self.session = None

    def call(self, method, params=None, session=True, timeout=60):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while time.time() < deadline:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:
                    assert "error" not in reply, (method, reply["error"])
                    return reply.get("result", {})
            self.buf += os.read(self.from_child, 1 << 20)
        raise AssertionError(f"chromium did not answer {method}")

    def open(self, url, width=1100, height=640):
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.call("Page.navigate", {"url": url})

    def eval(self, expression):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        return r.get("result", {}).get("value")

    def wait_for(self, expression, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = self.eval(expression)
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"the page never made {expression!r} true")

    def close(self):
        try:
            self.call("Browser.close", session=False, timeout=10)
        except (AssertionError, OSError):
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self.to_child)
        os.close(self.from_child)


def case_chat_page_in_chromium(ork):
    """The page at / in a real browser: a message sent, the reply streamed
    in with its speed line, a second turn, and the stop button cancelling a
    reply on the server."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise Skip("chromium is not installed (scripts/install-deps.sh installs it)")
    with Server(ork, ["--parallel", "1", "-c", "32768"]) as s, tempfile.TemporaryDirectory() as profile:
        b = Browser(chromium, profile)
        try:
            b.open(f"http://127.0.0.1:{s.port}/?say=Tell%20me%20a%20story")
            b.wait_for("document.body.dataset.replies === '1'")
            reply = b.eval("document.querySelector('.msg.assistant').innerText")
            assert re.search(r"\S{3,}.*\n\d+ tokens, [\d.]+ tok/s; prompt \d+ tokens", reply, re.S), reply
            assert "stories260K" in b.eval("document.getElementById('model').innerText")
            # A second turn: the first one's tokens come from the slot's cache.
            b.eval("document.getElementById('input').value = 'And then?'; document.getElementById('send').click(); 1")
            b.wait_for("document.body.dataset.replies === '2'")
            second = b.eval("document.getElementById('speed-4').innerText")
            cached = int(re.search(r"\((\d+) cached\)", second).group(1))
            assert cached > 20, second
            shot = os.environ.get("ORK_SCREENSHOT")
            if shot:  # docs/server-chat.png is made this way
                import base64
                with open(shot, "wb") as f:
                    f.write(base64.b64decode(b.call("Page.captureScreenshot", {"format": "png"})["data"]))
            # Stop: a long reply, cancelled from the page once it has begun. (A
            # sampled reply may end by itself before the click lands: then again.)
            b.eval("document.getElementById('max_tokens').value = '-1'; 1")
            stopped = 0
            for attempt in range(6):
                turn = 3 + attempt
                b.eval("document.getElementById('input').value = 'Tell me a very long story';"
                       "document.getElementById('send').click(); 1")
                b.wait_for(f"document.querySelectorAll('.msg.assistant').length === {turn} && "
                           f"document.querySelectorAll('.msg.assistant')[{turn - 1}].innerText.length > 0")
                b.eval("document.getElementById('stop').click(); 1")
                b.wait_for(f"document.body.dataset.replies === '{turn}'")
                if b.eval(f"document.getElementById('speed-{2 * turn}').innerText") == "stopped":
                    stopped += 1
                    break
            assert stopped, "no reply was still running when the stop button was pressed"
            deadline = time.time() + 20
            while s.metrics()["ork_requests_cancelled_total"] < 1 and time.time() < deadline:
                time.sleep(0.1)
            m = s.metrics()
            assert m["ork_requests_cancelled_total"] == 1 and m["ork_requests_processing"] == 0, m
        finally:
            b.close()


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ork", required=False)
    ap.add_argument("--case")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--all", action="store_true")
    a = ap.parse_args()
    if a.list:
        print(";".join(CASES))
        return 0
    names = list(CASES) if a.all else [a.case]
    for name in names:
        try:
            CASES[name](a.ork)
            print(f"server.{name}: ok")
        except Skip as e:
            print(f"server.{name}: skipped: {e}")
            if not a.all:
                return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
