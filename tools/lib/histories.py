"""Raw session histories made from a generated workspace, and prompt-diary's `prepare` on them.

The differential tests compare evidence-store with each prompt-diary release on a workspace
that release's own `prepare` built, from the same histories. `write_histories` turns a
gen_workspace.py workspace into the files prepare discovers:

  - a Claude Code session becomes `claude/<cwd with / as ->/<session id>.jsonl`, every record
    given `cwd`, `sessionId`, `uuid` and a timestamp;
  - a Codex session becomes `codex/2026/01/15/rollout-...-<id>.jsonl`, headed by one
    `session_meta` (id, timestamp, cwd) and every record given a timestamp;
  - the first Codex session is split into two paginated rollout files of one thread (the
    second continues the first through `history_base`).

Every record is stamped inside 2026-01-15 (UTC) and each project's sessions share one `cwd`
(/home/dev/<project>), so prepare finds the generator's projects and sessions. The turns are
each release's own: 0.2.10 takes every Claude `user` record without `sourceToolAssistantUUID`
(the generated tool results too) as the start of a turn, so its Claude turns are short.
Nothing here is random beyond the generated workspace: one seed, the same histories.

What each release's prepare makes of the split rollout:

  - prompt-diary 0.2.20 stitches the second file's transcript from both files (the first
    half, then the second), and keeps the first file as a session of its own too; its audit
    manifest lists both files as `source_segments` of the stitched session;
  - prompt-diary 0.2.10 knows no paginated rollouts: it reads every `.jsonl` under the Codex
    root as a session of its own, so the two files become two sessions with the same
    `source_session_id`, the second one's turns starting at its first user message (its
    `session_meta` header, with `ordinal` and `history_base`, is just a record it ignores).
    It gets the same files all the same: that is what 0.2.10 does with such a history.

`generated_histories(tmp, seed)` does both steps the way both differential tests use them:
gen_workspace.py without edge cases (3 projects of 3 sessions of 6 turns, tool outputs up
to 64K), then `write_histories`.

`prepare(venv_bin, hist_dir, reports_root, home)` runs `<venv_bin>/prompt-diary prepare --date
2026-01-15 --timezone UTC --reports-root <reports_root> --quiet` with both releases' history
roots, PROMPT_DIARY_CODEX_SESSIONS and PROMPT_DIARY_CLAUDE_PROJECTS (the same names, flags and
report layout in 0.2.10 and 0.2.20), and HOME pointed at `home` so that no user
configuration or real history is read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

REPORT_DATE = "2026-01-15"
GEN_WORKSPACE = Path(__file__).resolve().parent / "gen_workspace.py"


def dumps_records(records: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def write_histories(gen_ws: Path, hist_dir: Path, seed: str) -> None:
    """Claude project files under `hist_dir/claude` and Codex rollouts under `hist_dir/codex`,
    one per session of the generated workspace `gen_ws` (see the module docstring). `seed`
    names the sessions (uuid5 of seed, project and position), so the same seed gives the
    same files."""
    split = False
    for index in sorted(gen_ws.glob("projects/*/sessions.index.jsonl")):
        project = index.parent.name
        cwd = f"/home/dev/{project.lower()}"
        rows = [json.loads(line) for line in index.read_text(encoding="utf-8").splitlines() if line.strip()]
        for n, row in enumerate(rows):
            sid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{seed}/{project}/{n}"))
            records: list[dict] = []
            if row["source"] == "codex":
                records.append({"timestamp": f"{REPORT_DATE}T09:00:00.000Z", "type": "session_meta", "payload": {
                    "id": sid, "timestamp": f"{REPORT_DATE}T09:00:00.000Z", "cwd": cwd, "originator": "codex_cli_rs",
                    "cli_version": "0.50.0", "source": "cli"}})
                dest = hist_dir / "codex" / "2026" / "01" / "15" / f"rollout-2026-01-15T09-00-00-{sid}.jsonl"
            else:
                dest = hist_dir / "claude" / cwd.replace("/", "-") / f"{sid}.jsonl"
            lines = (index.parent / row["session_path"]).read_bytes().decode("utf-8").splitlines()
            for k, text in enumerate(lines):
                record = json.loads(text)
                if record.get("type") == "session_meta" and records:
                    # The generated session's own header: one header, with what prepare reads.
                    records[0]["payload"] = dict(record.get("payload") or {}, **records[0]["payload"])
                    continue
                record["timestamp"] = f"{REPORT_DATE}T{10 + n:02d}:{k // 60 % 60:02d}:{k % 60:02d}.000Z"
                if row["source"] != "codex":
                    record.update(cwd=cwd, sessionId=sid, uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{sid}/{k}")))
                records.append(record)
            dest.parent.mkdir(parents=True, exist_ok=True)
            if row["source"] == "codex" and not split:
                split = True
                write_split_rollouts(dest, sid, records)
                continue
            dest.write_text(dumps_records(records), encoding="utf-8")


def generated_histories(tmp: Path, seed: str) -> Path:
    """`tmp/gen<seed>`: a generated workspace, without edge cases (every line must be a JSON
    record to be stamped); `tmp/hist<seed>`, returned: its histories."""
    gen, hist = tmp / f"gen{seed}", tmp / f"hist{seed}"
    subprocess.run([sys.executable, str(GEN_WORKSPACE), "--out", str(gen), "--seed", seed,
                    "--projects", "3", "--sessions", "3", "--turns", "6", "--tool-output-max", "64K"],
                   check=True, stdout=subprocess.DEVNULL)
    write_histories(gen, hist, seed)
    return hist


def write_split_rollouts(dest: Path, thread: str, records: list[dict]) -> None:
    """One Codex session as two paginated rollout files of its thread: the first holds the
    first half of the records, the second continues from it (`history_base`), so that
    0.2.20's prepare stitches the second one's transcript from both files."""
    header, body = records[0], records[1:]
    half = len(body) // 2
    first = [dict(header, ordinal=0, payload=dict(header["payload"], history_mode="paginated"))]
    first += [dict(r, ordinal=i + 1) for i, r in enumerate(body[:half])]
    first_bytes = dumps_records(first).encode("utf-8")
    dest.write_bytes(first_bytes)
    rollout = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{thread}/continued"))
    base_ref = {"thread_id": thread, "end_ordinal_exclusive": len(first), "end_byte_offset": len(first_bytes)}
    second = [dict(header, ordinal=len(first), timestamp=f"{REPORT_DATE}T09:30:00.000Z",
                   payload=dict(header["payload"], history_mode="paginated", history_base=base_ref))]
    second += [dict(r, ordinal=len(first) + 1 + i) for i, r in enumerate(body[half:])]
    name = dest.name.replace("T09-00-00", "T09-30-00").removesuffix(".jsonl") + f"_{rollout}.jsonl"
    (dest.parent / name).write_text(dumps_records(second), encoding="utf-8")


def prepare(venv_bin: Path, hist_dir: Path, reports_root: Path, home: Path) -> Path:
    """Run the prompt-diary of the venv whose bin directory is `venv_bin` on the histories in
    `hist_dir` (written by `write_histories`) for 2026-01-15, UTC; returns the workspace it
    prepared (`reports_root/work/2026-01-15`). Raises CalledProcessError if prepare fails."""
    env = dict(os.environ, PROMPT_DIARY_CODEX_SESSIONS=str(hist_dir / "codex"),
               PROMPT_DIARY_CLAUDE_PROJECTS=str(hist_dir / "claude"), HOME=str(home))
    for name in ("PROMPT_DIARY_HOME", "PROMPT_DIARY_CONFIG", "XDG_CONFIG_HOME"):
        env.pop(name, None)
    subprocess.run([str(venv_bin / "prompt-diary"), "prepare", "--date", REPORT_DATE, "--timezone", "UTC",
                    "--reports-root", str(reports_root), "--quiet"], env=env, check=True, stdout=subprocess.DEVNULL)
    return reports_root / "work" / REPORT_DATE


def audit_manifest(reports_root: Path) -> dict:
    """The private audit manifest prepare wrote beside the workspace."""
    path = reports_root / "private" / REPORT_DATE / "audit.manifest.json"
    return json.loads(path.read_text(encoding="utf-8"))
