#!/usr/bin/env python3
"""ork chat on a terminal (a pseudo-terminal, as a user types): a
conversation whose second turn reuses the cache, /save /clear /load,
Ctrl-C stopping a reply and the chat going on, Ctrl-C at the prompt and
Ctrl-D leaving with exit code 0.

Usage: chat_pty.py ORK_BINARY
"""
import os
import pty
import re
import select
import signal
import sys
import tempfile
import time


class Term:
    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(argv[0], argv)
        self.out = ""

    def expect(self, pattern, timeout=60):
        deadline = time.time() + timeout
        rx = re.compile(pattern, re.S)
        while time.time() < deadline:
            m = rx.search(self.out)
            if m:
                self.out = self.out[m.end():]
                return m
            r, _, _ = select.select([self.fd], [], [], 0.2)
            if r:
                try:
                    self.out += os.read(self.fd, 65536).decode("utf-8", "replace")
                except OSError:
                    break
        raise AssertionError(f"never saw {pattern!r}; the terminal shows:\n{self.out[-2000:]}")

    def send(self, text):
        os.write(self.fd, text.encode())

    def wait(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            # Drain what it prints (never a blocking read: it may print nothing).
            if select.select([self.fd], [], [], 0.05)[0]:
                try:
                    os.read(self.fd, 65536)
                except OSError:
                    pass
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError("ork chat did not exit")


def main():
    ork = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        t = Term([ork, "chat", "-n", "24", "--temp", "0", "-sys", "You tell stories."])
        t.expect(r"/help lists the commands")
        t.expect(r"> ")
        t.send("Tell me a story about a cat\r")
        first = t.expect(r"\[24 tokens, [\d.]+ tok/s; prompt: (\d+) new tokens, 0 cached\]")
        t.expect(r"> ")
        t.send("And then?\r")
        second = t.expect(r"\[24 tokens, [\d.]+ tok/s; prompt: (\d+) new tokens, (\d+) cached\]")
        assert int(second.group(2)) > int(first.group(1)) // 2, (first.group(0), second.group(0))
        t.expect(r"> ")
        save = os.path.join(tmp, "talk")
        t.send(f"/save {save}\r")
        t.expect(r"\[saved to ")
        assert os.path.exists(save) and os.path.exists(save + ".json")
        t.send("/clear\r")
        t.expect(r"\[the conversation is cleared\]")
        t.send(f"/load {save}\r")
        t.expect(r"\[loaded ")
        t.send("What next?\r")
        third = t.expect(r"\[24 tokens, [\d.]+ tok/s; prompt: (\d+) new tokens, (\d+) cached\]")
        assert int(third.group(2)) > int(second.group(1)), third.group(0)  # the loaded cache was used
        t.send("/load /no/such/file\r")
        t.expect(r"cannot read")
        t.send("/nonsense\r")
        t.expect(r"unknown command /nonsense")
        t.send("\x04")  # Ctrl-D at the prompt
        assert t.wait() == 0

        # Ctrl-C in a reply stops it; the chat goes on; Ctrl-C at the prompt leaves.
        t = Term([ork, "chat", "-c", "32768", "--ignore-eos", "--temp", "0"])
        t.expect(r"> ")
        t.send("Tell me a story\r")
        t.expect(r"\S")  # the reply has begun
        time.sleep(0.2)
        t.send("\x03")
        stopped = t.expect(r"\[stopped: (\d+) tokens")
        assert int(stopped.group(1)) < 32000, stopped.group(0)
        t.expect(r"> ")
        t.send("\x03")
        assert t.wait() == 0
    print("chat on a terminal: turns with the cache kept, /save /clear /load, Ctrl-C, Ctrl-D: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
