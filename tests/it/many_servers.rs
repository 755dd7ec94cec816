//! Many `serve` processes on one store, and servers killed mid-stream: nothing acknowledged
//! is ever lost, nothing is left torn.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::cards;
use common::{Client, Workspace, spawn_server, spawn_server_env, text, try_call};
use serde_json::{Value, json};

const PROJECT: &str = common::LOAD_PROJECT;

/// Lock waits as long as a hang bound: however slow the machine, a write waits its turn
/// behind the others instead of failing at the usual 30 s.
const PATIENT: &[(&str, &str)] = &[("EVIDENCE_STORE_LOCK_TIMEOUT_SECS", "600")];

/// Which prompt-diary's workspace a test writes to.
#[derive(Clone, Copy, PartialEq)]
enum Release {
    V0_2_10,
    V0_2_20,
}

/// Writes the chain for `(session, turn)`; `Ok(true)` once acknowledged.
async fn write(client: &Client, session: usize, turn: usize) -> Result<bool, String> {
    write_as(Release::V0_2_10, client, session, turn).await
}

/// [`write`] in the chain shape of `release`: 0.2.20's trigger cites only the turn's
/// first line, and the server reads the human message from it.
async fn write_as(
    release: Release,
    client: &Client,
    session: usize,
    turn: usize,
) -> Result<bool, String> {
    let lines = format!("{}-{}", 2 * turn - 1, 2 * turn);
    let trigger = match release {
        Release::V0_2_10 => cards::user_trigger("asked", &lines),
        Release::V0_2_20 => {
            json!({"citations": [{"lines": format!("{0}-{0}", 2 * turn - 1)}]})
        }
    };
    let args = cards::material_chain(PROJECT, session, turn, trigger, &lines);
    let result = try_call(client, "write_evidence", args).await?;
    let value: Value = serde_json::from_str(text(&result)).map_err(|e| e.to_string())?;
    if value["status"] == "appended" {
        Ok(true)
    } else {
        Err(text(&result).to_owned())
    }
}

/// Every `(session, turn)` found in the card files; each card must parse, no temp files.
fn written(ws: &Workspace) -> BTreeSet<(usize, usize)> {
    let dir = ws.path(&format!("projects/{PROJECT}/evidence"));
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let name = entry.file_name().into_string().unwrap();
        assert!(name.ends_with(".json"), "stray file {name}");
    }
    cards::chains_in(ws.root(), PROJECT)
}

async fn concurrent_writers(servers: usize) {
    concurrent_writers_as(Release::V0_2_10, servers).await;
}

async fn concurrent_writers_as(release: Release, servers: usize) {
    let (sessions, turns) = (8, 2 * servers);
    let ws = match release {
        Release::V0_2_10 => Workspace::load_test(sessions, turns),
        Release::V0_2_20 => Workspace::load_test_0_2_20(sessions, turns),
    };
    ws.ok(&["import"]);
    let mut clients = Vec::new();
    for _ in 0..servers {
        clients.push(Arc::new(spawn_server_env(&ws, PATIENT).await.0));
    }
    let mut tasks = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        let mine = cards::share_of(i, servers, sessions, turns);
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            for (s, t) in mine {
                write_as(release, &client, s, t)
                    .await
                    .expect("every write succeeds");
                acked.push((s, t));
            }
            acked
        }));
    }
    let mut acked = BTreeSet::new();
    for task in tasks {
        acked.extend(task.await.unwrap());
    }
    assert_eq!(acked.len(), sessions * turns);
    assert_eq!(
        written(&ws),
        acked,
        "the files show every acknowledged write"
    );
    ws.ok(&["export"]);
    assert_eq!(written(&ws), acked, "and so does export");
    ws.ok(&["verify"]);
    if release == Release::V0_2_20 {
        // Each card is 0.2.20's, its triggers quoting the human line they cite.
        let card: Value =
            serde_json::from_slice(&ws.read(&format!("projects/{PROJECT}/evidence/S0001.json")))
                .unwrap();
        assert_eq!(card["schema_version"], 2, "{card}");
        for chain in card["evidence_chains"].as_array().unwrap() {
            let quoted = chain["trigger"]["quoted_messages"].to_string();
            assert!(quoted.contains("please do step"), "{chain}");
        }
    }
    for client in clients {
        Arc::try_unwrap(client)
            .ok()
            .unwrap()
            .cancel()
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_servers_lose_nothing() {
    concurrent_writers(8).await;
}

/// The same on a prompt-diary 0.2.20 workspace, whose writes also read the trigger's line
/// from the session file.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_servers_lose_nothing_on_a_0_2_20_workspace() {
    concurrent_writers_as(Release::V0_2_20, 8).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_servers_lose_nothing() {
    concurrent_writers(32).await;
}

/// A server is killed with SIGKILL at varying points of a stream of writes, again and
/// again; after a restart and an export every acknowledged write is there, every card is
/// whole JSON and no temp file is left. Even rounds kill at a known step of the k-th write
/// (the server kills itself after replacing the card and before committing, or after
/// committing and before answering); odd rounds kill from outside after a varying delay
/// while one write is in flight (and send no further write until the kill was sent), and
/// each round checks that the kill really cut the stream short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_servers_lose_no_acknowledged_write() {
    use tokio::sync::Notify;
    let ws = Workspace::load_test(2, 60);
    ws.ok(&["import"]);
    let todo: Vec<(usize, usize)> = (1..=2)
        .flat_map(|s| (1..=60).map(move |t| (s, t)))
        .collect();
    let mut acked = BTreeSet::new();
    let mut next = 0;
    for round in 0..8u64 {
        let k = 2 + round as usize;
        let fault = match round % 4 {
            0 => Some(format!("die-before-commit@{k}")),
            2 => Some(format!("die-after-commit@{k}")),
            _ => None,
        };
        let envs: Vec<(&str, &str)> = fault
            .as_deref()
            .map(|f| ("EVIDENCE_STORE_FAULT", f))
            .into_iter()
            .collect();
        let (client, pid) = spawn_server_env(&ws, &envs).await;
        let client = Arc::new(client);
        // Odd rounds: once `round` writes of this round are done, the writer asks for the
        // kill and sends one more write, which the kill meets before, during or after
        // it; then it waits until the kill was sent.
        let kill_after = fault.is_none().then_some(round as usize);
        let (kill_now, killed) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let writer = {
            let client = client.clone();
            let todo = todo.clone();
            let (kill_now, killed) = (kill_now.clone(), killed.clone());
            tokio::spawn(async move {
                let mut done = Vec::new();
                let (mut appended, mut cut) = (0, false);
                for (i, (s, t)) in todo.into_iter().enumerate().skip(next) {
                    if kill_after.is_some_and(|n| done.len() == n + 1) {
                        killed.notified().await;
                    }
                    match write(&client, s, t).await {
                        Ok(_) => appended += 1,
                        // The write in flight at the last kill may have committed.
                        Err(e) if e.contains("already has a committed evidence chain") => {}
                        Err(_) => {
                            cut = true;
                            break;
                        }
                    }
                    done.push((i, (s, t)));
                    if kill_after == Some(done.len()) {
                        kill_now.notify_one();
                    }
                }
                (done, appended, cut)
            })
        };
        if kill_after.is_some() {
            let asked =
                tokio::time::timeout(std::time::Duration::from_secs(60), kill_now.notified()).await;
            assert!(
                asked.is_ok(),
                "round {round}: the writes before the kill were not answered in 60 s"
            );
            // A different moment of the write in flight each round.
            tokio::time::sleep(std::time::Duration::from_millis(1 + round * 3)).await;
            let pid = pid.expect("child pid");
            let pid = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
            rustix::process::kill_process(pid, rustix::process::Signal::KILL).expect("killed");
            killed.notify_one();
        }
        let (done, appended, cut) = writer.await.unwrap();
        assert!(
            cut,
            "round {round}: the kill cut the stream short ({} written)",
            done.len()
        );
        if fault.is_some() {
            assert_eq!(
                appended,
                k - 1,
                "round {round}: killed exactly at write {k} ({fault:?})"
            );
        }
        if let Some((i, _)) = done.last() {
            next = i + 1;
        }
        // The write in flight when the kill landed may or may not have committed: it was
        // never acknowledged, so the next round retries it.
        acked.extend(done.into_iter().map(|(_, st)| st));
        drop(client);
    }
    assert!(
        next > 0 && next < todo.len(),
        "the kills landed mid-stream ({next} of {} written)",
        todo.len()
    );
    // Finish the rest with a healthy server; retried writes may already be there.
    let (client, _) = spawn_server(&ws).await;
    for &(s, t) in &todo[next..] {
        match write(&client, s, t).await {
            Ok(_) => {}
            Err(e) => assert!(e.contains("already has a committed evidence chain"), "{e}"),
        }
        acked.insert((s, t));
    }
    client.cancel().await.unwrap();
    ws.ok(&["export"]);
    let found = written(&ws);
    assert_eq!(
        found, acked,
        "every acknowledged write present, nothing else"
    );
}
