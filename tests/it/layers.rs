//! The layout is the architecture: `src/` has one folder per layer, and a layer uses only
//! the layers below it (ARCHITECTURE.md draws them). These tests read the source and fail
//! on an import that runs up, on a crate named outside the one layer that may know it, on
//! an environment read below the CLI outside the test hooks, on a static that holds
//! configuration (configuration is passed in, from the CLI down), on an error carried as
//! a `String` below the edges, and on a file opened outside the modules that may open files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layers, from the ground up. A file may name `crate::X` for its own layer and for
/// the layers listed before it.
const LAYERS: &[&str] = &[
    "util",
    "workspace",
    "store",
    "session",
    "read",
    "documents",
    "tool_output",
    "citations",
    "import",
    "view",
    "service",
    "mcp",
    "cli",
];

/// Crates that only one place may name: the store's engine and codec, and the MCP SDK.
const CONFINED: &[(&str, &str)] = &[
    ("redb", "store/"),
    ("bincode", "store/codec.rs"),
    ("rmcp", "mcp/"),
];

/// The one module below the CLI that reads the environment: the test hooks.
const HOOKS: &str = "util/test_hooks.rs";

/// Statics below the CLI of a type set at run time that hold a constant, not
/// configuration: (file, name).
const CONSTANT_STATICS: &[(&str, &str)] = &[
    // An empty map, built once, that borrowed lookups fall back to.
    ("documents/problems.rs", "EMPTY"),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `src/`, as (path relative to `src/`, text).
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read src")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).expect("under src");
                let text = std::fs::read_to_string(&path).expect("read source");
                out.push((rel.to_string_lossy().into_owned(), text));
            }
        }
    }
    let mut out = Vec::new();
    walk(&src(), &src(), &mut out);
    assert!(out.len() > 50, "found only {} source files", out.len());
    out
}

/// The code of a file without its comment lines (doc comments name other layers freely).
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line))
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
}

/// The layer a file belongs to: its top folder, or its own name at the top of `src/`.
fn layer_of(rel: &str) -> &str {
    let first = rel.split('/').next().unwrap_or(rel);
    first.strip_suffix(".rs").unwrap_or(first)
}

/// The leading identifier of `text`.
fn ident(text: &str) -> &str {
    let text = text.trim_start();
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The layers `crate::…` paths in `line` name, `crate::{a, b::c}` included.
fn named_layers(line: &str) -> Vec<&str> {
    let mut names = Vec::new();
    for (at, _) in line.match_indices("crate::") {
        // `evidence_store::…` and `$crate::…` are not this crate's own paths here.
        if line[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = &line[at + "crate::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                names.extend(group.split(',').map(ident));
            }
            None => names.push(ident(rest)),
        }
    }
    names.retain(|name| !name.is_empty());
    names
}

/// Every import of a higher layer, as "file:line: layer -> layer".
fn upward_imports(files: &[(String, String)]) -> Vec<String> {
    let rank: BTreeMap<&str, usize> = LAYERS.iter().enumerate().map(|(i, l)| (*l, i)).collect();
    let mut found = Vec::new();
    for (rel, text) in files {
        let own = layer_of(rel);
        let Some(&own_rank) = rank.get(own) else {
            continue;
        };
        for (n, line) in code_lines(text) {
            for named in named_layers(line) {
                match rank.get(named) {
                    Some(&r) if r > own_rank => found.push(format!("{rel}:{n}: {own} -> {named}")),
                    _ => {}
                }
            }
        }
    }
    found
}

#[test]
fn every_folder_of_src_is_a_known_layer() {
    let mut unknown: Vec<String> = std::fs::read_dir(src())
        .expect("read src")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| !["main.rs", "lib.rs"].contains(&name.as_str()))
        .filter(|name| !LAYERS.contains(&name.strip_suffix(".rs").unwrap_or(name)))
        .collect();
    unknown.sort();
    assert!(
        unknown.is_empty(),
        "src/ holds {unknown:?}, which is no layer of LAYERS: put it in a layer's folder, or add \
         the layer (and to ARCHITECTURE.md)"
    );
}

#[test]
fn no_module_imports_a_higher_layer() {
    let up = upward_imports(&sources());
    assert!(up.is_empty(), "imports that run up:\n{}", up.join("\n"));
}

#[test]
fn the_layer_check_sees_an_upward_import() {
    // The checker itself: a store file naming the service is caught, a comment is not.
    let files = vec![(
        "store/mod.rs".to_owned(),
        "//! Answers [`crate::service`] calls.\nuse crate::util::lines;\nuse crate::service::Service;\n\
         use crate::{workspace, cli::args};\n"
            .to_owned(),
    )];
    assert_eq!(
        upward_imports(&files),
        [
            "store/mod.rs:3: store -> service",
            "store/mod.rs:4: store -> cli"
        ]
    );
}

#[test]
fn redb_bincode_and_rmcp_are_named_only_where_they_belong() {
    let mut misplaced = Vec::new();
    for (rel, text) in sources() {
        for (krate, home) in CONFINED {
            if rel.starts_with(home) {
                continue;
            }
            for (n, line) in code_lines(&text) {
                let named = line.contains(&format!("{krate}::"))
                    || line.contains(&format!("use {krate}"))
                    || line.contains(&format!("extern crate {krate}"));
                if named {
                    misplaced.push(format!("src/{rel}:{n}: {krate} outside {home}: {line}"));
                }
            }
        }
    }
    assert!(misplaced.is_empty(), "{}", misplaced.join("\n"));
}

/// The program's lines of `text`, numbered: [`code_lines`] without the inline unit-test
/// modules (`#[cfg(test)]` then `mod NAME {`, to its closing brace), wherever they stand.
/// Rules on what the program does do not bind the code that tests it.
fn program_lines(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut kept = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let opens_tests = lines[i].trim() == "#[cfg(test)]"
            && lines.get(i + 1).is_some_and(|next| {
                next.trim_start().starts_with("mod ") && next.trim_end().ends_with('{')
            });
        if opens_tests {
            let indent = &lines[i + 1][..lines[i + 1].len() - lines[i + 1].trim_start().len()];
            let close = format!("{indent}}}");
            i += 2;
            while i < lines.len() && lines[i] != close {
                i += 1;
            }
        } else if !lines[i].trim_start().starts_with("//") {
            kept.push((i + 1, lines[i]));
        }
        i += 1;
    }
    kept
}

/// Whether `rel` is the CLI edge (`main.rs`, `cli/`), which reads the environment and
/// builds the configuration.
fn is_edge(rel: &str) -> bool {
    matches!(layer_of(rel), "main" | "cli")
}

/// Every environment read below the CLI outside [`HOOKS`], as "src/file:line: code".
fn environment_reads(files: &[(String, String)]) -> Vec<String> {
    const READS: &[&str] = &[
        "env::var",
        "env::args",
        "env::current_dir",
        "env::temp_dir",
        "env::home_dir",
        "env::current_exe",
        "use std::env",
        "getenv",
        "env::set_var",
        "env::remove_var",
        "from_default_env",
    ];
    let mut found = Vec::new();
    for (rel, text) in files {
        if is_edge(rel) || rel == HOOKS {
            continue;
        }
        for (n, line) in program_lines(text) {
            if READS.iter().any(|read| line.contains(read)) {
                found.push(format!("src/{rel}:{n}: {}", line.trim()));
            }
        }
    }
    found
}

/// Every static below the CLI whose value can be set at run time (`OnceLock`, `OnceCell`,
/// `Mutex`, `RwLock`) and is not listed in [`CONSTANT_STATICS`], as "src/file:line: code".
fn configuration_statics(files: &[(String, String)]) -> Vec<String> {
    const SETTABLE: &[&str] = &["OnceLock", "OnceCell", "Mutex<", "RwLock<"];
    let mut found = Vec::new();
    for (rel, text) in files {
        if is_edge(rel) {
            continue;
        }
        for (n, line) in code_lines(text) {
            let mut words = line.split_whitespace().skip_while(|w| *w != "static");
            if words.next().is_none() {
                continue;
            }
            let name = ident(words.next().unwrap_or(""));
            let constant = CONSTANT_STATICS.contains(&(rel.as_str(), name));
            if !constant && SETTABLE.iter().any(|t| line.contains(t)) {
                found.push(format!("src/{rel}:{n}: {}", line.trim()));
            }
        }
    }
    found
}

#[test]
fn no_environment_read_below_the_cli_outside_the_test_hooks() {
    let reads = environment_reads(&sources());
    assert!(
        reads.is_empty(),
        "environment reads below the CLI: read it in cli/ and pass the value in, or, for a \
         test hook, in {HOOKS}:\n{}",
        reads.join("\n")
    );
}

#[test]
fn no_static_below_the_cli_holds_configuration() {
    let statics = configuration_statics(&sources());
    assert!(
        statics.is_empty(),
        "statics that can hold configuration: pass it in from the CLI instead (a constant \
         built once goes in CONSTANT_STATICS, with why):\n{}",
        statics.join("\n")
    );
}

#[test]
fn the_environment_and_static_checks_see_what_they_forbid() {
    let files = vec![
        (
            "util/wait.rs".to_owned(),
            "// std::env::var in a comment\nlet t = std::env::var_os(\"X\");\n\
             static T: std::sync::OnceLock<u64> = std::sync::OnceLock::new();\n\
             struct S { reason: OnceLock<&'static str> }\n\
             let d = std::env::temp_dir();\n\
             #[cfg(test)]\nmod tests {\n    let cwd = std::env::current_dir();\n}\n\
             use std::env::{temp_dir, var};\n"
                .to_owned(),
        ),
        (
            "cli/app.rs".to_owned(),
            "let t = std::env::var_os(\"X\");\nstatic L: OnceLock<u8> = OnceLock::new();\n"
                .to_owned(),
        ),
        (
            HOOKS.to_owned(),
            "std::env::var(\"EVIDENCE_STORE_FAULT\").ok()\n".to_owned(),
        ),
        (
            "documents/problems.rs".to_owned(),
            "    static EMPTY: std::sync::OnceLock<Map> = std::sync::OnceLock::new();\n\
             pub(crate) static LABEL: Mutex<String> = Mutex::new(String::new());\n"
                .to_owned(),
        ),
    ];
    assert_eq!(
        environment_reads(&files),
        [
            "src/util/wait.rs:2: let t = std::env::var_os(\"X\");",
            "src/util/wait.rs:5: let d = std::env::temp_dir();",
            "src/util/wait.rs:10: use std::env::{temp_dir, var};"
        ]
    );
    assert_eq!(
        configuration_statics(&files),
        [
            "src/util/wait.rs:3: static T: std::sync::OnceLock<u64> = std::sync::OnceLock::new();",
            "src/documents/problems.rs:2: pub(crate) static LABEL: Mutex<String> = Mutex::new(String::new());"
        ]
    );
}

/// Whether `rel` turns errors into text for a user or a model: the CLI and the MCP adapter.
fn is_text_edge(rel: &str) -> bool {
    is_edge(rel) || layer_of(rel) == "mcp"
}

/// Every `Result<T, String>` below the edges (nested, multi-line and `-> Result` inside the
/// brackets included), as "src/file:line: Result<…>". An error the core hands up is a type
/// whose variants a caller can match; the edges make the text.
fn string_errors(files: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (rel, text) in files {
        if is_text_edge(rel) {
            continue;
        }
        // The program's lines joined, and each byte's line number.
        let mut code = String::new();
        let mut line_of = Vec::new();
        for (n, line) in program_lines(text) {
            code.push_str(line);
            code.push('\n');
            line_of.resize(code.len(), n);
        }
        let bytes = code.as_bytes();
        for (at, _) in code.match_indices("Result<") {
            let word_start =
                at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
            if !word_start {
                continue;
            }
            // The generic arguments up to the matching `>` (an arrow's `>` is not one),
            // split at the commas of depth 1.
            let (mut depth, mut args, mut arg_start, mut end) = (0usize, Vec::new(), 0, None);
            for (i, &b) in bytes.iter().enumerate().skip(at + "Result".len()) {
                match b {
                    b'<' | b'(' | b'[' => depth += 1,
                    b'>' if bytes[i - 1] == b'-' || bytes[i - 1] == b'=' => {}
                    b'>' | b')' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            args.push(&code[arg_start..i]);
                            end = Some(i);
                            break;
                        }
                    }
                    b',' if depth == 1 => {
                        args.push(&code[arg_start..i]);
                        arg_start = i + 1;
                    }
                    _ => {}
                }
                if depth == 1 && b == b'<' && arg_start == 0 {
                    arg_start = i + 1;
                }
            }
            let Some(end) = end else { continue };
            if args.last().is_some_and(|a| a.trim().is_empty()) {
                args.pop(); // a trailing comma
            }
            if args.len() == 2 && args[1].trim() == "String" {
                let shown: String = code[at..=end]
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                found.push(format!("src/{rel}:{}: {shown}", line_of[at]));
            }
        }
    }
    found
}

#[test]
fn no_result_with_a_string_error_below_the_edges() {
    let found = string_errors(&sources());
    assert!(
        found.is_empty(),
        "errors carried as text below the CLI and the MCP adapter: give each a thiserror \
         type whose variants carry the data, and make the text at the edge:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_string_error_check_sees_what_it_forbids() {
    let files = vec![
        (
            "store/open.rs".to_owned(),
            "// fn f() -> Result<(), String> in a comment\n\
             pub fn check(root: &Path) -> Result<(), String> {\n\
             fn g(hold: impl FnOnce() -> Result<G, String>) {}\n\
             fn h() -> Result<Result<Found, String>, StoreError> {}\n\
             fn i() -> Result<\n    Vec<u8>,\n    String,\n> {}\n\
             fn j() -> io::Result<String> {}\n\
             fn k() -> Result<String, StoreError> {}\n\
             fn l() -> MyResult<(), String> {}\n\
             #[cfg(test)]\nmod tests {\n    fn m() -> Result<(), String> {}\n}\n\
             #[cfg(test)]\nmod format_tests;\n\
             fn n() -> Result<u8, String> {}\n"
                .to_owned(),
        ),
        (
            "mcp/args.rs".to_owned(),
            "fn check() -> Result<(), String> {}\n".to_owned(),
        ),
    ];
    assert_eq!(
        string_errors(&files),
        [
            "src/store/open.rs:2: Result<(), String>",
            "src/store/open.rs:3: Result<G, String>",
            "src/store/open.rs:4: Result<Found, String>",
            "src/store/open.rs:5: Result< Vec<u8>, String, >",
            "src/store/open.rs:18: Result<u8, String>",
        ]
    );
}

/// Code that may open files by path or descriptor, and why; every other module asks
/// `src/session/` for session files and `fsutil` for other workspace files.
const MAY_OPEN: [(&str, &str); 7] = [
    (
        "src/util/fsutil.rs",
        "the confined opens (openat2 beneath the held-open workspace root) that session/ and every workspace file read go through",
    ),
    ("src/store/", "the store's own redb file"),
    (
        "src/import/rebuild.rs",
        "fsyncs the rebuilt store and its directory",
    ),
    (
        "src/citations/check.rs",
        "cited files in the project directory, never session files",
    ),
    ("src/documents/evidence.rs", "a unit test reads its fixture"),
    (
        "src/tool_output/lookup.rs",
        "debug builds only: the tests' stand-in reads payloads from EVIDENCE_STORE_TEST_PAYLOADS",
    ),
    (
        "src/session/",
        "the session files themselves (through fsutil::open_regular)",
    ),
];

/// Spellings of opening a file.
const OPENS: [&str; 7] = [
    "File::open",
    "OpenOptions",
    "openat",
    "fs::read(",
    "fs::read_to_string(",
    "rfs::open(",
    "libc::open",
];

/// Only `src/session/` opens session files: no other module outside the short list of
/// [`MAY_OPEN`] (each of which opens something else) opens a file at all.
#[test]
fn only_the_session_module_opens_session_files() {
    let mut offenders = Vec::new();
    for (rel, text) in sources() {
        let rel = format!("src/{rel}");
        if MAY_OPEN.iter().any(|(allowed, _)| rel.starts_with(allowed)) {
            continue;
        }
        for (n, code) in code_lines(&text) {
            if let Some(open) = OPENS.iter().find(|o| code.contains(*o)) {
                offenders.push(format!("{rel}:{n}: {open}"));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "files opened outside src/session/ and the allowed modules: {offenders:#?}"
    );
}
