#!/usr/bin/env python3
"""A flood of cheap requests, for comparison with flood.py's: does `serve` stay flat?

Writes requests in batches of 200 as fast as the server takes them, for SECONDS, and
drains every answer; prints the server's RSS every 15 s. Kinds:

  ping       `ping`
  list       `tools/list`
  bad        `tools/call` of read_session_lines on an unknown project (refused at once)
  cancelbad  the same, each followed at once by notifications/cancelled

Usage: tools/.venv/bin/python tools/attack/flood_cheap.py BIN WORKSPACE KIND SECONDS
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time


def main() -> int:
    binary, ws, kind, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    server = subprocess.Popen([binary, "--workspace", ws, "serve"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def rss_mb() -> int:
        with open(f"/proc/{server.pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS"):
                    return int(line.split()[1]) // 1024
        return 0

    answered = [0]

    def drain() -> None:
        for _ in server.stdout:
            answered[0] += 1

    threading.Thread(target=drain, daemon=True).start()
    out = server.stdin
    out.write(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
              b'"capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}\n'
              b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    out.flush()
    bad = {"name": "read_session_lines",
           "arguments": {"project_key": "nope", "session_ref": "S0001", "start_line": 1, "end_line": 1}}
    start = last = time.time()
    n = 1
    while time.time() - start < seconds:
        batch = []
        for _ in range(200):
            if kind == "ping":
                batch.append({"jsonrpc": "2.0", "id": n, "method": "ping"})
            elif kind == "list":
                batch.append({"jsonrpc": "2.0", "id": n, "method": "tools/list"})
            else:
                batch.append({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": bad})
                if kind == "cancelbad":
                    batch.append({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": n}})
            n += 1
        out.write(("\n".join(json.dumps(m) for m in batch) + "\n").encode())
        out.flush()
        if time.time() - last > 15:
            last = time.time()
            print(f"t={last - start:.0f}s sent={n} answered={answered[0]} rss={rss_mb()}MB", flush=True)
    out.close()
    code = server.wait()
    print(f"exit {code}; answered {answered[0]}")
    return 1 if code else 0


if __name__ == "__main__":
    sys.exit(main())
