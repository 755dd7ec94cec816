//! Where the workspace's documents live, relative to its root: the one statement of the
//! layout that the import mirrors, the tools write and the temp-file cleanup walks.

/// The directory holding one directory per project.
pub const PROJECTS: &str = "projects";

/// A project's directory of evidence cards, inside the project's directory.
pub const EVIDENCE: &str = "evidence";

/// The daily report, at the root.
pub const DAILY_REPORT: &str = "daily-report.json";

/// A project's directory.
pub fn project_dir(project_key: &str) -> String {
    format!("{PROJECTS}/{project_key}")
}

/// A project's directory of evidence cards.
pub fn evidence_dir(project_key: &str) -> String {
    format!("{PROJECTS}/{project_key}/{EVIDENCE}")
}

/// A session's evidence card.
pub fn card_path(project_key: &str, session_ref: &str) -> String {
    format!("{PROJECTS}/{project_key}/{EVIDENCE}/{session_ref}.json")
}

/// A project's project-synthesis envelope.
pub fn envelope_path(project_key: &str) -> String {
    format!("{PROJECTS}/{project_key}/project-synthesis.json")
}

/// A session file, by its path inside its project's directory.
pub fn session_path(project_key: &str, session_path: &str) -> String {
    format!("{PROJECTS}/{project_key}/{session_path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_live_where_prompt_diary_puts_them() {
        assert_eq!(card_path("P", "S1"), "projects/P/evidence/S1.json");
        assert_eq!(envelope_path("P"), "projects/P/project-synthesis.json");
        assert_eq!(evidence_dir("P"), "projects/P/evidence");
        assert_eq!(project_dir("P"), "projects/P");
        assert_eq!(session_path("P", "s/a.jsonl"), "projects/P/s/a.jsonl");
    }
}
