//! `serve` processes writing while `export` and `import` run in loops on the same
//! workspace: every write answered `appended` is in the store and in the card files, and
//! no write answered as failed is anywhere.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::cards;
use common::{Client, Workspace, spawn_server, spawn_server_env, text, try_call};
use serde_json::Value;

const PROJECT: &str = common::LOAD_PROJECT;
const SERVERS: usize = 4;
const SESSIONS: usize = 16;
const TURNS: usize = 100;
/// The writers go on until each loop has run this often.
const LOOP_RUNS: usize = 20;
/// Each writer waits for the loops to keep up: its write `j` waits until the import loop
/// has run `j / WRITES_PER_RUN` times and the export loops twice as often. So the loops
/// reach [`LOOP_RUNS`] long before the writers run out of turns, however fast each side is.
const WRITES_PER_RUN: usize = 4;
/// Lock waits as long as a hang bound: however slow the machine, every writer and command
/// waits its turn instead of failing at the usual 30 s.
const PATIENT: (&str, &str) = ("EVIDENCE_STORE_LOCK_TIMEOUT_SECS", "600");

/// Writes the chain for `(session, turn)`: `Ok(None)` when answered `appended`,
/// `Ok(Some(answer))` when answered otherwise, `Err` when not answered at all.
async fn write(client: &Client, session: usize, turn: usize) -> Result<Option<String>, String> {
    let lines = format!("{}-{}", 2 * turn - 1, 2 * turn);
    let trigger = cards::user_trigger("asked", &lines);
    let args = cards::material_chain(PROJECT, session, turn, trigger, &lines);
    let result = try_call(client, "write_evidence", args).await?;
    let value: Value = serde_json::from_str(text(&result)).map_err(|e| e.to_string())?;
    Ok((value["status"] != "appended").then(|| text(&result).to_owned()))
}

/// Runs `command` on the workspace again and again until `stop`; counts the runs that
/// started while writes were still going, and keeps the stderr of any failure.
fn command_loop(
    ws_root: std::path::PathBuf,
    command: &'static str,
    stop: Arc<AtomicBool>,
    overlapping: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut failures = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            let out = std::process::Command::new(common::BIN)
                .arg(command)
                .arg("--workspace")
                .arg(&ws_root)
                .env_remove("RUST_LOG")
                .env(PATIENT.0, PATIENT.1)
                .output()
                .unwrap();
            if !out.status.success() {
                failures.push(String::from_utf8_lossy(&out.stderr).into_owned());
            }
            if !stop.load(Ordering::SeqCst) {
                overlapping.fetch_add(1, Ordering::SeqCst);
            }
        }
        failures
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_acknowledged_during_export_and_import_loops_are_all_kept() {
    let ws = Workspace::load_test(SESSIONS, TURNS);
    ws.ok(&["import"]);
    let mut clients = Vec::new();
    for _ in 0..SERVERS {
        clients.push(Arc::new(spawn_server_env(&ws, &[PATIENT]).await.0));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (exports, imports) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // Two export loops, so that exports also overlap each other.
    let exporters = [
        command_loop(
            ws.root().to_owned(),
            "export",
            stop.clone(),
            exports.clone(),
        ),
        command_loop(
            ws.root().to_owned(),
            "export",
            stop.clone(),
            exports.clone(),
        ),
    ];
    let importer = command_loop(
        ws.root().to_owned(),
        "import",
        stop.clone(),
        imports.clone(),
    );

    let mut tasks = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        let mine = cards::share_of(i, SERVERS, SESSIONS, TURNS);
        let client = client.clone();
        let (exports, imports) = (exports.clone(), imports.clone());
        tasks.push(tokio::spawn(async move {
            let (mut acked, mut failed) = (Vec::new(), Vec::new());
            let runs = || {
                (
                    exports.load(Ordering::SeqCst),
                    imports.load(Ordering::SeqCst),
                )
            };
            for (j, (s, t)) in mine.into_iter().enumerate() {
                if runs().0 >= 2 * LOOP_RUNS && runs().1 >= LOOP_RUNS {
                    break;
                }
                let waiting = std::time::Instant::now();
                while runs().0 < 2 * (j / WRITES_PER_RUN) || runs().1 < j / WRITES_PER_RUN {
                    assert!(
                        waiting.elapsed() < std::time::Duration::from_secs(600),
                        "the loops stopped running: {:?} runs",
                        runs()
                    );
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                match write(&client, s, t).await {
                    Ok(None) => acked.push((s, t)),
                    Ok(Some(answer)) => failed.push(((s, t), answer)),
                    Err(e) => panic!("write S{s:04}/T{t:04} got no answer: {e}"),
                }
            }
            (acked, failed)
        }));
    }
    let (mut acked, mut failed) = (BTreeSet::new(), Vec::new());
    for task in tasks {
        let (a, f) = task.await.unwrap();
        acked.extend(a);
        failed.extend(f);
    }
    let answers: Vec<String> = failed.iter().map(|(_, a)| a.clone()).take(3).collect();
    let failed: BTreeSet<(usize, usize)> = failed.into_iter().map(|(k, _)| k).collect();
    stop.store(true, Ordering::SeqCst);
    let export_failures: Vec<String> = exporters
        .into_iter()
        .flat_map(|e| e.join().unwrap())
        .collect();
    let import_failures = importer.join().unwrap();
    for client in clients {
        Arc::try_unwrap(client)
            .ok()
            .unwrap()
            .cancel()
            .await
            .unwrap();
    }

    // The loops really ran while the servers wrote.
    let (exports, imports) = (
        exports.load(Ordering::SeqCst),
        imports.load(Ordering::SeqCst),
    );
    eprintln!(
        "{} writes acknowledged, {} answered as failed, during {exports} exports and {imports} imports",
        acked.len(),
        failed.len()
    );
    assert!(
        exports >= 2 * LOOP_RUNS && imports >= LOOP_RUNS,
        "{exports} exports and {imports} imports overlapped the writes"
    );

    let in_files = cards::chains_in(ws.root(), PROJECT);
    let in_store = cards::chains_in(cards::exported(&ws.store()).path(), PROJECT);
    let lost_files: Vec<_> = acked.difference(&in_files).collect();
    let lost_store: Vec<_> = acked.difference(&in_store).collect();
    assert!(
        lost_files.is_empty() && lost_store.is_empty(),
        "{} of {} acknowledged writes missing from the files, {} from the store ({} answered as failed)",
        lost_files.len(),
        acked.len(),
        lost_store.len(),
        failed.len()
    );
    let failed_present: Vec<_> = failed
        .iter()
        .filter(|k| in_files.contains(k) || in_store.contains(k))
        .collect();
    assert!(
        failed_present.is_empty(),
        "writes answered as failed are present: {failed_present:?}"
    );
    assert!(export_failures.is_empty(), "{export_failures:?}");
    assert!(import_failures.is_empty(), "{import_failures:?}");
    cards::assert_hold_exactly(&in_files, &in_store, &acked);
    assert!(
        failed.is_empty(),
        "{} writes failed, such as {answers:?}",
        failed.len()
    );
    // No temp file is left behind once every writer has finished.
    let evidence = ws.path(&format!("projects/{PROJECT}/evidence"));
    let stray: Vec<String> = std::fs::read_dir(&evidence)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.ends_with(".json"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}

/// A process holding the store open read-only (as `dump` and `verify` do, briefly) does
/// not make an `import` (or a `serve` starting) fail: the writable open waits for it.
#[test]
fn import_waits_for_a_read_only_holder_instead_of_failing() {
    use std::io::{BufRead, BufReader};
    let ws = Workspace::example();
    ws.ok(&["import"]);
    let holder = redb::Database::builder()
        .open_read_only(ws.store())
        .expect("read-only open");
    let mut child = std::process::Command::new(common::BIN)
        .args(["import", "--workspace"])
        .arg(ws.root())
        .env_remove("PROMPT_DIARY_WORKSPACE")
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The import has met the read-only holder (it says so, or it failed on it).
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    drop(holder);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{first}{rest}");
    assert!(first.contains("waiting"), "{first}{rest}");
}

/// `view` reads one snapshot while `serve` processes write: it never fails nor waits for
/// them, and each page shows the chains committed before it started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn view_runs_beside_writing_servers_and_shows_what_was_committed() {
    let ws = Workspace::load_test(2, 20);
    ws.ok(&["import"]);
    let client = spawn_server(&ws).await.0;
    let stop = Arc::new(AtomicBool::new(false));
    let views = Arc::new(AtomicUsize::new(0));
    let viewer = command_loop(ws.root().to_owned(), "view", stop.clone(), views.clone());
    for turn in 1..=20 {
        for session in 1..=2 {
            assert_eq!(write(&client, session, turn).await.unwrap(), None);
        }
        if turn == 10 {
            // Everything answered so far is committed: a page made now shows it all.
            let page = ws.ok(&["view"]);
            let html = std::fs::read_to_string(page.trim().trim_start_matches("file://")).unwrap();
            assert_eq!(html.matches("class=\"cell written\"").count(), 20);
        }
    }
    stop.store(true, Ordering::SeqCst);
    let failures = viewer.join().unwrap();
    client.cancel().await.unwrap();
    assert!(failures.is_empty(), "{failures:?}");
    assert!(
        views.load(Ordering::SeqCst) >= 1,
        "a view overlapped the writes"
    );
}

/// How many `verify` runs [`verify_beside_servers_starting_and_stopping_never_reports_damage`]
/// makes: on the build before the fix, about one in five reported damage.
const VERIFY_RUNS: usize = 150;
const CYCLING_SERVERS: usize = 4;

/// `serve` processes that only start and stop (initialize, a ping, end of input) beside
/// a `verify` loop: every `verify` finds the store whole. Each open and close of the
/// store writes its header and allocator state, outside any document write; `verify`
/// must never read one half done and call a healthy store damaged or unclean.
#[test]
fn verify_beside_servers_starting_and_stopping_never_reports_damage() {
    use common::stdio::{LineServer, serve_command};
    use std::time::Duration;
    let ws = Arc::new(Workspace::example());
    ws.ok(&["import"]);
    let stop = Arc::new(AtomicBool::new(false));
    let cyclers: Vec<_> = (0..CYCLING_SERVERS)
        .map(|k| {
            let (ws, stop) = (ws.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut cycles = 0usize;
                while !stop.load(Ordering::SeqCst) {
                    let mut server = LineServer::start(
                        serve_command(&ws, &[]),
                        &format!("cycler-{k}"),
                        Duration::from_secs(120),
                    );
                    let ping = server.call("prompt_diary_ping", serde_json::json!({}));
                    let answer = server.text(ping, Duration::from_secs(120));
                    assert!(answer.contains("\"ok\""), "ping: {answer}");
                    drop(server.stdin.take());
                    let status = common::exit_or_hang(&mut server.child, Duration::from_secs(120))
                        .expect("serve ends at the end of its input");
                    assert!(status.success(), "serve exited {status:?}");
                    cycles += 1;
                }
                cycles
            })
        })
        .collect();
    let mut alarms = Vec::new();
    for _ in 0..VERIFY_RUNS {
        let out = ws.run(&["verify"]);
        if !out.status.success() {
            alarms.push(format!(
                "exit {:?}: {}{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    stop.store(true, Ordering::SeqCst);
    let cycles: usize = cyclers.into_iter().map(|c| c.join().unwrap()).sum();
    eprintln!("{VERIFY_RUNS} verify runs beside {cycles} server starts and stops");
    assert!(cycles >= CYCLING_SERVERS, "the servers did not cycle");
    assert!(
        alarms.is_empty(),
        "{} of {VERIFY_RUNS} verify runs reported a healthy store as damaged or unclean; first: {}",
        alarms.len(),
        alarms.first().map_or("", String::as_str)
    );
    // Alone afterwards, too.
    ws.ok(&["verify"]);
}
