//! `run`'s private directory: the settings `run` hands the servers it starts, and the
//! notes they leave for it (the workspaces they served, and which of them ran without
//! the model's API key).
//!
//! A client may start its MCP servers with a cleared environment (Codex, as prompt-diary
//! 0.2.20 runs it, keeps little more than PATH and HOME), so a server finds the directory
//! through `EVIDENCE_STORE_RUN_DIR`, else on PATH, where `run` put it first. Its settings
//! may hold secrets (a model URL's `user:password@` or `?api-key=`): the directory is
//! made 0700 and the settings file 0600, both checked by descriptor, and a server trusts
//! a directory only when this user owns it and no one else may write into it, and reads
//! only a regular file of one link this user owns there.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};

use crate::cli::args::{self, Config};
use crate::util::fsutil::{self, DirAccess, HeldDir, OwnIn};

/// Tells a `report` started by `run` where `run`'s private directory is.
pub(crate) const RUN_DIR_ENV: &str = "EVIDENCE_STORE_RUN_DIR";
/// The workspaces the servers served, each path ended by a NUL byte.
const SERVED_FILE: &str = "served-workspaces";
/// The settings `run` hands its servers, as the `NAME=VALUE` environment entries it also
/// sets, each ended by a NUL byte.
const SETTINGS_FILE: &str = "settings";
/// The API-key variables that did not reach a server, one name per server, each ended by
/// a NUL byte.
const NO_KEY_FILE: &str = "servers-without-api-key";
/// The most a settings file is read (it holds a few short values).
const SETTINGS_MAX_BYTES: u64 = 64 * 1024;
/// The most a file of the servers' notes is read (a path or a name per server).
const NOTES_MAX_BYTES: u64 = 16 << 20;

/// The private directory as `run` made it; removed when dropped.
pub(crate) struct Private {
    held: HeldDir,
    dir: tempfile::TempDir,
}

impl Private {
    /// Makes the directory (mode 0700, checked by descriptor: a directory this user owns
    /// that no one else may enter), writes `settings` into a new file of mode 0600 in it
    /// (checked by descriptor: a regular file of one link) and links `report` to `exe`.
    pub(crate) fn create(exe: &Path, settings: &[(&str, String)]) -> anyhow::Result<Private> {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("evidence-store-run-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .context("cannot create run's private directory")?;
        let shown = dir.path().display().to_string();
        let held = HeldDir::open(dir.path())
            .and_then(|held| {
                fsutil::check_own_dir(&held.as_fd(), DirAccess::Private).map(|()| held)
            })
            .with_context(|| format!("run's private directory {shown} cannot be used"))?;
        let mut entries = Vec::new();
        for (name, value) in settings {
            entries.extend_from_slice(format!("{name}={value}").as_bytes());
            entries.push(0);
        }
        held.open_own(OsStr::new(SETTINGS_FILE), OwnIn::CreateNew)
            .and_then(|file| {
                let mut file = file.ok_or_else(|| std::io::Error::other("no file was created"))?;
                file.write_all(&entries)
            })
            .with_context(|| {
                format!("cannot write the settings in run's private directory {shown}")
            })?;
        rustix::fs::symlinkat(exe, held.as_fd(), args::REPORT_NAME)
            .with_context(|| format!("cannot link `report` in run's private directory {shown}"))?;
        Ok(Private { held, dir })
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// What the servers left for `run`: the workspaces they served, in order, without
    /// repeats (returned); a warning on stderr when some of them ran without the model's
    /// API key because their client had cleared its variable.
    pub(crate) fn servers_told(&self) -> Vec<PathBuf> {
        use std::os::unix::ffi::OsStrExt;
        let mut out: Vec<PathBuf> = Vec::new();
        for entry in self.notes(SERVED_FILE) {
            let path = PathBuf::from(OsStr::from_bytes(&entry));
            if !out.contains(&path) {
                out.push(path);
            }
        }
        let without_key = self.notes(NO_KEY_FILE);
        if let Some(var) = without_key.first() {
            eprintln!(
                "evidence-store: WARNING: {} of the servers the command started ran tool_output \
                 without its model endpoint: the API-key variable {} did not reach them, since \
                 their client started them with a cleared environment (Codex does); see \
                 \"Use with prompt-diary\" in evidence-store's README",
                without_key.len(),
                String::from_utf8_lossy(var)
            );
        }
        out
    }

    /// The NUL-ended entries of the notes file `name`, none when it is missing or
    /// unreadable (said in the log).
    fn notes(&self, name: &str) -> Vec<Vec<u8>> {
        match self.held.read_own_within(OsStr::new(name), NOTES_MAX_BYTES) {
            Ok(bytes) => bytes
                .unwrap_or_default()
                .split(|b| *b == 0)
                .filter(|e| !e.is_empty())
                .map(<[u8]>::to_vec)
                .collect(),
            Err(e) => {
                tracing::warn!(%e, file = name, "cannot read what the servers left for `run`");
                Vec::new()
            }
        }
    }
}

/// `run`'s private directory as a server it started found it.
pub(crate) struct Found {
    path: PathBuf,
    held: HeldDir,
}

/// The private directory of the `run` that started this server, if any:
/// `$EVIDENCE_STORE_RUN_DIR` (an error when it does not name a directory this server
/// trusts), else the first absolute directory on PATH that this user owns, that no one
/// else may write into, whose `report` is a link to this binary and that holds a settings
/// file. A directory on PATH that holds both but fails the checks is passed over, saying
/// so on stderr: anyone who can write into it could have planted them.
pub(crate) fn find() -> anyhow::Result<Option<Found>> {
    if let Some(dir) = std::env::var_os(RUN_DIR_ENV) {
        let path = PathBuf::from(dir);
        let held = trusted(&path).with_context(|| {
            format!(
                "{RUN_DIR_ENV} names {}, which this server does not take for `run`'s private \
                 directory",
                path.display()
            )
        })?;
        return Ok(Some(Found { path, held }));
    }
    let Ok(me) = std::env::current_exe().and_then(std::fs::canonicalize) else {
        return Ok(None);
    };
    let Some(path) = std::env::var_os("PATH") else {
        return Ok(None);
    };
    for dir in std::env::split_paths(&path) {
        // A relative entry names a different directory in every working directory.
        if !dir.is_absolute() {
            continue;
        }
        let Ok(held) = HeldDir::open(&dir) else {
            continue;
        };
        let links_here = held
            .read_link_beneath(Path::new(args::REPORT_NAME))
            .ok()
            .and_then(|target| std::fs::canonicalize(held.real_path().join(target)).ok())
            .is_some_and(|target| target == me);
        if !links_here || !held.has_entry(OsStr::new(SETTINGS_FILE)) {
            continue;
        }
        match fsutil::check_own_dir(&held.as_fd(), DirAccess::NotWritable) {
            Ok(()) => return Ok(Some(Found { path: dir, held })),
            Err(e) => eprintln!(
                "evidence-store: WARNING: {} on PATH holds a `report` link to evidence-store \
                 and a settings file, but is not taken for `run`'s private directory: {e}",
                dir.display()
            ),
        }
    }
    Ok(None)
}

/// The directory `path`, held open, if this user owns it and no one else may write into it.
fn trusted(path: &Path) -> std::io::Result<HeldDir> {
    let held = HeldDir::open(path)?;
    fsutil::check_own_dir(&held.as_fd(), DirAccess::NotWritable)?;
    Ok(held)
}

impl Found {
    fn settings_path(&self) -> PathBuf {
        self.path.join(SETTINGS_FILE)
    }

    /// The `NAME=VALUE` entries of the settings file; an error naming the file when it is
    /// missing, not a regular file of one link this user owns, or not such entries.
    fn settings(&self) -> anyhow::Result<Vec<(String, String)>> {
        let shown = self.settings_path().display().to_string();
        let bytes = self
            .held
            .read_own_within(OsStr::new(SETTINGS_FILE), SETTINGS_MAX_BYTES)
            .with_context(|| {
                format!("cannot read the settings file {shown} that `run` left for this server")
            })?
            .ok_or_else(|| {
                anyhow!("there is no settings file {shown}, which `run` leaves for its servers")
            })?;
        let mut out = Vec::new();
        for (n, entry) in bytes
            .split(|b| *b == 0)
            .filter(|e| !e.is_empty())
            .enumerate()
        {
            let malformed = |why: &str| {
                anyhow!(
                    "the settings file {shown} that `run` left for this server is malformed: \
                     its entry {} {why}",
                    n + 1
                )
            };
            let entry = std::str::from_utf8(entry).map_err(|_| malformed("is not UTF-8"))?;
            let (name, value) = entry
                .split_once('=')
                .ok_or_else(|| malformed("is not NAME=VALUE"))?;
            out.push((name.to_owned(), value.to_owned()));
        }
        Ok(out)
    }

    /// Appends one NUL-ended entry to the notes file `name`; a failure is only logged
    /// (`run` then misses this note, the server still serves).
    fn note(&self, name: &str, entry: &[u8]) {
        use std::io::Write;
        let mut line = entry.to_vec();
        line.push(0);
        // One append of the whole entry: concurrent servers do not interleave.
        let written = self
            .held
            .open_own(OsStr::new(name), OwnIn::Append)
            .and_then(|file| match file {
                Some(mut file) => file.write_all(&line),
                None => Err(std::io::Error::other("no file was opened")),
            });
        if let Err(e) = written {
            tracing::warn!(%e, dir = %self.path.display(), file = name, "cannot leave a note for `run`");
        }
    }
}

/// The API-key variable the model endpoint of `settings` names, when it is unset or empty
/// here (an endpoint cannot be built without it).
pub(crate) fn missing_key(settings: &crate::tool_output::settings::Settings) -> Option<&str> {
    let var = settings.endpoint.as_ref()?.api_key_env.as_deref()?;
    let set = std::env::var_os(var).is_some_and(|value| !value.is_empty());
    (!set).then_some(var)
}

/// `config` for `report mcp serve`: its settings from the environment, else from the
/// settings file of the `run` that started it, else the defaults; the workspace noted for
/// that `run`. Under `run`, an API-key variable its client did not pass on leaves the
/// server without the model endpoint (tool_output then uses the client's sampling, else
/// the truncate fallback), said on stderr and noted for `run`, rather than stopping the
/// server: the agents keep their tools.
pub(crate) fn server_config(mut config: Config) -> anyhow::Result<Config> {
    let found = find()?;
    let file = match &found {
        Some(found) => Some((found.settings_path(), found.settings()?)),
        None => None,
    };
    let (mut tool_output, citations) = args::server_settings(
        file.as_ref()
            .map(|(path, entries)| (path.as_path(), entries.as_slice())),
    )?;
    if let Some(found) = &found {
        if let Some(var) = missing_key(&tool_output).map(str::to_owned) {
            eprintln!(
                "evidence-store serve: WARNING: the API-key variable {var} did not reach this \
                 server (its client started it with a cleared environment, as Codex does): \
                 tool_output runs without the model endpoint, on the client's sampling if it \
                 offers it, else the truncate fallback"
            );
            found.note(NO_KEY_FILE, var.as_bytes());
            tool_output.endpoint = None;
        }
        use std::os::unix::ffi::OsStrExt;
        let workspace = &config.workspace.path;
        let path = std::path::absolute(workspace).unwrap_or_else(|_| workspace.clone());
        found.note(SERVED_FILE, path.as_os_str().as_bytes());
    }
    config.tool_output = tool_output;
    config.citations = citations;
    Ok(config)
}
