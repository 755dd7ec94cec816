//! Where a 2000-line compact read spends its time, in process (no MCP, no pipe):
//! single-thread costs of hashing, parsing and compacting the lines, then the read as
//! the server answers it (`Service::read` printing the JSON string content the
//! MCP message carries: chunks read and checked, then compacted and printed on two
//! threads), the text alone, the records path printed afterwards, and printing alone.
//!
//! Uses the workspace `tools/bench/bench.py read` generates (200 MB session):
//!   tools/.venv/bin/python tools/bench/bench.py read && cargo bench --bench read_path
//! or `cargo bench --bench read_path -- <workspace>`. `GAP_MS=5` sleeps between reads,
//! as a server idles between calls (on this VM the second thread then starts 1-2 ms
//! late). `PROFILE=1` only repeats the server's path, for `perf record`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use evidence_store::harness::{
    Mode, Paging, ReadRequest, Service, Sink, TextForm, WorkspaceRoot, compact_line, hash_line,
    parse_borrowed,
};

const DEFAULT_WORKSPACE: &str = "/tmp/evidence-store-bench/read-200M";
const WIDTH: i64 = 2000;

/// The read as the server makes it: the content of the JSON string its message carries,
/// in pieces as they are printed.
fn server_path(service: &Service, request: &ReadRequest) -> usize {
    let mut bytes = Counted(0);
    service.read(request, Paging::Unpaged, &mut bytes);
    bytes.0
}

/// Counts the bytes of a read's JSON string content, as the server's transport takes it.
struct Counted(usize);

impl Sink for Counted {
    fn form(&self) -> TextForm {
        TextForm::JsonString
    }

    fn piece(&mut self, piece: String) -> bool {
        self.0 += std::hint::black_box(piece).len();
        true
    }
}

/// The read's whole text.
fn text_path(service: &Service, request: &ReadRequest) -> String {
    let mut text = String::new();
    service.read(request, Paging::Unpaged, &mut text);
    text
}

fn main() {
    let ws = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map_or_else(|| PathBuf::from(DEFAULT_WORKSPACE), PathBuf::from);
    let Some((project, session, session_path, n)) = first_session(&ws) else {
        println!(
            "no generated workspace at {} (run tools/bench/bench.py read first)",
            ws.display()
        );
        return;
    };
    let start = (n / 2 - WIDTH / 2).max(1);
    let end = (start + WIDTH - 1).min(n);
    let text = lines_of(&session_path, start, end);
    let total: usize = text.iter().map(String::len).sum();
    println!(
        "{project}/{session}: lines {start}-{end}, {:.1} MB",
        total as f64 / 1e6
    );

    report("sha-256 (1 thread)", 20, || {
        for l in &text {
            std::hint::black_box(hash_line(l.as_bytes()));
        }
    });
    report("parse (1 thread)", 20, || {
        for l in &text {
            let _ = std::hint::black_box(parse_borrowed(l));
        }
    });
    report("parse+compact (1 thread)", 20, || {
        for l in &text {
            std::hint::black_box(compact_line(l, 1, "claude-code", 0, String::new()));
        }
    });

    let root = WorkspaceRoot {
        display: ws.display().to_string(),
        path: ws.clone(),
    };
    let service = Service::start(root, &ws.join(".evidence-store").join("store.redb"));
    let request = ReadRequest {
        project_key: project,
        session_ref: session,
        start_line: start.into(),
        end_line: end.into(),
        mode: Mode::Compact,
    };
    let gap = std::env::var("GAP_MS")
        .ok()
        .and_then(|g| g.parse().ok())
        .map_or(Duration::ZERO, Duration::from_millis);
    if std::env::var_os("PROFILE").is_some() {
        // For `perf record`: the server's path and nothing else.
        for _ in 0..300 {
            std::thread::sleep(gap);
            std::hint::black_box(server_path(&service, &request));
        }
        return;
    }
    let (mut json, mut text, mut records) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..60 {
        std::thread::sleep(gap);
        let t = Instant::now();
        std::hint::black_box(server_path(&service, &request));
        json.push(t.elapsed());
        std::thread::sleep(gap);
        let t = Instant::now();
        std::hint::black_box(text_path(&service, &request));
        text.push(t.elapsed());
        std::thread::sleep(gap);
        let t = Instant::now();
        std::hint::black_box(service.read_records(&request).to_pretty_json());
        records.push(t.elapsed());
    }
    print_stats("text + JSON string (server)", &mut json);
    print_stats("text", &mut text);
    print_stats("records, then printed", &mut records);
    let result = service.read_records(&request);
    let text = result.to_pretty_json();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..40 {
        let t = Instant::now();
        std::hint::black_box(result.to_pretty_json());
        a.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(serde_json::to_string(&text).unwrap_or_default());
        b.push(t.elapsed());
    }
    print_stats("print records as text", &mut a);
    print_stats("text as JSON string", &mut b);
}

fn report(name: &str, runs: usize, f: impl Fn()) {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    print_stats(name, &mut times);
}

fn print_stats(name: &str, times: &mut [Duration]) {
    times.sort();
    println!(
        "{name:26} min {:6.2} ms  median {:6.2} ms",
        times[0].as_secs_f64() * 1e3,
        times[times.len() / 2].as_secs_f64() * 1e3
    );
}

/// The first session of the first project: its key, ref, file and line count.
fn first_session(ws: &Path) -> Option<(String, String, PathBuf, i64)> {
    let project = std::fs::read_dir(ws.join("projects"))
        .ok()?
        .filter_map(Result::ok)
        .find(|e| e.path().join("sessions.index.jsonl").is_file())?;
    let index = std::fs::read_to_string(project.path().join("sessions.index.jsonl")).ok()?;
    let row: serde_json::Value = serde_json::from_str(index.lines().next()?).ok()?;
    Some((
        project.file_name().to_string_lossy().into_owned(),
        row["session_ref"].as_str()?.to_owned(),
        project.path().join(row["session_path"].as_str()?),
        row["target_end_line"].as_i64()?,
    ))
}

/// Lines `start..=end` (1-based) of `path`, without their line ends.
fn lines_of(path: &Path, start: i64, end: i64) -> Vec<String> {
    let bytes = std::fs::read(path).expect("session file");
    bytes
        .split(|&b| b == b'\n')
        .skip(start as usize - 1)
        .take((end - start + 1) as usize)
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect()
}
