#!/usr/bin/env python3
"""Cited files and working directories that try to lead the citation checker outside the
project, hang it, or make it read without bound.

Part 1 (`cwd`): one Claude session whose assistant lines each carry a hostile `cwd` and
`**Evidence**:` citations (relative cwd, `..`, a symlink to /etc, /proc/self/root, a FIFO
as cwd, a very long path, system dirs by other names, cited `..`, FIFO, socket, device,
symlinks out, a sparse huge file). `import` and `verify-citations` run under
`strace -f -y -e trace=openat,openat2,open` with a time bound; every file the process
opened is listed when it is outside the workspace, the project and the binary's own
needs; statuses come from `read_agent_citations`.

Part 2 (`amplify`): one assistant line citing the same large file under N different
spellings (`./big.txt:1`, `././big.txt:1`, ...): the checker reads and hashes the file
once per spelling. Reports import time and bytes read for N spellings.

Usage: tools/.venv/bin/python tools/attack/hostile_cwd.py --bin target/release/evidence-store [--part cwd|amplify] [--n 200]
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Raw, arguments, cli, make_workspace, parse  # noqa: E402


def claude_session(ws: Path) -> tuple[str, str, Path]:
    for index in sorted(ws.glob("projects/*/sessions.index.jsonl")):
        for line in index.read_text().splitlines():
            row = json.loads(line)
            if "claude" in row["session_path"]:
                return index.parent.name, row["session_ref"], index.parent / row["session_path"]
    raise SystemExit("no Claude session")


def plant(path: Path, cases: list[tuple[str, list[str]]]) -> list[int]:
    """Gives the first len(cases) assistant lines of `path` the case's cwd and citations
    (byte lengths change, line numbers do not)."""
    out, n, planted = [], 0, []
    for number, line in enumerate(path.read_bytes().split(b"\n"), 1):
        if n < len(cases) and b'"type":"assistant"' in line[:40]:
            try:
                obj = json.loads(line)
            except ValueError:
                out.append(line)
                continue
            content = obj.get("message", {}).get("content") if isinstance(obj, dict) else None
            if isinstance(content, list):
                cwd, refs = cases[n]
                obj["cwd"] = cwd
                content.append({"type": "text", "text": "Done.\n" + "".join(f"**Evidence**: {r}\n" for r in refs)})
                line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
                planted.append(number)
                n += 1
        out.append(line)
    if n < len(cases):
        raise SystemExit(f"only {n} assistant lines for {len(cases)} cases")
    path.write_bytes(b"\n".join(out))
    return planted


def strace(binary: Path, ws: Path, args: list[str], trace: Path, timeout: float) -> tuple[int | None, float]:
    t0 = time.time()
    try:
        done = subprocess.run(["strace", "-f", "-y", "-qq", "-e", "trace=openat,openat2,open", "-o", str(trace),
                               str(binary), "--workspace", str(ws), *args], capture_output=True, timeout=timeout)
        code = done.returncode
    except subprocess.TimeoutExpired:
        code = None
    return code, time.time() - t0


def outside_opens(trace: Path, allowed: list[str]) -> list[str]:
    """Successful opens whose resolved path (strace -y) is outside every allowed prefix."""
    bad = []
    for line in trace.read_text(errors="replace").splitlines():
        m = re.search(r"= (\d+)<([^>]*)>", line)
        if not m:
            continue
        path = m.group(2)
        if any(path.startswith(a) for a in allowed):
            continue
        bad.append(line.strip()[:300])
    return bad


def accepted(line: str, cwds: list[str]) -> bool:
    """Opens outside the workspace and project that the rules allow (FINDINGS.md, N5): the
    allocator's start-up reads; a hostile cwd opened as a directory to be judged (nothing
    beneath it); and files under /root, /var/log or the process's own working directory,
    which are real directories, so a session may name them as its project."""
    if re.search(r"<(/proc/\d+/maps|/proc/sys/vm/overcommit_memory|/sys/kernel/mm/transparent_hugepage/enabled)>", line):
        return True
    if "O_DIRECTORY" in line and any(f'"{cwd}"' in line for cwd in cwds):
        return True
    real_projects = ("/root", "/var/log", os.getcwd())
    return any(f"<{d}>" in line or f"<{d}/" in line for d in real_projects)


def part_cwd(binary: Path, work: Path) -> list[str]:
    fails: list[str] = []
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ws = make_workspace(work / "ws", 2, projects=1, sessions=1, turns=40, tool_output_max="4K")
    proj = work / "proj"
    (proj / "src").mkdir(parents=True)
    (proj / "src" / "a.py").write_text("".join(f"x{i}\n" for i in range(40)))
    os.mkfifo(proj / "fifo.txt")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(proj / "sock.txt"))
    try:
        os.mknod(proj / "zero.txt", 0o600 | 0o020000, os.makedev(1, 5))  # /dev/zero's numbers
    except OSError:
        pass
    with open(proj / "sparse.txt", "wb") as f:  # 10 GiB, no blocks
        f.truncate(10 << 30)
    os.symlink("/etc/shadow", proj / "shadow.txt")
    os.symlink("../../../../../../../../etc/passwd", proj / "passwd.txt")
    os.symlink("/nonexistent/outside.txt", proj / "dangling_out.txt")
    os.symlink(str(proj / "src" / "a.py"), proj / "abs_in.txt")
    os.symlink("loop2.txt", proj / "loop1.txt")
    os.symlink("loop1.txt", proj / "loop2.txt")
    os.symlink("/etc", work / "etc_link")
    os.symlink("/proc/self/root", work / "procroot_link")
    os.symlink("/proc/self/cwd", work / "proccwd_link")
    os.symlink("/proc/1/root/etc", work / "pid1_etc_link")
    os.symlink("/var/run", work / "varrun_link")
    os.symlink("/dev/shm", work / "shm_link")
    os.mkfifo(work / "fifo_cwd")
    deep = work / "deep"
    p = deep
    for _ in range(40):  # a real directory whose path is over 4096 bytes
        p = p / ("d" * 120)
    try:
        os.makedirs(p)
        (p / "f.txt").write_text("a\nb\n")
    except OSError:
        p = deep
    P = str(proj)
    cases = [
        ("ok", P, ["src/a.py:3"]),
        ("relative cwd", "proj", ["src/a.py:3"]),
        ("cwd with .. to /etc", P + "/../../../../../../../etc", ["passwd:1", "shadow:1"]),
        ("cwd symlink to /etc", str(work / "etc_link"), ["passwd:1", "shadow:1"]),
        ("cwd /proc/self/root", "/proc/self/root/etc", ["passwd:1"]),
        ("cwd symlink to /proc/self/root", str(work / "procroot_link"), ["etc/passwd:1", "etc/shadow:1"]),
        ("cwd symlink to /proc/self/cwd", str(work / "proccwd_link"), ["src/a.py:1"]),
        ("cwd symlink to /proc/1/root/etc", str(work / "pid1_etc_link"), ["passwd:1"]),
        ("cwd /var/run symlink", str(work / "varrun_link"), ["utmp:1"]),
        ("cwd /dev/shm symlink", str(work / "shm_link"), ["x:1"]),
        ("cwd //etc", "//etc", ["passwd:1"]),
        ("cwd /./etc/.", "/./etc/.", ["passwd:1"]),
        ("cwd /root", "/root", [".bashrc:1", ".ssh/id_rsa:1"]),
        ("cwd /var/log", "/var/log", ["dpkg.log:1"]),
        ("cwd a FIFO", str(work / "fifo_cwd"), ["x.py:1"]),
        ("cwd 5000 bytes", "/" + "a" * 5000, ["x.py:1"]),
        ("cwd over PATH_MAX, real", str(p), ["f.txt:1"]),
        ("cwd with NUL", P + "\u0000/x", ["src/a.py:1"]),
        ("cited ..", P, ["../../../../../../etc/passwd:1", "src/../../proj/src/a.py:2", "src/../../../etc/passwd:1"]),
        ("cited absolute", P, [P + "/src/a.py:2", "/etc/passwd:1"]),
        ("cited FIFO/socket/device", P, ["fifo.txt:1", "sock.txt:1", "zero.txt:1"]),
        ("cited sparse 10 GiB", P, ["sparse.txt:1"]),
        ("cited symlinks", P, ["shadow.txt:1", "passwd.txt:1", "dangling_out.txt:1", "abs_in.txt:2", "loop1.txt:1"]),
        ("cited long path", P, ["a/" * 3000 + "x.py:1"]),
    ]
    _, ref, path = claude_session(ws)
    planted = plant(path, [(c[1], c[2]) for c in cases])
    allowed = [str(ws), str(proj), str(binary.parent), "/etc/ld.so", "/lib", "/usr/lib",
               "/sys/devices/system/cpu", "/sys/fs/cgroup", "/dev/null", "/dev/urandom", "pipe:", "socket:",
               "anon_inode:", "/usr/share/zoneinfo", "/etc/localtime", "/dev/pts", "/"]
    results = {}
    for args in (["import"], ["verify-citations"]):
        trace = work / f"trace-{args[0]}.txt"
        code, took = strace(binary, ws, args, trace, 120)
        print(f"{' '.join(args)}: exit {code} in {took:.1f} s")
        if code is None:
            fails.append(f"`{' '.join(args)}` did not end within 120 s")
        bad = [l for l in outside_opens(trace, allowed[:-1]) if not accepted(l, [c[1] for c in cases])]
        # the root itself ("/") is only allowed as a directory the runtime opens; list anything under /etc, /root, /var, /tmp outside
        for line in bad:
            print(f"  opened outside: {line}")
        if bad:
            fails.append(f"`{' '.join(args)}` opened {len(bad)} files outside the workspace and project")
        results[args[0]] = trace
    project = claude_session(ws)[0]
    raw = Raw(binary, ws)
    raw.initialize()
    got = raw.tool("read_agent_citations", {"project_key": project, "session_ref": ref}, timeout=60)
    raw.close()
    if got is None:
        return fails + ["read_agent_citations unanswered"]
    listed = json.loads(got[1])
    items = listed.get("citations") or listed.get("result", {}).get("citations") or []
    by_ref = {}
    for c in items:
        by_ref.setdefault((c.get("line"), c.get("reference")), []).append(c)
    if items:
        print(f"  (a citation: {json.dumps(items[0])[:400]})")
    for (name, cwd, refs), number in zip(cases, planted):
        for r in refs:
            for c in by_ref.get((number, r), [{}])[:1]:
                v = c.get("verification") or c
                print(f"  {name:32} {r[:50]:50} {v.get('status')!s:18} lines={v.get('file_lines')} "
                      f"sha={'yes' if v.get('sha256') else 'no'} {str(v.get('detail') or '')[:120]}")
                if v.get("sha256") and name not in ("ok", "cited ..", "cited absolute", "cited symlinks", "cwd /root",
                                                    "cwd /var/log", "cwd symlink to /proc/self/cwd"):
                    fails.append(f"{name}: {r} was read (sha256 stored) in cwd {cwd[:80]}")
    sock.close()
    return fails


def timed(binary: Path, ws: Path, command: str) -> float:
    """Runs `command` (killed after 600 s), prints how it ended, and returns its seconds."""
    t0 = time.time()
    try:
        code = cli(binary, ws, command, timeout=600).returncode
    except subprocess.TimeoutExpired:
        code = None
    took = time.time() - t0
    print(f"{command}: exit {code} in {took:.1f} s" if code is not None else
          f"{command}: still running after {took:.0f} s (killed)")
    return took


def part_amplify(binary: Path, work: Path, n: int, mib: int) -> list[str]:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ws = make_workspace(work / "ws", 2, projects=1, sessions=1, turns=6, tool_output_max="4K")
    proj = work / "proj"
    proj.mkdir()
    with open(proj / "big.txt", "wb") as f:
        line = b"0123456789" * 7 + b"\n"
        f.write(line * ((mib << 20) // len(line)))
    # Short, distinct spellings of one path: each of 14 separators is "/" or "/./" after a
    # directory that loops to itself (d/d -> .), so 2^14 spellings stay under 80 bytes.
    os.symlink(".", proj / "d")
    refs = []
    for k in range(n):
        bits = "".join("/./" if k >> i & 1 else "/" for i in range(14))
        refs.append("d" + bits.replace("/", "/d/", 0) + "big.txt:1")
    _, _, path = claude_session(ws)
    plant(path, [(str(proj), refs)])
    print(f"session line: {n} spellings of one {mib} MiB file, {sum(len(r) + 16 for r in refs)} bytes of text")
    took = timed(binary, ws, "import")
    timed(binary, ws, "verify-citations")
    per = took / max(n, 1)
    print(f"≈{per * 1000:.0f} ms per spelling; {n * mib} MiB hashed for one {mib} MiB file")
    return [f"amplify: {n} spellings of one {mib} MiB file made import take {took:.1f} s"] if took > 30 else []


def main() -> int:
    parser = arguments(__doc__, "evidence-store-cwd")
    parser.add_argument("--part", choices=("cwd", "amplify", "all"), default="all")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--mib", type=int, default=60)
    args = parse(parser, n=5, mib=1)
    binary = args.bin.resolve()
    fails: list[str] = []
    if args.part in ("cwd", "all"):
        fails += part_cwd(binary, args.work / "cwd")
    if args.part in ("amplify", "all"):
        fails += part_amplify(binary, args.work / "amplify", args.n, args.mib)
    for f in fails:
        print(f"FAIL {f}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
