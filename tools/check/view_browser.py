#!/usr/bin/env python3
"""`evidence-store view` in a real browser: hostile text stays text, nothing is fetched, and
the page is drawn.

Copies the example workspace, plants HTML, attribute, script and URL payloads in a session's
lines (a user message, an assistant message with agent citations, a long tool result), in a
chain's summaries (its card), a project label, a work item and the daily report, with a
right-to-left override and NUL and other control characters among them, imports, writes the
page with `view`, and opens it in headless Chromium:

- `--dump-dom`: the DOM after the page's script ran holds the planted text as text, exactly
  one <script> and one <style> (the page's own), no element a payload would make (img, svg,
  iframe, object, embed, link, base, form, textarea, a second meta refresh), no `on*`
  attribute, every link a `#fragment`, the title unchanged, and the Content-Security-Policy;
- no fetch: every payload that would load something points at a local HTTP listener, which
  must see no request at all;
- `--screenshot`: a PNG of more than one colour (decoded here, no library);
- text that cannot mislead: no raw override or control character in the DOM, each shown as a
  visible `\\uXXXX`, and every planted text inside a `<bdi>` (so none reorders its neighbours).

Then the day's story stands first: on the example as it ships (its cards, work items and
daily report) and on a generated day of 45 sessions with a chain per turn
(tools/lib/day_documents.py), the report title and every project's summary are in
Chromium's DOM before the first chain, and every link stays among the day's own pages.

Exit 0 when every check holds; otherwise the failed checks and exit 1.
"""

from __future__ import annotations

import argparse
import html.parser
import http.server
import json
import os
import re
import shutil
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "lib"))  # tools/lib: the shared modules
import cargo_target  # noqa: E402
import day_documents  # noqa: E402
import example  # noqa: E402

PROJECT = "Demo-0123456789ab"


def payload(port: int, tag: str) -> str:
    """Every shape of markup a hostile string could try; each would set the title, or
    fetch from the local listener, only if it became markup."""
    url = f"http://127.0.0.1:{port}/{tag}"
    return (
        f"<script>document.title='PWNED-{tag}'</script>"
        f"\"><img src=x onerror=\"document.title='PWNED-{tag}'\">"
        f"'><svg onload=document.title='PWNED-{tag}'></svg>"
        f"</textarea><iframe src=\"{url}/iframe\"></iframe>"
        f"<a href=\"javascript:document.title='PWNED-{tag}'\">click</a>"
        f"<img src=\"{url}/img\"><link rel=stylesheet href=\"{url}/css\">"
        f"<style>body{{background:url({url}/bg)}}</style>"
        f"<meta http-equiv=\"refresh\" content=\"0;url={url}/refresh\">"
        f"<base href=\"{url}/\"><form action=\"{url}/form\"><textarea>"
        f"<!-- ]]> --><object data=\"{url}/object\"></object>"
    )


def plant(ws: Path, port: int) -> list[str]:
    """Writes the payloads into the workspace; returns the markers that must show as text."""
    proj = ws / "projects" / PROJECT
    label = payload(port, "label")
    (proj / "project.json").write_text(
        json.dumps({"schema_version": 2, "project_key": PROJECT, "project_label": "Demo \u202e" + label})
    )
    user = payload(port, "line") + " NUL\u0000 BEL\u0007 ESC\u001b RLO\u202e LRI\u2066 end"
    cite = (
        f"Done.\n\n**Evidence**: [<script>document.title='PWNED-cite'</script>]"
        f"(javascript:document.title='PWNED-url')\n"
        f"**Evidence**: ```bash\n<img src=x onerror=\"document.title='PWNED-cmd'\">\n```\n"
        f"**Evidence**: src/missing.py:1-2"
    )
    long_output = payload(port, "tool") + "x" * 20000
    lines = [
        {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": user}]}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "e1", "name": "Bash", "input": {"command": payload(port, "input")}}]}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "e1", "content": long_output}]}},
        {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": cite}]}},
    ]
    session = proj / "sessions" / "claude-code" / "evil.jsonl"
    session.write_text("".join(json.dumps(line) + "\n" for line in lines))
    row = {
        "session_path": "sessions/claude-code/evil.jsonl", "session_ref": "S0003",
        "source": "claude-code", "source_session_id": "evil", "subagent_path": "",
        "target_start_line": 1, "target_end_line": 4,
        "turns": [{"target_subagents": [], "turn_ref": "T0001", "turn_start_line": 1, "turn_end_line": 4}],
    }
    with open(proj / "sessions.index.jsonl", "a") as index:
        index.write(json.dumps(row) + "\n")
    chain_text = payload(port, "chain") + " RLO\u202e NUL\u0000 BS\u0008"
    card = {
        "schema_version": 1, "project_key": PROJECT, "session_ref": "S0003",
        "evidence_chains": [{
            "turn_ref": "T0001",
            "trigger": {"type": "explicit_user_message", "summary": chain_text,
                        "quoted_messages": [{"text": chain_text, "citations": [{"lines": "1-1"}]}],
                        "citations": [{"lines": "1-1"}]},
            "agent_reactions": [{"summary": chain_text, "citations": [{"lines": "2-3"}]}],
            "outcomes": [{"category": "code_outcome", "summary": chain_text, "citations": [{"lines": "3-4"}]}],
            "observed_checks": [],
            "terminal_state": {"type": "material_result", "summary": chain_text,
                               "citations": [{"lines": "4-4"}]},
            "materiality": "material",
        }],
    }
    (proj / "evidence").mkdir(exist_ok=True)
    (proj / "evidence" / "S0003.json").write_text(json.dumps(card, indent=2) + "\n")
    item_text = payload(port, "item")
    envelope = {
        "schema_version": 1, "project_key": PROJECT, "project_label": "Demo",
        "work_items": [{
            "work_item_ref": "W0001", "kind": "material_work_item", "title": item_text,
            "covered_turns": [{"session_ref": "S0003", "turn_ref": "T0001"}],
            "trigger": {"summary": item_text, "evidence_refs": [{"session_ref": "S0003", "turn_ref": "T0001"}]},
            "agent_reaction": {"summary": item_text, "main_actions": [item_text]},
            "outcomes": [], "terminal_states": [], "limits": [item_text], "confidence": "high",
        }],
        "source_user_messages": [],
    }
    (proj / "project-synthesis.json").write_text(json.dumps(envelope, indent=2) + "\n")
    report_text = payload(port, "report")
    report = {
        "schema_version": 1, "report_date": "2026-01-15", "status": "final",
        "report_title": {"text": report_text, "citations": [
            {"project_key": PROJECT, "session_ref": "S0003", "turn_ref": "T0001", "lines": "1-4"}]},
        "projects": [{"project_key": PROJECT, "project_label": report_text, "summary": report_text,
                      "work_items": [], "source_user_messages": []}],
    }
    (ws / "daily-report.json").write_text(json.dumps(report, indent=2) + "\n")
    return [f"document.title='PWNED-{tag}'" for tag in ("label", "line", "chain", "item", "report")] + [
        "PWNED-cite", "PWNED-url", "PWNED-cmd"]


class Listener(socketserver.ThreadingTCPServer):
    """Counts every connection; the page must make none."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.hits: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer.hits.append(self.path)
                self.send_response(204)
                self.end_headers()

            do_POST = do_GET

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    def verify_request(self, request, client_address) -> bool:  # type: ignore[override]
        self.hits.append(f"connection from {client_address}")
        return True


class Dom(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: dict[str, int] = {}
        self.on_attrs: list[str] = []
        self.hrefs: list[str] = []
        self.metas: list[dict[str, str | None]] = []
        self.title = ""
        self.text: list[str] = []
        self._in_title = False
        self._bdi = 0
        # Text holding a planted payload that stands outside every <bdi>.
        self.outside_bdi: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag == "bdi":
            self._bdi += 1
        for name, value in attrs:
            if name.startswith("on"):
                self.on_attrs.append(f"<{tag} {name}={value!r}>")
            if name in ("href", "src", "action", "data", "formaction"):
                self.hrefs.append(f"{tag}.{name}={value}")
        if tag == "meta":
            self.metas.append(dict(attrs))
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag == "bdi":
            self._bdi -= 1

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif "PWNED" in data and self._bdi <= 0:
            self.outside_bdi.append(data[:80])
        self.text.append(data)


def png_colours(path: Path, enough: int = 3) -> int:
    """How many distinct pixel values the PNG holds (counting stops at `enough`)."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    if header is None:
        raise ValueError("no IHDR")
    width, height, depth, colour_type, _, _, interlace = header
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour_type]
    if depth != 8 or interlace != 0:
        raise ValueError(f"unsupported PNG: depth {depth}, interlace {interlace}")
    bpp, stride = channels, width * channels
    raw = zlib.decompress(idat)
    prev = bytearray(stride)
    seen: set[bytes] = set()
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        for x in range(0, stride, bpp * 7):
            seen.add(bytes(line[x:x + bpp]))
        if len(seen) >= enough:
            return len(seen)
        prev = line
    return len(seen)


def chromium_args(chromium: str, profile: str) -> list[str]:
    return [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-default-apps", "--disable-extensions",
            "--hide-scrollbars", f"--user-data-dir={profile}"]


def run_chromium(chromium: str, extra: list[str], url: str) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="view-chromium-")
    try:
        return subprocess.run(chromium_args(chromium, profile) + extra + [url],
                              capture_output=True, text=True, timeout=180)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


# Planted where no reader could see them: each must show as its visible escape.
HIDDEN = {"\u0000": "\\u0000", "\u0007": "\\u0007", "\u0008": "\\u0008", "\u001b": "\\u001b",
          "\u202e": "\\u202e", "\u2066": "\\u2066"}


def inspect(chromium: str, page: Path, shot: Path, markers: list[str], listener: Listener,
            check_dom: bool, title: str = "") -> list[tuple[str, bool]]:
    """The checks on one page, as (what, held)."""
    out: list[tuple[str, bool]] = []
    listener.hits.clear()
    url = page.as_uri()
    dumped = run_chromium(chromium, ["--dump-dom"], url)
    out.append((f"chromium --dump-dom ran (exit {dumped.returncode})",
                dumped.returncode == 0 and "</html>" in dumped.stdout))
    dom = Dom()
    dom.feed(dumped.stdout)
    text = "".join(dom.text)
    planted = {t: n for t, n in dom.tags.items()
               if t in ("img", "svg", "iframe", "object", "embed", "link", "base", "form", "textarea")}
    out.append((f"no planted element ({planted})", not planted))
    out.append((f"no event-handler attribute ({dom.on_attrs[:3]})", not dom.on_attrs))
    outside = [h for h in dom.hrefs if not h.split("=", 1)[1].startswith("#")]
    out.append((f"every link is a #fragment ({outside[:3]})", not outside))
    if check_dom:
        out.append((f"one <script>, the page's own (found {dom.tags.get('script')})", dom.tags.get("script") == 1))
        out.append((f"one <style>, the page's own (found {dom.tags.get('style')})", dom.tags.get("style") == 1))
        out.append((f"only the page's five <meta> (found {dom.tags.get('meta')})", dom.tags.get("meta") == 5))
        out.append((f"the title is the page's own ({dom.title[:60]!r}…)", dom.title == title))
        missing = [m for m in markers if m not in text]
        out.append((f"every payload shows as text ({missing})", not missing))
        csp = [m for m in dom.metas if (m.get("http-equiv") or "").lower() == "content-security-policy"]
        out.append(("the Content-Security-Policy forbids everything but the page's own style and script",
                    bool(csp) and (csp[0].get("content") or "").startswith("default-src 'none';")))
        out.append(("the page's script ran under the policy (the search box is ready)",
                    'data-search="ready"' in dumped.stdout))
        filtered = run_chromium(chromium, ["--dump-dom"], url + "#search=PWNED-chain")
        said = re.search(r'id="qn">(\d+) of (\d+) blocks match<', filtered.stdout)
        out.append((f"#search= filters the page as typed search does ({said.group(0) if said else 'no count'})",
                    bool(said) and 0 < int(said.group(1)) < int(said.group(2))
                    and filtered.stdout.count('class="s hide"') + filtered.stdout.count(' hide"') > 0))
        for want in ("S0001", "S0002", "S0003", "T0002", "W0001", "unchecked", "tool_output handle"):
            out.append((f"the page shows {want}", want in text))
        raw = [repr(c) for c in HIDDEN if c in dumped.stdout]
        out.append((f"no raw override or control character in the DOM ({raw})", not raw))
        unseen = [e for e in HIDDEN.values() if e not in text]
        out.append((f"each is shown as its visible escape (missing {unseen})", not unseen))
        out.append((f"every planted text is inside a <bdi> ({dom.outside_bdi[:2]})", not dom.outside_bdi))
    drawn = run_chromium(chromium, ["--window-size=1280,1600", f"--screenshot={shot}"], url)
    out.append((f"chromium --screenshot ran (exit {drawn.returncode})", drawn.returncode == 0 and shot.is_file()))
    if check_dom and shot.is_file():
        colours = png_colours(shot)
        out.append((f"the screenshot is not blank ({colours} colours seen)", colours >= 3))
    out.append((f"no fetch reached the listener ({listener.hits[:3]})", not listener.hits))
    return out


def written_page(binary: str, ws: Path, out: Path) -> Path:
    """Imports `ws` and writes its page at `out`."""
    env = {k: v for k, v in os.environ.items() if k != "PROMPT_DIARY_WORKSPACE"}
    for step in (["import"], ["view", "--out", str(out)]):
        done = subprocess.run([binary, "--workspace", str(ws), *step], capture_output=True, text=True,
                              env=env, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"evidence-store {' '.join(step)}: {done.stderr}")
    return out


def story_first(chromium: str, page: Path, wants: list[str], what: str) -> list[tuple[str, bool]]:
    """`wants` (the title, each project's summary) stand in Chromium's DOM of `page`
    before its first chain, and every link stays among the day's own pages."""
    dumped = run_chromium(chromium, ["--dump-dom"], page.as_uri()).stdout
    first_chain = dumped.find('id="chain:')
    out = [(f"{what}: chromium --dump-dom drew the page", "</html>" in dumped)]
    for want in wants:
        at = dumped.find(want)
        where = "absent" if at < 0 else f"at {at}, first chain at {first_chain}"
        out.append((f"{what}: {want[:50]!r} stands before the first chain ({where})",
                    at >= 0 and (first_chain < 0 or at < first_chain)))
    dom = Dom()
    dom.feed(dumped)
    own = re.compile(rf"{re.escape(page.stem)}(\.[0-9a-f]{{12}}\.\d{{4,}})?\.html#")
    stray = [h for h in dom.hrefs if not (h.split("=", 1)[1].startswith("#") or own.match(h.split("=", 1)[1]))]
    out.append((f"{what}: every link is to the day's own pages ({stray[:3]})", not stray))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(cargo_target.binary("debug")))
    ap.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    ap.add_argument("--keep", help="also copy the page and screenshot into this directory")
    args = ap.parse_args()

    listener = Listener()
    port = listener.server_address[1]
    threading.Thread(target=listener.serve_forever, daemon=True).start()
    failures: list[str] = []

    def check(ok: bool, what: str) -> None:
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory(prefix="view-browser-") as tmp:
        ws = Path(tmp) / "ws"
        example.copy(ws)
        markers = plant(ws, port)
        env = {k: v for k, v in os.environ.items() if k != "PROMPT_DIARY_WORKSPACE"}
        for step in (["import"], ["view", "--out", str(Path(tmp) / "page.html")]):
            done = subprocess.run([args.bin, "--workspace", str(ws), *step], capture_output=True,
                                  text=True, env=env, timeout=300)
            if done.returncode != 0:
                print(f"FAIL evidence-store {' '.join(step)}: {done.stderr}", file=sys.stderr)
                return 1
        page = Path(tmp) / "page.html"
        shot = Path(tmp) / "shot.png"
        report_text = payload(port, "report")
        title = report_text.encode()[:200].decode(errors="ignore") + " · 2026-01-15"
        for what, ok in inspect(args.chromium, page, shot, markers, listener, check_dom=True, title=title):
            check(ok, what)
        # The day's story first: on the example as it ships, and on a day of 45 sessions.
        shipped = Path(tmp) / "shipped"
        example.copy(shipped, documents=True)
        story = [t for t in ("Parser off-by-one fixed and the suite run green",
                             "Fixed the failing parser test, an off-by-one in parse_tokens")]
        for what, ok in story_first(args.chromium, written_page(args.bin, shipped, Path(tmp) / "example.html"),
                                    story, "the example"):
            check(ok, what)
        day = Path(tmp) / "day45"
        subprocess.run([sys.executable, str(ROOT / "tools" / "lib" / "gen_workspace.py"), "--out", str(day),
                        "--projects", "3", "--sessions", "15", "--turns", "12"], check=True, capture_output=True)
        day_documents.write(day)
        labels = [json.loads(p.read_text())["project_label"] for p in sorted(day.glob("projects/*/project.json"))]
        wants = [day_documents.TITLE] + [day_documents.summary_of(label) for label in labels]
        first = written_page(args.bin, day, Path(tmp) / "day45.html")
        for what, ok in story_first(args.chromium, first, wants, "a day of 45 sessions"):
            check(ok, what)
        # The control: the same payloads written raw into a page without a policy must
        # trip the checks above, or they could not see a payload that became markup.
        control = Path(tmp) / "control.html"
        control.write_text("<!DOCTYPE html><title>Evidence of 2026-01-15</title><p>"
                           + payload(port, "control") + "</p>")
        seen = {what: ok for what, ok in inspect(args.chromium, control, Path(tmp) / "control.png",
                                                  [], listener, check_dom=False)}
        tripped = [w for w, ok in seen.items() if not ok]
        check(any(w.startswith("no planted element") for w in tripped)
              and any(w.startswith("no event-handler") for w in tripped)
              and any(w.startswith("no fetch reached") for w in tripped),
              f"the control page (raw payloads, no policy) trips the checks ({len(tripped)} tripped)")
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            for f in (page, shot):
                if f.is_file():
                    shutil.copy(f, args.keep)
    listener.shutdown()
    if failures:
        print(f"view_browser: {len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("view_browser: every check holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
