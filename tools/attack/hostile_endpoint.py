#!/usr/bin/env python3
"""`tool_output` against hostile OpenAI-compatible endpoints, all on 127.0.0.1.

One threaded HTTP server plays every endpoint; the first path segment picks the
behaviour (`http://127.0.0.1:PORT/<mode>/v1` is the base URL, so `/<mode>/props` is the
context probe and `/<mode>/v1/chat/completions` the chat). For each case one `serve` is
started on a generated workspace with that base URL, calls `tool_output` on a real handle
(from `dump handles`), and the script records how long the answer took, its fallback
reason, how many requests the endpoint saw, and whether any secret shows in an answer or
in stderr (RUST_LOG=trace for the credentials case).

Every case is bounded in time; every process started is ended.

Usage: tools/.venv/bin/python tools/attack/hostile_endpoint.py --bin target/release/evidence-store [--only NAME ...]
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Raw, arguments, cli, indexes, make_workspace, parse, rss_mb  # noqa: E402

NONCE = re.compile(r"<ai-agent-([0-9a-f]+)-FINAL format=")
SECRET_PW = "pw-S3CRETXYZZY"
SECRET_KEY = "sk-KEYSECRETPLUGH"


class State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.hits: dict[str, int] = {}
        self.open_conns = 0
        self.peak_conns = 0
        self.auth_seen: list[tuple[str, str]] = []  # (host header, authorization)
        self.bodies: dict[str, int] = {}

    def hit(self, key: str) -> None:
        with self.lock:
            self.hits[key] = self.hits.get(key, 0) + 1


STATE = State()
STOP = threading.Event()


def final(system: str, text: str) -> bytes:
    m = NONCE.search(system)
    nonce = m.group(1) if m else "0"
    content = f'<ai-agent-{nonce}-FINAL format="text">{text}</ai-agent-{nonce}-FINAL>'
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": content},
                                    "finish_reason": "stop"}]}).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):  # quiet
        pass

    def _parts(self):
        if "?" in self.path:
            STATE.hit(f"query seen: {self.path[:120]}")
        parts = self.path.split("?")[0].split("/")
        mode = parts[1] if len(parts) > 1 else ""
        tail = "/".join(parts[2:])
        return mode, tail

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _send(self, code: int, body: bytes, ctype: str = "application/json", extra: dict | None = None):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _hold(self, seconds: float = 600):
        end = time.time() + seconds
        while time.time() < end and not STOP.is_set():
            # Notice the client going away: a dropped request closes the socket.
            try:
                self.connection.settimeout(0.2)
                if self.connection.recv(1, socket.MSG_PEEK) == b"":
                    return
            except socket.timeout:
                continue
            except OSError:
                return

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def _dispatch(self, method: str):
        with STATE.lock:
            STATE.open_conns += 1
            STATE.peak_conns = max(STATE.peak_conns, STATE.open_conns)
            STATE.auth_seen.append((self.headers.get("Host", ""), self.headers.get("Authorization", "")))
        try:
            self._route(method)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with STATE.lock:
                STATE.open_conns -= 1

    def _route(self, method: str):
        mode, tail = self._parts()
        body = self._body()
        STATE.hit(f"{mode} {tail}")
        with STATE.lock:
            STATE.bodies[mode] = STATE.bodies.get(mode, 0) + len(body)
        if tail == "props":
            return self._props(mode)
        if tail == "api/show":
            return self._send(404, b"{}")
        if tail != "v1/chat/completions":
            return self._send(404, b"{}")
        try:
            req = json.loads(body)
            system = req["messages"][0]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            system = ""
        if mode == "ctx_once":
            # One context-size error stating a context of 1 token, then a healthy endpoint.
            with STATE.lock:
                first = not STATE.hits.get("ctx_once told", 0)
                STATE.hits["ctx_once told"] = 1
            if first:
                return self._ctx_error("ctx_one")
            return self._send(200, final(system, "found 3 errors"))
        if mode in ("ok", "creds") or mode.startswith("ctx_") or mode.startswith("props_"):
            if mode.startswith("ctx_") and mode != "ctx_ok":
                return self._ctx_error(mode)
            return self._send(200, final(system, "found 3 errors"))
        if mode == "hang":
            return self._hold()
        if mode == "slow_headers":
            self._hold(3600)
            return
        if mode == "trickle":
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            for _ in range(3600):
                if STOP.is_set():
                    return
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.5)
            return
        if mode in ("huge_cl", "huge_chunked"):
            self.send_response(200)
            if mode == "huge_cl":
                self.send_header("Content-Length", str(2 << 30))
            else:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            block = b"x" * (1 << 20)
            for _ in range(512):
                if STOP.is_set():
                    return
                if mode == "huge_cl":
                    self.wfile.write(block)
                else:
                    self.wfile.write(b"%x\r\n" % len(block) + block + b"\r\n")
            return
        if mode == "huge_lying_cl":  # says 10 bytes, sends 64 MiB
            self.send_response(200)
            self.send_header("Content-Length", "10")
            self.end_headers()
            self.wfile.write(b'{"a":1}   ' + b"y" * (64 << 20))
            return
        if mode == "chunk_bomb":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"FFFFFFFFFFFFFFFF\r\n" + b"z" * 65536)
            self._hold(30)
            return
        if mode == "chunk_many":  # millions of 1-byte chunks
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            piece = b"1\r\nx\r\n" * 100000
            for _ in range(100):
                if STOP.is_set():
                    return
                self.wfile.write(piece)
            self.wfile.write(b"0\r\n\r\n")
            return
        if mode == "redirect_other":
            port2 = self.server.other_port  # type: ignore[attr-defined]
            return self._send(307, b"", extra={"Location": f"http://127.0.0.2:{port2}/ok/v1/chat/completions"})
        if mode == "redirect_loop":
            return self._send(302, b"", extra={"Location": self.path})
        if mode == "invalid_utf8":
            return self._send(200, b"\xff\xfe\x80" * 100 + b"\x01" * 300)
        if mode == "ctrl_json":
            return self._send(200, b"\x01" * 400)
        if mode == "err_ctrl":
            return self._send(500, b"\x01\x02\x1b[31m" * 60)
        if mode == "final_ctrl":  # a final report made of control characters
            return self._send(200, final(system, "\x01\x1b" * 20000))
        if mode == "no_final_ctrl":  # no wrapper; the reason quotes the answer
            return self._send(200, json.dumps({"choices": [{"message": {"content": "\x01" * 5000}}]}).encode())
        if mode == "reset":
            # A reset: linger 0, then the descriptor itself closed (the handler's file
            # objects would keep a plain close() from closing it).
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            os.close(self.connection.detach())
            self.close_connection = True
            return
        return self._send(500, b"unknown mode")

    def _props(self, mode: str):
        values = {
            "props_one": 1, "props_huge": 10**12, "props_neg": -5, "props_str": "8192", "props_float": 1e300,
            "props_u64": 2**64 + 5, "props_zero": 0, "props_max": 2**64 - 1,
        }
        if mode == "props_slow":
            self._hold(30)
            return
        if mode in values:
            return self._send(200, json.dumps({"default_generation_settings": {"n_ctx": values[mode]}}).encode())
        return self._send(404, b"{}")

    def _ctx_error(self, mode: str):
        numbers = {
            "ctx_forever": (9760, 8192), "ctx_zero": (0, 0), "ctx_one": (1, 1), "ctx_big": (2**63, 2**63),
            "ctx_tiny_prompt": (1, 10**9), "ctx_huge_prompt": (10**15, 10), "ctx_nonum": (None, None),
        }
        n_prompt, n_ctx = numbers.get(mode, (9760, 8192))
        err = {"code": 400, "message": "the request exceeds the available context size, try increasing it",
               "type": "exceed_context_size_error"}
        if n_prompt is not None:
            err["n_prompt_tokens"] = n_prompt
            err["n_ctx"] = n_ctx
        return self._send(400, json.dumps({"error": err}).encode())


def start_server(host: str = "127.0.0.1") -> ThreadingHTTPServer:
    ThreadingHTTPServer.request_queue_size = 64
    srv = ThreadingHTTPServer((host, 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def biggest_handle(binary: Path, ws: Path) -> str:
    best = (0, "")
    for project, rows in indexes(ws).items():
        for row in rows:
            done = cli(binary, ws, "dump", "handles", project, row["session_ref"], "--json", timeout=120)
            if done.returncode != 0:
                continue
            for h in json.loads(done.stdout):
                size = int(h.get("bytes") or h.get("size") or 0)
                if size >= best[0]:
                    best = (size, h["handle"])
    return best[1]


class Case:
    def __init__(self, name: str, mode: str, tool_mode: str = "full-chunked", env: dict | None = None,
                 expect: str = "", calls: int = 1, budget: float = 40.0, cap: int | None = None,
                 url: str | None = None, log: str = "info"):
        self.name, self.mode, self.tool_mode, self.env = name, mode, tool_mode, env or {}
        self.expect, self.calls, self.budget, self.cap, self.url, self.log = expect, calls, budget, cap, url, log


def run_case(binary: Path, ws: Path, handle: str, port: int, case: Case, work: Path) -> list[str]:
    """Runs one case; returns failures (empty when it held)."""
    fails: list[str] = []
    url = case.url or f"http://127.0.0.1:{port}/{case.mode}/v1"
    env = {"EVIDENCE_STORE_MODEL_URL": url, "EVIDENCE_STORE_MODEL": "m",
           "EVIDENCE_STORE_MODEL_TIMEOUT_SECS": "5", "EVIDENCE_STORE_TOOL_OUTPUT_DEADLINE_SECS": "20",
           "RUST_LOG": case.log, **case.env}
    if case.cap:
        env["EVIDENCE_STORE_TOOL_OUTPUT_MAX_BYTES"] = str(case.cap)
    errpath = work / f"{case.name}.stderr"
    with open(errpath, "wb") as err:
        raw = Raw(binary, ws, env=env, stderr=err)
        try:
            try:
                started = raw.initialize()
            except (BrokenPipeError, OSError):
                started = None
            if started is None:
                raw.proc.wait(10)
                print(f"  [{case.name}] serve did not start (exit {raw.proc.returncode}): "
                      f"{errpath.read_text(errors='replace').strip()[-300:]!r}")
                calls = 0
            else:
                calls = case.calls
            before = dict(STATE.hits)
            peak = 0
            for i in range(calls):
                t0 = time.time()
                got = raw.tool("tool_output", {"handle": handle, "extract": "every error", "mode": case.tool_mode},
                               timeout=case.budget + 30)
                took = time.time() - t0
                peak = max(peak, rss_mb(raw.proc.pid)[1])
                if got is None:
                    fails.append(f"{case.name}: no answer within {case.budget + 30:.0f} s")
                    break
                text = got[1]
                reason = next((l for l in text.splitlines() if "WARNING" in l), "")
                first = reason or text.splitlines()[0] if text else ""
                print(f"  [{case.name}] call {i + 1}: {took:.1f} s, {len(text.encode())} bytes, "
                      f"isError={got[0]}: {first[:300]!r}")
                if took > case.budget:
                    fails.append(f"{case.name}: answered after {took:.1f} s (budget {case.budget:.0f} s)")
                if case.expect and case.expect not in text:
                    fails.append(f"{case.name}: answer lacks {case.expect!r}: {first[:200]!r}")
                limit = case.cap or 12288
                if len(text.encode()) > limit:
                    fails.append(f"{case.name}: answer of {len(text.encode())} bytes is over the cap {limit}")
                for secret in secrets():
                    if secret in text:
                        fails.append(f"{case.name}: secret {secret[:6]}… in an answer")
            ping = raw.call("tools/call", {"name": "prompt_diary_ping", "arguments": {}}, timeout=20) if calls else True
            if ping is None:
                fails.append(f"{case.name}: ping unanswered after the calls")
            hits = {k: v - before.get(k, 0) for k, v in STATE.hits.items() if v != before.get(k, 0)}
            print(f"  [{case.name}] endpoint saw {hits}; serve VmHWM {peak} MB")
        finally:
            code = raw.close(timeout=30)
            if code is None:
                fails.append(f"{case.name}: serve did not exit within 30 s of EOF")
    log = errpath.read_bytes().decode("utf-8", "replace")
    for secret in secrets():
        if secret in log:
            line = next(l for l in log.splitlines() if secret in l)
            fails.append(f"{case.name}: secret {secret[:6]}… in stderr: {line[:300]!r}")
    if "panicked" in log:
        fails.append(f"{case.name}: panic: {log[log.index('panicked') - 100:][:400]!r}")
    return fails


def secrets() -> list[str]:
    b64 = base64.b64encode(f"user:{SECRET_PW}".encode()).decode()
    return [SECRET_PW, SECRET_KEY, b64]


def cases(port: int) -> list[Case]:
    t = "EVIDENCE_STORE_MODEL_TIMEOUT_SECS"
    return [
        Case("ok", "ok", expect="found 3 errors", budget=10),
        Case("slow_headers", "slow_headers", expect="timed out after 5 s", budget=12),
        Case("trickle", "trickle", expect="timed out after 5 s", budget=12),
        Case("huge_cl", "huge_cl", budget=15),
        Case("huge_chunked", "huge_chunked", budget=15),
        Case("huge_lying_cl", "huge_lying_cl", budget=15),
        Case("chunk_bomb", "chunk_bomb", budget=15),
        Case("chunk_many", "chunk_many", budget=15),
        Case("reset", "reset", budget=10),
        Case("redirect_other", "redirect_other", budget=10, env={"ES_ATTACK_KEY": SECRET_KEY,
                                                               "EVIDENCE_STORE_MODEL_API_KEY_ENV": "ES_ATTACK_KEY"}),
        Case("redirect_loop", "redirect_loop", budget=10),
        Case("invalid_utf8", "invalid_utf8", budget=10),
        Case("ctrl_json_small_cap", "ctrl_json", budget=10, cap=1024),
        Case("err_ctrl_small_cap", "err_ctrl", budget=10, cap=1024),
        Case("no_final_ctrl_small_cap", "no_final_ctrl", budget=10, cap=1024),
        Case("final_ctrl", "final_ctrl", budget=10, cap=1024),
        Case("creds_trace", "creds", budget=10, log="trace",
             url=f"http://user:{SECRET_PW}@127.0.0.1:{port}/creds/v1",
             env={"ES_ATTACK_KEY": SECRET_KEY}),
        Case("creds_key_trace", "creds", budget=10, log="trace",
             env={"ES_ATTACK_KEY": SECRET_KEY, "EVIDENCE_STORE_MODEL_API_KEY_ENV": "ES_ATTACK_KEY"}),
        Case("creds_refused", "creds", budget=10, log="debug",
             url=f"http://user:{SECRET_PW}@127.0.0.1:1/creds/v1"),
        Case("creds_bad_url", "creds", budget=10, log="debug",
             url=f"http://user:{SECRET_PW}@127.0.0.1:99999/creds/v1"),
        Case("creds_bad_url2", "creds", budget=10, log="debug",
             url=f"http://user:{SECRET_PW}@[::1/creds/v1"),
        *[Case(m, m, budget=25) for m in ("props_one", "props_huge", "props_neg", "props_str", "props_float",
                                         "props_u64", "props_zero", "props_max", "props_slow")],
        Case("props_one_auto", "props_one", tool_mode="auto", budget=25),
        Case("props_huge_auto", "props_huge", tool_mode="auto", budget=25),
        *[Case(m, m, budget=25) for m in ("ctx_forever", "ctx_zero", "ctx_one", "ctx_big", "ctx_tiny_prompt",
                                         "ctx_huge_prompt", "ctx_nonum")],
        Case("ctx_once", "ctx_once", budget=25, calls=3),
        # A base URL with a query (Azure's `?api-version=`, a `?key=` secret): where do the
        # requests go, and is the query logged?
        Case("query_url", "ok", budget=10, expect="found 3 errors", log="info",
             url=f"http://127.0.0.1:{port}/ok/v1?api-version=2024-06-01&key={SECRET_KEY}"),
        Case("deadline_huge", "hang", budget=12, env={"EVIDENCE_STORE_TOOL_OUTPUT_DEADLINE_SECS": str(2**64 - 1)},
             expect="timed out"),
        Case("deadline_huge_timeout_huge", "ok", budget=12,
             env={"EVIDENCE_STORE_TOOL_OUTPUT_DEADLINE_SECS": str(2**64 - 1), t: str(2**64 - 1)}),
        Case("deadline_1", "hang", budget=8, env={"EVIDENCE_STORE_TOOL_OUTPUT_DEADLINE_SECS": "1", t: "600"},
             expect="deadline of 1 s reached"),
        Case("timeout_0", "hang", budget=8, env={t: "0"}),
    ]


def hang_env(port: int, deadline: int = 600, log: str = "warn") -> dict:
    """serve's environment with its model at the endpoint that never answers."""
    return {"EVIDENCE_STORE_MODEL_URL": f"http://127.0.0.1:{port}/hang/v1", "EVIDENCE_STORE_MODEL": "m",
            "EVIDENCE_STORE_MODEL_TIMEOUT_SECS": "600", "EVIDENCE_STORE_TOOL_OUTPUT_DEADLINE_SECS": str(deadline),
            "RUST_LOG": log}


@contextmanager
def serving(binary: Path, ws: Path, env: dict, stderr: Path, close_timeout: float,
            fails: list[str] | None = None, name: str = "") -> Iterator[Raw]:
    """An initialized serve with `env`, its stderr in the file `stderr`, closed at the end; one
    that does not exit within `close_timeout` s of EOF is a failure in `fails` (when given)."""
    with open(stderr, "wb") as err:
        raw = Raw(binary, ws, env=env, stderr=err)
        try:
            raw.initialize()
            yield raw
        finally:
            if raw.close(timeout=close_timeout) is None and fails is not None:
                fails.append(f"{name}: serve did not exit within {close_timeout:.0f} s of EOF")


def model_call(raw: Raw, handle: str) -> int:
    """Sends one tool_output call that goes to the model; its request id."""
    return raw.request("tools/call", {"name": "tool_output",
                                      "arguments": {"handle": handle, "extract": "x", "mode": "full-chunked"}})


def open_conns() -> int:
    with STATE.lock:
        return STATE.open_conns


def wait_open(n: int, seconds: float) -> None:
    """Waits, at most `seconds`, until `n` requests are open at the endpoint."""
    end = time.time() + seconds
    while time.time() < end and open_conns() < n:
        time.sleep(0.05)


def ping(raw: Raw, timeout: float = 60) -> dict | None:
    return raw.call("tools/call", {"name": "prompt_diary_ping", "arguments": {}}, timeout=timeout)


def cancel_storm(binary: Path, ws: Path, handle: str, port: int, work: Path, n: int = 200) -> list[str]:
    """`n` calls to an endpoint that never answers, each cancelled at once; then a ping must
    be answered quickly, and the endpoint's connections must be dropped."""
    fails: list[str] = []
    with serving(binary, ws, hang_env(port), work / "cancel_storm.stderr", 30, fails, "cancel_storm") as raw:
        t0 = time.time()
        for _ in range(n):
            raw.cancel(model_call(raw, handle), "storm")
        sent = time.time() - t0
        t1 = time.time()
        answer = ping(raw)
        took = time.time() - t1
        time.sleep(2)
        open_now = open_conns()
        print(f"  [cancel_storm] {n} cancelled calls sent in {sent:.1f} s; ping {'answered' if answer else 'UNANSWERED'}"
              f" in {took:.2f} s; endpoint connections open 2 s later: {open_now}, peak {STATE.peak_conns}; "
              f"threads/RSS {rss_mb(raw.proc.pid)}")
        if answer is None or took > 5:
            fails.append(f"cancel_storm: ping took {took:.1f} s after {n} cancelled calls")
        if open_now > 2:
            fails.append(f"cancel_storm: {open_now} endpoint connections still open 2 s after the cancels")
    return fails


def cancel_in_flight(binary: Path, ws: Path, handle: str, port: int, work: Path, rounds: int = 4) -> list[str]:
    """Rounds of 16 calls that reach an endpoint which never answers, all cancelled once
    they are waiting there: each cancel must drop its model request (the endpoint's
    connection closes) and give its slot back, so the next round and a ping get in."""
    fails: list[str] = []
    stderr = work / "cancel_in_flight.stderr"
    with serving(binary, ws, hang_env(port), stderr, 30, fails, "cancel_in_flight") as raw:
        worst_ping, worst_open, peak = 0.0, 0, 0
        for r in range(rounds):
            ids = [model_call(raw, handle) for _ in range(16)]
            wait_open(16, 10)
            peak = max(peak, open_conns())
            for rid in ids:
                raw.cancel(rid, "storm")
            t1 = time.time()
            answer = ping(raw)
            took = time.time() - t1
            worst_ping = max(worst_ping, took if answer else 999)
            now_open = open_conns()
            print(f"    round {r + 1}: {now_open} endpoint requests open after the cancels, ping "
                  f"{'answered' if answer else 'UNANSWERED'} in {took:.2f} s", flush=True)
            time.sleep(1)
            worst_open = max(worst_open, open_conns())
        print(f"  [cancel_in_flight] {rounds} rounds of 16 in-flight calls cancelled: peak endpoint connections "
              f"{peak}, still open 1 s after a round's cancel at most {worst_open}; slowest ping {worst_ping:.2f} s; "
              f"threads/RSS {rss_mb(raw.proc.pid)}")
        if worst_ping > 5:
            fails.append(f"cancel_in_flight: a ping took {worst_ping:.1f} s after a round of cancels")
        if worst_open > 2:
            fails.append(f"cancel_in_flight: {worst_open} endpoint requests still open 1 s after their cancel")
    return fails


def cancel_full(binary: Path, ws: Path, handle: str, port: int, work: Path, deadline: int = 30) -> list[str]:
    """n tool_output calls wait at an endpoint that never answers; once all n are there,
    each is cancelled and a ping is sent. With n = 15 the ping is answered at once; with
    n = 16 (every request slot taken) the reader reads nothing more, so it never sees the
    cancels or the ping, and both wait for the calls' deadline."""
    fails = []
    for n in (15, 16):
        stderr = work / f"cancel_full_{n}.stderr"
        with serving(binary, ws, hang_env(port, deadline), stderr, deadline + 30) as raw:
            ids = [model_call(raw, handle) for _ in range(n)]
            wait_open(n, 15)
            waiting = open_conns()
            t0 = time.time()
            for rid in ids:
                raw.cancel(rid, "client timeout")
            answer = ping(raw, timeout=deadline + 30)
            took = time.time() - t0
            time.sleep(0.5)
            left = open_conns()
            print(f"  [cancel_full] {n} calls waiting at the endpoint ({waiting} seen there), all cancelled: ping "
                  f"{'answered' if answer else 'UNANSWERED'} {took:.1f} s later (deadline {deadline} s); "
                  f"endpoint requests still open: {left}", flush=True)
            if answer is None or took > 5:
                fails.append(f"cancel_full: with {n} calls in flight, cancelling them all left a ping waiting "
                             f"{took:.1f} s (the calls' deadline is {deadline} s)")
        time.sleep(1)
    return fails


def eof_mid_call(binary: Path, ws: Path, handle: str, port: int, deadline: int = 20) -> list[str]:
    """End of input with a model call in flight: `serve` exits within its 5 s grace."""
    raw = Raw(binary, ws, env=hang_env(port, deadline, log="off"))
    raw.initialize()
    model_call(raw, handle)
    time.sleep(1)
    t0 = time.time()
    code = raw.close(timeout=deadline + 30)
    took = time.time() - t0
    print(f"  [eof_mid_call] deadline {deadline} s: serve exited {code} {took:.1f} s after EOF")
    return [f"eof_mid_call: exit took {took:.1f} s, past the 5 s grace (deadline {deadline} s)"] if took > 5 else []


def main() -> int:
    parser = arguments(__doc__, "evidence-store-endpoint")
    parser.add_argument("--only", action="append", default=[])
    args = parse(parser, only=["ok", "reset"])
    binary = args.bin.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    ws = make_workspace(args.work / "ws", 2, projects=1, sessions=2, turns=8, tool_output_max="64K")
    done = cli(binary, ws, "import", timeout=300)
    if done.returncode != 0:
        print(done.stderr)
        return 1
    handle = biggest_handle(binary, ws)
    print(f"handle {handle}")
    srv = start_server()
    other = start_server("127.0.0.2")
    srv.other_port = other.server_address[1]  # type: ignore[attr-defined]
    port = srv.server_address[1]
    fails: list[str] = []
    try:
        for case in cases(port):
            if args.only and case.name not in args.only:
                continue
            fails += run_case(binary, ws, handle, port, case, args.work)
            if case.name == "redirect_other":
                with STATE.lock:
                    leaked = [a for h, a in STATE.auth_seen if h.startswith("127.0.0.2") and a]
                    bodies = STATE.bodies.get("ok", 0)
                print(f"  [redirect_other] requests at 127.0.0.2 with Authorization: {len(leaked)}; "
                      f"body bytes received there: {bodies}")
                if leaked:
                    fails.append(f"redirect_other: the API key went to another host: {leaked[0]}")
        if not args.only or "cancel_storm" in args.only:
            fails += cancel_storm(binary, ws, handle, port, args.work)
        if not args.only or "cancel_full" in args.only:
            fails += cancel_full(binary, ws, handle, port, args.work)
        if not args.only or "cancel_in_flight" in args.only:
            fails += cancel_in_flight(binary, ws, handle, port, args.work)
        if not args.only or "eof_mid_call" in args.only:
            fails += eof_mid_call(binary, ws, handle, port)
    finally:
        STOP.set()
        srv.shutdown()
        other.shutdown()
    for f in fails:
        print(f"FAIL {f}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
