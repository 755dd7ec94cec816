//! `view`'s page as a person reads it, through the binary: the day's story first and as
//! cards, the example showing the product, a size that follows what is shown rather than
//! what the cards repeat, text that cannot mislead, cards read as `serve` reads them, and
//! stops and files. Each runs [`common::bin`], so `EVIDENCE_STORE_TEST_BIN` can name
//! an older build to show the test fails there.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::common::{self, PROJECT, Workspace};

/// Runs `view` (with `args`) on `ws`.
fn view(ws: &Workspace, args: &[&str]) -> Output {
    Command::new(common::bin())
        .arg("--workspace")
        .arg(ws.root())
        .arg("view")
        .args(args)
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env("RUST_LOG", "off")
        .output()
        .expect("view runs")
}

fn run(ws: &Workspace, args: &[&str]) -> Output {
    Command::new(common::bin())
        .arg("--workspace")
        .arg(ws.root())
        .args(args)
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env("RUST_LOG", "off")
        .output()
        .expect("binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Imports `ws` and returns the page `view` writes to its default place.
fn page_of(ws: &Workspace) -> String {
    let out = run(ws, &["import"]);
    assert!(out.status.success(), "import: {}", stderr(&out));
    let out = view(ws, &[]);
    assert!(out.status.success(), "view: {}", stderr(&out));
    String::from_utf8(ws.read(".evidence-store/view.html")).expect("UTF-8 page")
}

/// Where `needle` first stands in `page`.
fn at(page: &str, needle: &str) -> usize {
    page.find(needle)
        .unwrap_or_else(|| panic!("the page lacks {needle:?}"))
}

/// A chain of the turn spanning `a..=b`, citing its first and last lines.
fn chain(turn: &str, a: u64, b: u64, what: &str) -> Value {
    json!({
        "turn_ref": turn,
        "trigger": {"type": "explicit_user_message", "summary": format!("The user asked for {what}."),
                    "quoted_messages": [{"text": format!("please do {what}"), "citations": [{"lines": format!("{a}-{a}")}]}],
                    "citations": [{"lines": format!("{a}-{a}")}]},
        "agent_reactions": [{"summary": format!("The agent did {what}."), "citations": [{"lines": format!("{b}-{b}")}]}],
        "outcomes": [{"category": "code_outcome", "summary": format!("{what} is done."), "citations": [{"lines": format!("{a}-{b}")}]}],
        "observed_checks": [],
        "terminal_state": {"type": "material_result", "summary": "Done.", "citations": [{"lines": format!("{b}-{b}")}]},
        "materiality": "material",
    })
}

/// A day as agents leave it: `projects` (key, label), each with `sessions` Claude Code
/// sessions of `turns` turns (a user message, then an answer of `answer` bytes), a card
/// per session with a chain per turn, an envelope with one material work item per
/// session covering all its turns, and a daily report with a title, every project's
/// summary, engagement and team learning. The documents are written as the tools write
/// them and adopted by import.
fn day(projects: &[(&str, &str)], sessions: usize, turns: usize, answer: usize) -> Workspace {
    let ws = Workspace::empty();
    ws.write(
        "metadata.json",
        r#"{"report_date": "2026-01-15", "status": "final", "timezone": "UTC"}"#,
    );
    let mut report_projects = Vec::new();
    let mut title_refs = Vec::new();
    for (key, label) in projects {
        ws.write(
            &format!("projects/{key}/project.json"),
            json!({"project_key": key, "project_label": label}).to_string(),
        );
        let mut index = String::new();
        let mut items = Vec::new();
        for s in 1..=sessions {
            let sref = format!("S{s:04}");
            let mut lines = String::new();
            let mut rows = Vec::new();
            let mut chains = Vec::new();
            for t in 1..=turns {
                let (a, b) = (2 * t as u64 - 1, 2 * t as u64);
                let tref = format!("T{t:04}");
                let user = json!({"type": "user", "message": {"role": "user", "content": [
                    {"type": "text", "text": format!("please do step {t} of {sref} in {label}")}]}});
                let agent = json!({"type": "assistant", "message": {"role": "assistant", "content": [
                    {"type": "text", "text": format!("step {t} done: {}", "w".repeat(answer))}]}});
                lines.push_str(&format!("{user}\n{agent}\n"));
                rows.push(json!({"target_subagents": [], "turn_ref": tref, "turn_start_line": a, "turn_end_line": b}));
                chains.push(chain(&tref, a, b, &format!("step {t}")));
            }
            ws.write(
                &format!("projects/{key}/sessions/claude-code/{s}.jsonl"),
                lines,
            );
            let row = json!({"session_path": format!("sessions/claude-code/{s}.jsonl"), "session_ref": sref,
                "source": "claude-code", "source_session_id": format!("c{s}"), "subagent_path": "",
                "target_start_line": 1, "target_end_line": 2 * turns, "turns": rows});
            index.push_str(&format!("{row}\n"));
            let card = json!({"schema_version": 1, "project_key": key, "session_ref": sref, "evidence_chains": chains});
            ws.write(
                &format!("projects/{key}/evidence/{sref}.json"),
                format!("{}\n", serde_json::to_string_pretty(&card).unwrap()),
            );
            let covered: Vec<Value> = (1..=turns)
                .map(|t| json!({"session_ref": sref, "turn_ref": format!("T{t:04}")}))
                .collect();
            items.push(json!({
                "work_item_ref": format!("W{s:04}"), "title": format!("Steps of {sref} in {label}"),
                "kind": "material_work_item", "disposition": "completed", "confidence": "high",
                "covered_turns": covered, "trigger_summary": format!("The user asked for the steps of {sref}."),
                "agent_reaction_summary": "The agent did them.",
                "outcomes": [{"what_changed": "The steps are done.", "confidence": "high",
                              "citations": [{"project_key": key, "session_ref": sref, "turn_ref": "T0001", "lines": "1-2"}]}],
                "terminal_states": [{"summary": "Done.", "citations": []}], "limits": [],
            }));
        }
        ws.write(&format!("projects/{key}/sessions.index.jsonl"), index);
        let envelope = json!({"schema_version": 1, "project_key": key, "project_label": label,
            "work_items": [], "source_user_messages": []});
        ws.write(
            &format!("projects/{key}/project-synthesis.json"),
            format!("{}\n", serde_json::to_string_pretty(&envelope).unwrap()),
        );
        let cite = json!({"project_key": key, "session_ref": "S0001", "turn_ref": "T0001", "lines": "1-2"});
        title_refs.push(cite.clone());
        report_projects.push(json!({"project_key": key, "project_label": label,
            "summary": {"text": format!("Summary of {label}: every step of every session was done."), "citations": [cite]},
            "work_items": items, "source_user_messages": []}));
    }
    let report = json!({
        "schema_version": 1, "report_date": "2026-01-15", "status": "final",
        "window": {"start": null, "end": null, "timezone": "UTC"},
        "report_title": {"text": "Every step of the day done", "citations": title_refs.clone()},
        "overall_confidence": null,
        "projects": report_projects,
        "engagement_assessment": {"overall_reading": {"text": "The people set every step.", "citations": title_refs.clone(), "confidence": "medium"},
                                  "observations": [], "limits": []},
        "team_learning": {"takeaways": {"text": "Small steps worked.", "citations": title_refs, "confidence": "low"},
                          "patterns": [], "limits": []},
    });
    ws.write(
        "daily-report.json",
        format!("{}\n", serde_json::to_string_pretty(&report).unwrap()),
    );
    ws
}

/// The day's story opens the page: the report title is its heading, then each
/// project's summary, its work items (title, disposition, covered turns), engagement
/// and team learning, then the grid, then the chains; the state hash is in the footer.
#[test]
fn the_day_s_story_comes_before_the_grid_and_the_chains() {
    let ws = Workspace::example_with_documents();
    let page = page_of(&ws);
    let first_chain = at(&page, "id=\"chain:");
    let grid = at(&page, "<a class=\"cell");
    let title = at(&page, "Parser off-by-one fixed and the suite run green");
    let summary = at(
        &page,
        "Fixed the failing parser test, an off-by-one in parse_tokens",
    );
    let item = at(&page, "Fixed the off-by-one in the parser");
    let disposition = at(&page, ">completed<");
    for (what, place) in [
        ("title", title),
        ("summary", summary),
        ("work item", item),
        ("disposition", disposition),
    ] {
        assert!(place < grid, "the {what} comes after the grid");
    }
    let engagement = at(&page, "How the people worked with the agents");
    let learning = at(&page, "What the team can take from the day");
    assert!(engagement < grid && learning < grid);
    assert!(grid < first_chain, "the grid comes after the first chain");
    assert!(title < summary && summary < item && item < engagement && engagement < learning);
    assert!(page.contains("<h1><bdi>Parser off-by-one fixed and the suite run green</bdi></h1>"));
    assert!(page.contains("<span class=\"badge d-done\"><bdi>completed</bdi></span>"));
    // The covered turns of W0001 link to the first turn's chain, as one range.
    assert!(
        page.contains("covers <bdi>Demo</bdi>: <a href=\"#turn:Demo-0123456789ab:S0001:T0001\"><bdi>S0001 T0001–T0002</bdi></a>"),
        "{page}"
    );
    // The state hash only in the footer, after every chain.
    let state = page
        .split("<code class=\"state\">")
        .nth(1)
        .and_then(|s| s.split('<').next())
        .expect("the state in the footer");
    assert_eq!(state.len(), 64);
    assert_eq!(page.matches(state).count(), 1);
    assert!(at(&page, state) > page.rfind("<details class=\"turn").unwrap());
    assert!(at(&page, state) > at(&page, "<footer"));
    // A cell's tooltip is its turn's first user message.
    assert!(
        page.contains("title=\"Fix the failing parser test.\nT0001 · lines 1–6 · chain written\""),
        "{page}"
    );
    assert!(page.contains("title=\"Run the test suite\nT0001 · lines 2–8 · chain written\""));
    // Chains are collapsed until opened.
    assert!(!page.contains(
        "<details class=\"turn s covered\" id=\"turn:Demo-0123456789ab:S0001:T0001\" open"
    ));
}

/// On a generated day of three projects the title and every project's summary stand
/// before the first chain too.
#[test]
fn every_project_s_summary_stands_before_the_first_chain_on_a_generated_day() {
    let ws = day(
        &[
            ("Alpha-aaaaaaaaaaaa", "Alpha"),
            ("Beta-bbbbbbbbbbbb", "Beta"),
            ("Gamma-cccccccccccc", "Gamma"),
        ],
        4,
        3,
        100,
    );
    let page = page_of(&ws);
    let first_chain = at(&page, "id=\"chain:");
    assert!(at(&page, "Every step of the day done") < first_chain);
    for label in ["Alpha", "Beta", "Gamma"] {
        assert!(
            at(&page, &format!("Summary of {label}: every step")) < first_chain,
            "{label}'s summary comes after a chain"
        );
    }
    // Twelve sessions of three turns: 36 green cells, no red one.
    assert_eq!(page.matches("class=\"cell written\"").count(), 36);
    assert_eq!(page.matches("class=\"cell missing\"").count(), 0);
}

/// Work items and report sections are cards: no null or empty field, no JSON markers,
/// covered turns as ranges, every reference naming its project, no file name as a
/// heading or sentence.
#[test]
fn work_items_and_the_report_are_cards_naming_their_projects_without_nulls() {
    let ws = day(
        &[
            ("Alpha-aaaaaaaaaaaa", "Alpha"),
            ("Beta-bbbbbbbbbbbb", "Beta"),
        ],
        1,
        15,
        10,
    );
    let page = page_of(&ws);
    // The page but its script (whose code says `null`); the sessions hold none of these.
    let body = &page[..at(&page, "<script>")];
    for raw in [
        "null",
        "overall_confidence",
        "engagement_assessment",
        "summary:",
        "• ",
        "category:",
        "→ S0001",
    ] {
        assert!(!body.contains(raw), "the page shows {raw:?}");
    }
    let story = &page[..at(&page, "<a class=\"cell")];
    for file in [
        "project-synthesis.json",
        "daily-report.json",
        "evidence/S0001.json",
    ] {
        assert!(!page.contains(file), "the page names the file {file}");
    }
    // Fifteen covered turns are one range, linked to the first.
    assert!(
        story.contains("covers <bdi>Alpha</bdi>: <a href=\"#turn:Alpha-aaaaaaaaaaaa:S0001:T0001\"><bdi>S0001 T0001–T0015</bdi></a>"),
        "{story}"
    );
    // The title rests on a turn of each project, each named.
    assert!(
        story.contains("The title rests on <bdi>Alpha</bdi>: <a href=\"#turn:Alpha-aaaaaaaaaaaa:S0001:T0001\"><bdi>S0001 T0001</bdi></a>; <bdi>Beta</bdi>: <a href=\"#turn:Beta-bbbbbbbbbbbb:S0001:T0001\"><bdi>S0001 T0001</bdi></a>."),
        "{story}"
    );
}

/// The example ships what a day looks like: a chain for every turn (green cells), two
/// work items and a titled daily report, all written through the tools.
#[test]
fn the_example_shows_green_cells_work_items_and_a_titled_report() {
    let ws = Workspace::example_with_documents();
    let page = page_of(&ws);
    assert_eq!(page.matches("class=\"cell written\"").count(), 3);
    assert_eq!(page.matches("class=\"cell missing\"").count(), 0);
    assert!(page.contains("id=\"work_item:Demo-0123456789ab:W0001\""));
    assert!(page.contains("id=\"work_item:Demo-0123456789ab:W0002\""));
    assert!(!page.contains("No Supported Work Evidence"));
    assert!(
        page.contains(
            "<title>Parser off-by-one fixed and the suite run green · 2026-01-15</title>"
        )
    );
}

/// The README's "Use it" commands (import, build, export, view) on the example write
/// its documents back byte for byte: trying them changes nothing git tracks.
#[test]
fn the_readme_steps_write_the_example_s_documents_back_unchanged() {
    let ws = Workspace::example_with_documents();
    let before: Vec<Vec<u8>> = documents(&ws);
    assert_eq!(before.len(), 4, "the example ships four documents");
    for step in [
        &["import"][..],
        &["build"],
        &["export"],
        &["view"],
        &["verify"],
    ] {
        let out = run(&ws, step);
        assert!(out.status.success(), "{step:?}: {}", stderr(&out));
    }
    assert_eq!(documents(&ws), before);
}

fn documents(ws: &Workspace) -> Vec<Vec<u8>> {
    [
        "daily-report.json".to_owned(),
        format!("projects/{PROJECT}/project-synthesis.json"),
        format!("projects/{PROJECT}/evidence/S0001.json"),
        format!("projects/{PROJECT}/evidence/S0002.json"),
    ]
    .iter()
    .map(|rel| ws.read(rel))
    .collect()
}

/// A 19 KB card, one chain citing the same range a thousand times: each cited line's
/// text is in the page once, the range is listed once with its count.
#[test]
fn a_range_cited_a_thousand_times_shows_its_lines_once() {
    let ws = Workspace::example();
    let mut c = chain("T0001", 1, 6, "the parser fix");
    c["outcomes"][0]["citations"] = Value::Array(vec![json!({"lines": "1-6"}); 1000]);
    let card = json!({"schema_version": 1, "project_key": PROJECT, "session_ref": "S0001", "evidence_chains": [c]});
    ws.write(
        &format!("projects/{PROJECT}/evidence/S0001.json"),
        card.to_string(),
    );
    let page = page_of(&ws);
    for n in 1..=6 {
        assert_eq!(
            page.matches(&format!("id=\"line:{PROJECT}:S0001:{n}\""))
                .count(),
            1,
            "line {n}"
        );
    }
    // The user's message: once in line 1's compact record, once in its full text, once
    // in its turn's tooltip.
    assert_eq!(page.matches("Fix the failing parser test.").count(), 3);
    assert!(page.contains("(cited 1000 times)"));
    assert!(page.len() < 200 << 10, "a {} byte page", page.len());
}

/// One chain shows at most 60 lines, and says how many it leaves out.
#[test]
fn a_chain_citing_more_lines_than_it_may_show_says_so() {
    let ws = day(&[("Alpha-aaaaaaaaaaaa", "Alpha")], 1, 100, 10);
    let card_rel = "projects/Alpha-aaaaaaaaaaaa/evidence/S0001.json";
    let mut card: Value = serde_json::from_slice(&ws.read(card_rel)).unwrap();
    card["evidence_chains"][0]["outcomes"][0]["citations"] = json!([{"lines": "1-200"}]);
    ws.write(card_rel, card.to_string());
    let page = page_of(&ws);
    let chain = page
        .split("id=\"chain:Alpha-aaaaaaaaaaaa:S0001:T0001\"")
        .nth(1)
        .and_then(|rest| rest.split("<details class=\"turn").next())
        .expect("the chain");
    assert_eq!(chain.matches("<div class=\"line s\"").count(), 60);
    assert!(
        chain.contains("140 more cited line(s) are not shown: one chain shows at most 60 lines"),
        "{chain}"
    );
}

/// The pages in `ws`'s `.evidence-store/`: (name, bytes).
fn pages(ws: &Workspace) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(ws.path(".evidence-store"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".html"))
        .map(|n| {
            let bytes = ws.read(&format!(".evidence-store/{n}"));
            (n, bytes)
        })
        .collect();
    out.sort();
    out
}

/// A day too large for one page: a first page (the story and the grid, within 8 MiB)
/// and a page per session (each within 32 MiB), each self-contained, the first linking
/// to every session page and each to the next; pages of an older state are removed, and
/// so are all session pages once the day fits one page again.
#[test]
fn a_day_too_large_for_one_page_gets_a_first_page_and_a_page_per_session() {
    // 12 sessions of 60 turns whose answers are 10 KiB: about 9 MiB of chains and lines.
    let ws = day(&[("Alpha-aaaaaaaaaaaa", "Alpha")], 12, 60, 10 << 10);
    let _ = page_of(&ws);
    let written = pages(&ws);
    assert_eq!(
        written.len(),
        13,
        "{:?}",
        written.iter().map(|p| &p.0).collect::<Vec<_>>()
    );
    let first = String::from_utf8(
        written
            .iter()
            .find(|p| p.0 == "view.html")
            .unwrap()
            .1
            .clone(),
    )
    .unwrap();
    assert!(
        first.len() as u64 <= 8 << 20,
        "first page {} bytes",
        first.len()
    );
    assert!(
        !first.contains("<details class=\"turn"),
        "the first page holds no chain"
    );
    assert!(first.contains("Summary of Alpha"));
    let state = &first.split("<code class=\"state\">").nth(1).unwrap()[..12];
    for (i, (name, bytes)) in written.iter().filter(|p| p.0 != "view.html").enumerate() {
        assert_eq!(name, &format!("view.{state}.{:04}.html", i + 1));
        assert!(
            bytes.len() as u64 <= 32 << 20,
            "{name}: {} bytes",
            bytes.len()
        );
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.contains("http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';")
        );
        assert!(
            text.contains("<style>") && text.contains("<script>"),
            "{name} is self-contained"
        );
        assert!(text.contains("<a href=\"view.html\">← The day</a>"));
        assert_eq!(text.matches("<details class=\"turn").count(), 60);
        assert!(first.contains(&format!(
            "href=\"{name}#turn:Alpha-aaaaaaaaaaaa:S{:04}:T0001\"",
            i + 1
        )));
        if i + 1 < 12 {
            assert!(
                text.contains(&format!("href=\"view.{state}.{:04}.html#session:", i + 2)),
                "{name} links to the next"
            );
        }
    }
    // A change to one card: a new state, its pages replace the old ones.
    let card_rel = "projects/Alpha-aaaaaaaaaaaa/evidence/S0003.json";
    let mut card: Value = serde_json::from_slice(&ws.read(card_rel)).unwrap();
    card["evidence_chains"][0]["trigger"]["summary"] = json!("Changed.");
    ws.write(card_rel, card.to_string());
    let _ = page_of(&ws);
    let again = pages(&ws);
    assert_eq!(again.len(), 13);
    assert!(
        again
            .iter()
            .all(|p| p.0 == "view.html" || !p.0.contains(state)),
        "old pages left"
    );
    // Fewer chains: one page again, and no session page left.
    for s in 1..=12 {
        let rel = format!("projects/Alpha-aaaaaaaaaaaa/evidence/S{s:04}.json");
        std::fs::remove_file(ws.path(&rel)).unwrap();
    }
    let _ = page_of(&ws);
    assert_eq!(pages(&ws).len(), 1);
}

/// A right-to-left override or a right-to-left label cannot reorder what stands beside
/// it: every spliced text is isolated, and the override itself is shown as an escape.
#[test]
fn a_direction_override_in_a_label_is_isolated_and_shown() {
    let ws = Workspace::example();
    ws.write(
        &format!("projects/{PROJECT}/project.json"),
        json!({"schema_version": 2, "project_key": PROJECT, "project_label": "Demo\u{202e}-omeD עברית"}).to_string(),
    );
    let page = page_of(&ws);
    assert!(
        !page.contains('\u{202e}'),
        "a raw override reached the page"
    );
    let label = "<bdi>Demo<span class=\"esc\">\\u202e</span>-omeD עברית</bdi>";
    assert!(
        page.contains(&format!(
            "{label} <span class=\"key\"><bdi>{PROJECT}</bdi></span>"
        )),
        "{page}"
    );
}

/// NUL and other control characters in session lines and cards are shown as visible
/// escapes: the page holds none of them raw (NUL would make it invalid HTML).
#[test]
fn control_characters_in_lines_and_cards_are_visible_escapes() {
    let ws = Workspace::example();
    let session = format!("projects/{PROJECT}/sessions/claude-code/c1.jsonl");
    let text = String::from_utf8(ws.read(&session)).unwrap();
    ws.write(
        &session,
        text.replacen(
            "Fix the failing parser test.",
            "Fix the\\u0000 failing\\u001b[31m test.",
            1,
        ),
    );
    let mut c = chain("T0001", 1, 6, "a bell\u{7}");
    c["trigger"]["summary"] = json!("nul\u{0} and bell\u{7} and c1\u{85}");
    let card = json!({"schema_version": 1, "project_key": PROJECT, "session_ref": "S0001", "evidence_chains": [c]});
    ws.write(
        &format!("projects/{PROJECT}/evidence/S0001.json"),
        card.to_string(),
    );
    let page = page_of(&ws);
    for c in ['\u{0}', '\u{7}', '\u{1b}', '\u{85}'] {
        assert!(!page.contains(c), "{:?} reached the page raw", c);
    }
    assert!(page.contains("nul<span class=\"esc\">\\u0000</span> and bell<span class=\"esc\">\\u0007</span> and c1<span class=\"esc\">\\u0085</span>"));
    assert!(page.contains("Fix the<span class=\"esc\">\\u0000</span> failing<span class=\"esc\">\\u001b</span>[31m test."));
    // In a tooltip, as plain text.
    assert!(
        page.contains("title=\"Fix the\\u0000 failing\\u001b[31m test.\n"),
        "{page}"
    );
}

/// A card prompt-diary's Python wrote with a lone surrogate escape reads as `serve`
/// reads it: its chains are shown, the surrogate as U+FFFD, and its turns are covered.
#[test]
fn a_card_with_a_lone_surrogate_escape_shows_its_chains() {
    let ws = Workspace::example();
    let c = chain("T0001", 1, 6, "SURROGATE");
    let text = serde_json::to_string(&json!({"schema_version": 1, "project_key": PROJECT, "session_ref": "S0001", "evidence_chains": [c]}))
        .unwrap()
        .replace("The user asked for SURROGATE.", "broken emoji \\ud83d here");
    ws.write(&format!("projects/{PROJECT}/evidence/S0001.json"), text);
    let page = page_of(&ws);
    assert!(!page.contains("not JSON"), "the card was refused");
    assert!(page.contains("broken emoji \u{fffd} here"));
    assert_eq!(page.matches("class=\"cell written\"").count(), 1);
}

/// `--out` never replaces the store's own files, a name in `.evidence-store/` other than
/// view's page, or a workspace file; each is refused with the reason and left as it was.
#[test]
fn view_out_refuses_the_store_s_files_and_the_workspace_s() {
    let ws = Workspace::example_with_documents();
    assert!(run(&ws, &["import"]).status.success());
    let store = ws.read(".evidence-store/store.redb");
    for (out, says) in [
        (".evidence-store/store.redb", "is the store's own file"),
        (
            ".evidence-store/.store.redb.rebuild-1.0",
            "is the store's own file",
        ),
        (
            ".evidence-store/documents.lock",
            "in the workspace's .evidence-store/",
        ),
        (
            ".evidence-store/other.html",
            "in the workspace's .evidence-store/",
        ),
        ("daily-report.json", "the workspace's own daily-report.json"),
        ("metadata.json", "the workspace's own metadata.json"),
        (
            "projects/Demo-0123456789ab/evidence/S0001.json",
            "inside the workspace's projects/",
        ),
    ] {
        let before = std::fs::read(ws.path(out)).ok();
        let got = view(&ws, &["--out", ws.path(out).to_str().unwrap()]);
        assert!(!got.status.success(), "--out {out} was written");
        assert!(stderr(&got).contains(says), "--out {out}: {}", stderr(&got));
        assert_eq!(std::fs::read(ws.path(out)).ok(), before, "{out} changed");
    }
    assert_eq!(ws.read(".evidence-store/store.redb"), store);
    let got = view(
        &ws,
        &[
            "--out",
            ws.path(".evidence-store/view.html").to_str().unwrap(),
        ],
    );
    assert!(got.status.success(), "{}", stderr(&got));
}

/// A name that is not UTF-8 is named as such, not as "no file".
#[test]
fn a_non_utf8_out_name_gets_a_true_message() {
    use std::os::unix::ffi::OsStrExt;
    let ws = Workspace::example();
    assert!(run(&ws, &["import"]).status.success());
    let name = std::ffi::OsStr::from_bytes(b"page-\xff.html");
    let out = Command::new(common::bin())
        .arg("--workspace")
        .arg(ws.root())
        .arg("view")
        .arg("--out")
        .arg(ws.root().join(name))
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(said.contains("the file name is not valid UTF-8"), "{said}");
    assert!(!said.contains("names no file"), "{said}");
}

/// `view` paused at `step`: sends `signal` once it says so, returns its exit code and
/// stderr.
fn view_signalled_at(
    ws: &Workspace,
    step: &str,
    signal: rustix::process::Signal,
) -> (Option<i32>, String) {
    use std::io::{BufRead, Read};
    let mut child = Command::new(common::bin())
        .arg("--workspace")
        .arg(ws.root())
        .arg("view")
        .env("EVIDENCE_STORE_PAUSE_AT", step)
        .env("RUST_LOG", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let _stdin = child.stdin.take();
    let mut err = std::io::BufReader::new(child.stderr.take().expect("piped"));
    let mut line = String::new();
    err.read_line(&mut line).expect("reads stderr");
    assert_eq!(
        line,
        format!("evidence-store: paused at {step}\n"),
        "view did not pause"
    );
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, signal).expect("signal sent");
    let status = common::exit_or_hang(&mut child, std::time::Duration::from_secs(60));
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    (status.and_then(|s| s.code()), rest)
}

/// This program's temp files in `dir`.
fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".evidence-store.tmp"))
                .collect()
        })
        .unwrap_or_default()
}

/// SIGINT, SIGTERM and SIGHUP stop `view` at its next safe point, with the page drawn
/// halfway or whole: the old page stays as it was, no temp file is left, and the exit
/// is 128 + the signal with a line saying so.
#[test]
fn every_signal_stops_view_and_leaves_the_old_page() {
    let ws = Workspace::example_with_documents();
    assert!(run(&ws, &["import"]).status.success());
    assert!(view(&ws, &[]).status.success());
    let old = ws.read(".evidence-store/view.html");
    for step in ["view-drawing", "view-before-rename"] {
        for (signal, code) in [
            (rustix::process::Signal::INT, 130),
            (rustix::process::Signal::TERM, 143),
            (rustix::process::Signal::HUP, 129),
        ] {
            let (status, said) = view_signalled_at(&ws, step, signal);
            assert_eq!(status, Some(code), "{step} {signal:?}: {said}");
            assert!(said.contains("view: stopped before"), "{said}");
            assert_eq!(
                ws.read(".evidence-store/view.html"),
                old,
                "{step} {signal:?} replaced the page"
            );
            assert_eq!(
                temp_files(&ws.path(".evidence-store")),
                Vec::<String>::new()
            );
        }
    }
}

/// A `view` killed with SIGKILL leaves its temp file; the next command of any kind
/// removes it from `.evidence-store/`, and the next `view` from the directory of its
/// `--out`.
#[test]
fn temp_files_of_killed_views_are_removed_by_the_next_command() {
    let ws = Workspace::example_with_documents();
    assert!(run(&ws, &["import"]).status.success());
    // The temp file a view killed mid-write leaves (named for a process that is gone).
    let dead = dead_pid();
    let left = format!(".view.html.{dead}.0.0123456789abcdef.evidence-store.tmp");
    ws.write(&format!(".evidence-store/{left}"), "half a page");
    assert!(run(&ws, &["dump"]).status.success());
    assert_eq!(
        temp_files(&ws.path(".evidence-store")),
        Vec::<String>::new(),
        "dump left it"
    );
    // A view really killed there.
    let (status, _) = view_signalled_at(&ws, "view-before-rename", rustix::process::Signal::KILL);
    assert_eq!(status, None, "killed, no exit code");
    assert_eq!(
        temp_files(&ws.path(".evidence-store")).len(),
        1,
        "the killed view's temp file"
    );
    assert!(run(&ws, &["dump"]).status.success());
    assert_eq!(
        temp_files(&ws.path(".evidence-store")),
        Vec::<String>::new()
    );
    // Elsewhere: a temp file of a dead process beside another page.
    let elsewhere = tempfile::tempdir().unwrap();
    let planted = format!(".day.html.{dead}.0.0123456789abcdef.evidence-store.tmp");
    let mine = format!(".other.html.{dead}.0.0123456789abcdef.evidence-store.tmp");
    for name in [&planted, &mine] {
        std::fs::write(elsewhere.path().join(name), "half a page").unwrap();
    }
    let got = view(
        &ws,
        &["--out", elsewhere.path().join("day.html").to_str().unwrap()],
    );
    assert!(got.status.success(), "{}", stderr(&got));
    assert_eq!(
        temp_files(elsewhere.path()),
        vec![mine],
        "only the page's own temp files go"
    );
}

/// The id of a process that has ended.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// What the example's page says, as a snapshot: its text and structure, with the parts
/// that change from run to run (the state hash, the time, the workspace path, the CSS
/// and script with their hashes, the version) redacted, one element a line.
#[test]
fn the_example_s_page_snapshot() {
    let ws = Workspace::example_with_documents();
    let page = page_of(&ws);
    let mut text = ws.redact(&page);
    let cut_between = |text: &mut String, open: &str, close: &str, with: &str| {
        let start = text.find(open).expect("open") + open.len();
        let end = start + text[start..].find(close).expect("close");
        text.replace_range(start..end, with);
    };
    cut_between(&mut text, "<style>", "</style>", "[view.css]");
    cut_between(&mut text, "<script>", "</script>", "[view.js]");
    cut_between(
        &mut text,
        "content=\"default-src",
        "\"><meta name=\"referrer\"",
        " [policy with the hashes of the css and script]",
    );
    cut_between(&mut text, "<code class=\"state\">", "</code>", "[state]");
    cut_between(&mut text, "<span class=\"moment\">", "</span>", "[time]");
    let text = text.replace(
        &format!("evidence-store {} from", env!("CARGO_PKG_VERSION")),
        "evidence-store [version] from",
    );
    let mut lines = String::new();
    for (i, part) in text.split('<').enumerate() {
        let block = [
            "section",
            "article",
            "details",
            "summary",
            "div",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "p",
            "li",
            "tr",
            "dt",
            "footer",
            "header",
            "nav",
            "table",
            "ul",
            "blockquote",
            "meta",
            "title",
            "style",
            "script",
        ]
        .iter()
        .any(|tag| part.starts_with(tag) && part[tag.len()..].starts_with([' ', '>']));
        if i > 0 && block {
            lines.push('\n');
        }
        if i > 0 {
            lines.push('<');
        }
        lines.push_str(part);
    }
    insta::assert_snapshot!("example_page", lines);
}
