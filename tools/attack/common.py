"""Shared pieces of the hostile test scripts: workspaces of both contracts, the raw MCP
client (`Raw`, from tools/lib/mcp_client.py) and process measurements.

Nothing here asserts; each script decides what counts as a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # tools/lib: the shared modules
import cargo_target  # noqa: E402
from gen_workspace import indexes, relabel_schema_7  # noqa: E402,F401  (indexes: re-exported)
from mcp_client import Raw  # noqa: E402,F401  (re-exported for the attack scripts)
import smoke  # noqa: E402

RELEASE = cargo_target.binary("release")  # each script's default --bin


SMOKE = False  # set by parse(): --smoke, CI's quick run of the script


def arguments(doc: str | None, work: str | None, *, schema: int | None = None,
              seconds: float | None = None) -> argparse.ArgumentParser:
    """The options the attack scripts share: --bin (default: the release build), --work
    (default /tmp/WORK) when `work` is given, and --schema 2|7 and --seconds when the script
    takes them, with the default given. Parse with parse(), which adds --smoke."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--bin", type=Path, default=RELEASE)
    if work is not None:
        parser.add_argument("--work", type=Path, default=Path("/tmp") / work)
    if schema is not None:
        parser.add_argument("--schema", type=int, choices=(2, 7), default=schema)
    if seconds is not None:
        parser.add_argument("--seconds", type=float, default=seconds)
    return parser


def parse(parser: argparse.ArgumentParser, **small: object) -> argparse.Namespace:
    """tools/lib/smoke.py's command line; under --smoke, also every workspace small."""
    global SMOKE
    args = smoke.parse(parser, **small)
    SMOKE = args.smoke
    return args


def broken_or_lost(ws: Path, marks: dict[tuple[str, str, str], str], items: dict[str, set[str]]) -> list[str]:
    """What a crash or a full disk must not leave behind in `ws`: a document or receipt that
    is not whole JSON; an acknowledged chain (`marks`: (project, session_ref, turn_ref) to the
    marker its summary carries) missing from its card; an acknowledged work item (`items`:
    project to refs) missing from its project's synthesis."""
    failures = []
    for p in [*ws.glob("projects/*/evidence/*.json"), *ws.glob("projects/*/project-synthesis.json"),
              ws / "daily-report.json", *ws.glob("projects/*/receipts/*.json")]:
        try:
            json.loads(p.read_bytes())
        except (ValueError, OSError) as e:
            failures.append(f"{p} is not whole JSON: {e}")
    for (project, session_ref, turn_ref), mark in marks.items():
        card = ws / "projects" / project / "evidence" / f"{session_ref}.json"
        if not card.exists() or f'"{mark}"' not in card.read_text(encoding="utf-8"):
            failures.append(f"acknowledged evidence {mark} ({project}/{session_ref}/{turn_ref}) lost")
    for project, refs in items.items():
        syn = ws / "projects" / project / "project-synthesis.json"
        text = syn.read_text(encoding="utf-8") if syn.exists() else ""
        failures += [f"acknowledged work item {ref} of {project} lost" for ref in refs if f'"{ref}"' not in text]
    return failures


def verdict(failures: list[str]) -> int:
    """Prints each failure and gives the script's exit code: 1 when there was any."""
    for f in failures:
        print("FAILURE:", f)
    return 1 if failures else 0


def make_workspace(out: Path, schema: int, seed: int = 7, projects: int = 2, sessions: int = 4,
                   turns: int = 12, tool_output_max: str = "64K") -> Path:
    """A generated workspace: schema 2 (prompt-diary 0.2.10) or 7 (0.2.20), laid out as
    each release's `prepare` lays it out (the 0.2.20 form is test_differential_0220's).
    Under --smoke, at most 2 projects of 2 sessions of 8 turns."""
    if SMOKE:
        projects, sessions, turns = min(projects, 2), min(sessions, 2), min(turns, 8)
    if out.exists():
        shutil.rmtree(out)
    subprocess.run([sys.executable, str(ROOT / "tools" / "lib" / "gen_workspace.py"), "--out", str(out), "--seed", str(seed),
                    "--edge-cases", "--projects", str(projects), "--sessions", str(sessions), "--turns", str(turns),
                    "--tool-output-max", tool_output_max], check=True, stdout=subprocess.DEVNULL)
    if schema == 7:
        relabel_schema_7(out)
    return out


def schema_of(ws: Path) -> int:
    return int(json.loads((ws / "metadata.json").read_text(encoding="utf-8")).get("schema_version", 2))


def chain(turn: dict, schema: int, marker: str) -> dict:
    """A valid evidence chain for `turn` under `schema`, carrying `marker` in a free-text
    summary so that the stored card shows which write it is."""
    a, b = turn["turn_start_line"], turn["turn_end_line"]
    if schema == 7:
        trigger: dict = {"citations": [{"lines": f"{a}-{a}"}]}
    else:
        trigger = {"type": "explicit_user_message", "summary": "asked",
                   "quoted_messages": [{"text": "please", "citations": [{"lines": f"{a}-{a}"}]}],
                   "citations": [{"lines": f"{a}-{a}"}]}
    return {
        "turn_ref": turn["turn_ref"],
        "trigger": trigger,
        "agent_reactions": [{"summary": marker, "citations": [{"lines": f"{a}-{b}"}]}],
        "outcomes": [{"category": "code_outcome", "summary": "landed", "citations": [{"lines": f"{a}-{b}"}]}],
        "observed_checks": [],
        "terminal_state": {"type": "material_result", "summary": "done", "citations": [{"lines": f"{b}-{b}"}]},
        "materiality": "material",
    }


def gap_item(ref: str, session_ref: str, turn_ref: str) -> dict:
    """The simplest valid work item under both contracts (no disposition needed)."""
    return {"work_item_ref": ref, "covered_turns": [{"session_ref": session_ref, "turn_ref": turn_ref}],
            "kind": "evidence_gap_item", "title": f"gap {ref}", "confidence": "low"}


def rss_mb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a live process in MB; (-1, -1) once it is gone."""
    rss = hwm = -1
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS"):
                rss = int(line.split()[1]) // 1024
            elif line.startswith("VmHWM"):
                hwm = int(line.split()[1]) // 1024
    except OSError:
        pass
    return rss, hwm


def threads(pid: int) -> int:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("Threads"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


def cli(binary: Path, ws: Path, *args: str, timeout: float = 300.0, env: dict | None = None
        ) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), "--workspace", str(ws), *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def add_citations(ws: Path, every: int = 3) -> Path:
    """Gives every `every`-th Claude assistant line of `ws` a text block with
    `**Evidence**:` markers (file, test, link) and a `cwd` of a small project directory
    beside the workspace, so that import indexes agent citations and export writes
    receipts. Line numbers and turn spans stay as they are. Returns the project directory."""
    proj = ws.parent / (ws.name + "-proj")
    shutil.rmtree(proj, ignore_errors=True)
    (proj / "src").mkdir(parents=True)
    for i in range(5):
        (proj / "src" / f"mod_{i}.py").write_text("".join(f"line {n}\n" for n in range(40)))
    for path in sorted(ws.glob("projects/*/sessions/claude-code/*.jsonl")):
        out = []
        n = 0
        for line in path.read_bytes().split(b"\n"):
            if b'"type":"assistant"' in line[:40]:
                try:
                    obj = json.loads(line)
                except ValueError:
                    out.append(line)
                    continue
                n += 1
                if n % every == 0 and isinstance(obj.get("message", {}).get("content"), list):
                    obj["cwd"] = str(proj)
                    obj["message"]["content"].append({"type": "text", "text": (
                        f"Step {n} done.\n**Evidence**: src/mod_{n % 5}.py:{n % 50 + 1}\n"
                        f"**Evidence**: pytest tests/test_x.py::test_{n} - PASS\n"
                        f"**Evidence**: [Issue {n}](https://example.com/issues/{n})")})
                    line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
            out.append(line)
        path.write_bytes(b"\n".join(out))
    return proj
