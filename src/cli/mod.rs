//! The command line: arguments (clap stops here), the commands, progress bars.

pub mod app;
pub mod args;
pub(crate) mod dump;
pub(crate) mod export;
pub(crate) mod progress;
pub(crate) mod run;
pub(crate) mod run_dir;
pub(crate) mod serve;
pub(crate) mod signals;

/// The error and its causes joined by `: `, each cause once: a cause whose text the
/// message it caused already contains (the core's messages embed their source) is
/// not printed again.
pub fn chain_text(err: &anyhow::Error) -> String {
    let mut out = String::new();
    let mut previous = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if !previous.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
        previous = text;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::chain_text;

    #[test]
    fn a_cause_the_message_already_says_is_printed_once() {
        let io = std::io::Error::other("Permission denied (os error 13)");
        let err = anyhow::Error::new(io)
            .context("cannot create /ws/.prompt-diary: Permission denied (os error 13)");
        assert_eq!(
            chain_text(&err),
            "cannot create /ws/.prompt-diary: Permission denied (os error 13)"
        );
        let err = anyhow::anyhow!("disk full").context("cannot export");
        assert_eq!(chain_text(&err), "cannot export: disk full");
    }
}
