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

The stamping is shared with any other writer of histories (tools/realday/fake_home.py):
`claude_path` and `stamp_claude` (a Claude Code record's `cwd`, `sessionId`, `uuid` and
timestamp), `codex_path` and `codex_meta` (a rollout's name and its `session_meta` header).

`prepare(venv_bin, hist_dir, reports_root, home)` runs `<venv_bin>/prompt-diary prepare --date
2026-01-15 --timezone UTC --reports-root <reports_root> --quiet` with both releases' history
roots, PROMPT_DIARY_CODEX_SESSIONS and PROMPT_DIARY_CLAUDE_PROJECTS (the same names, flags and
report layout in 0.2.10 and 0.2.20), and HOME pointed at `home` so that no user
configuration or real history is read; keywords give another day, timezone, history roots
(`home_roots`: a home's own), content language, log file and time limit. From the shell:

  histories.py prepare --venv-bin DIR --histories-home HOME --reports-root DIR [--home H]
      [--date D] [--timezone TZ] [--content-language L] [--log FILE] [--timeout SECS]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

REPORT_DATE = "2026-01-15"
GEN_WORKSPACE = Path(__file__).resolve().parent / "gen_workspace.py"
# Longest `prepare` may take (a day of a few dozen sessions takes seconds).
PREPARE_TIMEOUT = 600
# What of the caller's environment prepare must not see: prompt-diary's own configuration, a
# workspace or timezone of the caller's, and any model credentials.
PREPARE_UNSET = ("PROMPT_DIARY_HOME", "PROMPT_DIARY_CONFIG", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                 "PROMPT_DIARY_WORKSPACE", "PROMPT_DIARY_CONTENT_LANGUAGE", "TZ", "OPENAI_API_KEY",
                 "OPENAI_BASE_URL", "CODEX_API_KEY")


def dumps_records(records: list[dict], compact: bool = False) -> str:
    separators = (",", ":") if compact else None
    return "".join(json.dumps(r, ensure_ascii=False, separators=separators) + "\n" for r in records)


def claude_path(root: Path, cwd: str, sid: str) -> Path:
    """Where Claude Code keeps session `sid` of the project in `cwd`, under its projects root."""
    return root / cwd.replace("/", "-") / f"{sid}.jsonl"


def stamp_claude(record: dict, cwd: str, sid: str, n: int, timestamp: str) -> dict:
    """The `n`th record of Claude Code session `sid` given what prepare reads: its project's
    `cwd`, the session id, a `uuid` (uuid5 of the session and `n`) and its timestamp."""
    record["timestamp"] = timestamp
    record.update(cwd=cwd, sessionId=sid, uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{sid}/{n}")))
    return record


def codex_path(root: Path, sid: str, started: str) -> Path:
    """Where Codex keeps the rollout of session `sid` started at `started` (ISO 8601, UTC),
    under its sessions root: `YYYY/MM/DD/rollout-YYYY-MM-DDTHH-MM-SS-<sid>.jsonl`."""
    y, m, d = started[:10].split("-")
    time = started[11:19].replace(":", "-")
    return root / y / m / d / f"rollout-{y}-{m}-{d}T{time}-{sid}.jsonl"


def codex_meta(sid: str, cwd: str, started: str) -> dict:
    """A rollout's `session_meta` header: what prepare reads of a Codex session."""
    return {"timestamp": started, "type": "session_meta", "payload": {
        "id": sid, "timestamp": started, "cwd": cwd, "originator": "codex_cli_rs", "cli_version": "0.50.0",
        "source": "cli"}}


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
            codex_root, claude_root = history_roots(hist_dir)
            if row["source"] == "codex":
                started = f"{REPORT_DATE}T09:00:00.000Z"
                records.append(codex_meta(sid, cwd, started))
                dest = codex_path(codex_root, sid, started)
            else:
                dest = claude_path(claude_root, cwd, sid)
            lines = (index.parent / row["session_path"]).read_bytes().decode("utf-8").splitlines()
            for k, text in enumerate(lines):
                record = json.loads(text)
                if record.get("type") == "session_meta" and records:
                    # The generated session's own header: one header, with what prepare reads.
                    records[0]["payload"] = dict(record.get("payload") or {}, **records[0]["payload"])
                    continue
                timestamp = f"{REPORT_DATE}T{10 + n:02d}:{k // 60 % 60:02d}:{k % 60:02d}.000Z"
                if row["source"] == "codex":
                    record["timestamp"] = timestamp
                else:
                    stamp_claude(record, cwd, sid, k, timestamp)
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


def history_roots(hist_dir: Path) -> tuple[Path, Path]:
    """The Codex sessions root and the Claude Code projects root of `write_histories`'s layout."""
    return hist_dir / "codex", hist_dir / "claude"


def home_roots(home: Path) -> tuple[Path, Path]:
    """The Codex sessions root and the Claude Code projects root of a home, where the tools
    keep them (`~/.codex/sessions`, `~/.claude/projects`)."""
    return home / ".codex" / "sessions", home / ".claude" / "projects"


def prepare(venv_bin: Path, hist_dir: Path, reports_root: Path, home: Path, *, date: str = REPORT_DATE,
            timezone: str = "UTC", roots: tuple[Path, Path] | None = None, content_language: str | None = None,
            log: Path | None = None, timeout: float = PREPARE_TIMEOUT) -> Path:
    """Run the prompt-diary of the venv whose bin directory is `venv_bin` on the histories in
    `hist_dir` (written by `write_histories`; `roots`, as (Codex sessions, Claude projects),
    names others) for `date` in `timezone`; returns the workspace it prepared
    (`reports_root/work/<date>`). prepare's output goes to `log` (else nowhere); one that
    takes longer than `timeout` seconds is killed. Raises CalledProcessError if prepare
    fails, TimeoutExpired if it was killed."""
    codex, claude = roots or history_roots(hist_dir)
    env = {k: v for k, v in os.environ.items() if k not in PREPARE_UNSET}
    env.update(PROMPT_DIARY_CODEX_SESSIONS=str(codex), PROMPT_DIARY_CLAUDE_PROJECTS=str(claude), HOME=str(home))
    if content_language is not None:
        env["PROMPT_DIARY_CONTENT_LANGUAGE"] = content_language
    command = [str(venv_bin / "prompt-diary"), "prepare", "--date", date, "--timezone", timezone,
               "--reports-root", str(reports_root), "--quiet"]
    if log is None:
        subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, timeout=timeout)
    else:
        with log.open("wb") as out:
            subprocess.run(command, env=env, check=True, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
    return reports_root / "work" / date


def audit_manifest(reports_root: Path) -> dict:
    """The private audit manifest prepare wrote beside the workspace."""
    path = reports_root / "private" / REPORT_DATE / "audit.manifest.json"
    return json.loads(path.read_text(encoding="utf-8"))


def main() -> int:
    parser = argparse.ArgumentParser(description="prompt-diary's prepare on a home's histories")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="run prepare; prints the workspace it made")
    p.add_argument("--venv-bin", type=Path, required=True, help="the bin directory of prompt-diary's venv")
    p.add_argument("--histories-home", type=Path, required=True,
                   help="a home holding .codex/sessions and .claude/projects")
    p.add_argument("--home", type=Path, help="HOME for prepare (default: the histories' home)")
    p.add_argument("--reports-root", type=Path, required=True)
    p.add_argument("--date", default=REPORT_DATE)
    p.add_argument("--timezone", default="UTC")
    p.add_argument("--content-language")
    p.add_argument("--log", type=Path)
    p.add_argument("--timeout", type=float, default=PREPARE_TIMEOUT)
    a = parser.parse_args()
    try:
        ws = prepare(a.venv_bin, a.histories_home, a.reports_root, a.home or a.histories_home, date=a.date, timezone=a.timezone,
                     roots=home_roots(a.histories_home), content_language=a.content_language, log=a.log,
                     timeout=a.timeout)
    except subprocess.TimeoutExpired:
        print(f"histories: prompt-diary prepare took longer than {a.timeout:g} s and was killed", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as err:
        print(f"histories: prompt-diary prepare failed (exit {err.returncode})", file=sys.stderr)
        return 1
    print(ws)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
