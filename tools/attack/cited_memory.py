#!/usr/bin/env python3
"""One cited file of 64 MiB (the checker's size limit) of invalid UTF-8: the import's peak
memory, and a `serve` under `ulimit -v 512 MiB` asked for a ping (its start-up import
checks the citation). Exit 1 when that serve dies or the ping is unanswered.

Usage: tools/.venv/bin/python tools/attack/cited_memory.py --bin target/release/evidence-store
       (--smoke: a 1 MiB file, CI's quick run that the script still works)
"""
import resource
import shutil
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import arguments, parse  # noqa: E402
from hostile_cwd import claude_session, make_workspace, plant  # noqa: E402

parser = arguments(None, "evidence-store-cited-memory")
parser.add_argument("--fill", choices=("invalid", "ascii"), default="invalid")
args = parse(parser)
mib = 1 if args.smoke else 64
binary = args.bin.resolve()
shutil.rmtree(args.work, ignore_errors=True)
args.work.mkdir(parents=True)
ws = make_workspace(args.work / "ws", 2, projects=1, sessions=1, turns=6, tool_output_max="4K")
proj = args.work / "proj"
proj.mkdir()
(proj / "big.txt").write_bytes((b"\xff" if args.fill == "invalid" else b"a") * (mib << 20))
plant(claude_session(ws)[2], [(str(proj), ["big.txt:1"])])

timed = subprocess.run(["/usr/bin/time", "-f", "%M", str(binary), "--workspace", str(ws), "import"],
                       capture_output=True, text=True)
print(f"import ({args.fill} {mib} MiB cited): exit {timed.returncode}, peak RSS {int(timed.stderr.split()[-1]) // 1024} MB")
shutil.rmtree(ws / ".evidence-store")


def limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))


proc = subprocess.Popen([str(binary), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, preexec_fn=limit,
                        env={"PROMPT_DIARY_WORKSPACE": str(ws), "RUST_LOG": "off", "PATH": "/usr/bin:/bin"})
init = ('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        '"capabilities":{},"clientInfo":{"name":"a","version":"0"}}}\n'
        '{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"prompt_diary_ping","arguments":{}}}\n')
assert proc.stdin and proc.stdout
proc.stdin.write(init.encode())
proc.stdin.flush()
# stdin stays open until the ping is answered: a closed stdin cancels the requests still waiting.
give_up = threading.Timer(60, proc.kill)
give_up.start()
answered = any(b'"id":2' in line for line in iter(proc.stdout.readline, b""))
proc.stdin.close()
err = proc.stderr.read()
proc.wait()
give_up.cancel()
print(f"serve under ulimit -v 512 MiB: exit {proc.returncode}, ping {'answered' if answered else 'UNANSWERED'}; "
      f"stderr: {err.decode(errors='replace').strip()[:120]!r}")
sys.exit(0 if answered and proc.returncode == 0 else 1)
