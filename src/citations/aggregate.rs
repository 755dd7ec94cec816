//! Citation counts per turn, session, project and workspace, each by type and by
//! verification status. Pure: the caller hands in one [`Item`] per stored citation.
//!
//! Groups keep the order items arrive in (the store's: project key, session ref, line),
//! so a turn appears where its first citation is. Citations on a line outside every turn
//! are counted under a turn of `null` (text: `-`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One stored citation, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Item<'a> {
    pub project_key: &'a str,
    pub session_ref: &'a str,
    pub turn_ref: Option<&'a str>,
    pub kind: &'a str,
    pub status: &'a str,
}

/// How many citations, by type and by verification status (both in name order).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub citations: u64,
    pub by_type: BTreeMap<String, u64>,
    pub by_status: BTreeMap<String, u64>,
}

impl Counts {
    fn add(&mut self, item: &Item<'_>) {
        self.citations += 1;
        *self.by_type.entry(item.kind.to_owned()).or_default() += 1;
        *self.by_status.entry(item.status.to_owned()).or_default() += 1;
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Aggregate {
    #[serde(flatten)]
    pub counts: Counts,
    pub projects: Vec<ProjectCounts>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectCounts {
    pub project_key: String,
    #[serde(flatten)]
    pub counts: Counts,
    pub sessions: Vec<SessionCounts>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionCounts {
    pub session_ref: String,
    #[serde(flatten)]
    pub counts: Counts,
    pub turns: Vec<TurnCounts>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnCounts {
    pub turn_ref: Option<String>,
    #[serde(flatten)]
    pub counts: Counts,
}

/// Counts `items` at every level.
pub fn aggregate<'a>(items: impl IntoIterator<Item = Item<'a>>) -> Aggregate {
    let mut out = Aggregate::default();
    for item in items {
        out.counts.add(&item);
        if out
            .projects
            .last()
            .is_none_or(|p| p.project_key != item.project_key)
        {
            out.projects.push(ProjectCounts {
                project_key: item.project_key.to_owned(),
                counts: Counts::default(),
                sessions: Vec::new(),
            });
        }
        let Some(project) = out.projects.last_mut() else {
            continue;
        };
        project.counts.add(&item);
        if project
            .sessions
            .last()
            .is_none_or(|s| s.session_ref != item.session_ref)
        {
            project.sessions.push(SessionCounts {
                session_ref: item.session_ref.to_owned(),
                counts: Counts::default(),
                turns: Vec::new(),
            });
        }
        let Some(session) = project.sessions.last_mut() else {
            continue;
        };
        session.counts.add(&item);
        let turn = match session
            .turns
            .iter_mut()
            .position(|t| t.turn_ref.as_deref() == item.turn_ref)
        {
            Some(i) => &mut session.turns[i],
            None => {
                session.turns.push(TurnCounts {
                    turn_ref: item.turn_ref.map(str::to_owned),
                    counts: Counts::default(),
                });
                let last = session.turns.len() - 1;
                &mut session.turns[last]
            }
        };
        turn.counts.add(&item);
    }
    out
}

/// The text view: `Evidence citations: N` first (as `ralph status` prints it), then one
/// line per project, session and turn, indented, each with its counts.
pub fn to_text(aggregate: &Aggregate) -> String {
    let mut out = format!("Evidence citations: {}\n", aggregate.counts.citations);
    out.push_str(&format!(
        "  by type: {}\n",
        pairs(&aggregate.counts.by_type)
    ));
    out.push_str(&format!(
        "  by status: {}\n",
        pairs(&aggregate.counts.by_status)
    ));
    for project in &aggregate.projects {
        out.push_str(&format!(
            "{}{}\n",
            project.project_key,
            summary(&project.counts)
        ));
        for session in &project.sessions {
            out.push_str(&format!(
                "  {}{}\n",
                session.session_ref,
                summary(&session.counts)
            ));
            for turn in &session.turns {
                out.push_str(&format!(
                    "    {}{}\n",
                    turn.turn_ref.as_deref().unwrap_or("-"),
                    summary(&turn.counts)
                ));
            }
        }
    }
    out
}

fn summary(counts: &Counts) -> String {
    format!(
        ": {} ({}; {})",
        counts.citations,
        pairs(&counts.by_type),
        pairs(&counts.by_status)
    )
}

fn pairs(map: &BTreeMap<String, u64>) -> String {
    if map.is_empty() {
        return "none".to_owned();
    }
    map.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item<'a>(
        p: &'a str,
        s: &'a str,
        t: Option<&'a str>,
        kind: &'a str,
        status: &'a str,
    ) -> Item<'a> {
        Item {
            project_key: p,
            session_ref: s,
            turn_ref: t,
            kind,
            status,
        }
    }

    fn sample() -> Aggregate {
        aggregate([
            item("A-1", "S0001", Some("T001"), "file", "ok"),
            item("A-1", "S0001", Some("T001"), "file", "missing_file"),
            item("A-1", "S0001", Some("T002"), "test", "unchecked"),
            item("A-1", "S0001", None, "url", "unchecked"),
            item("A-1", "S0002", Some("T001"), "command", "unchecked"),
            item("B-2", "S0001", Some("T001"), "file", "line_out_of_range"),
        ])
    }

    #[test]
    fn counts_at_every_level() {
        let a = sample();
        assert_eq!(a.counts.citations, 6);
        assert_eq!(a.counts.by_type["file"], 3);
        assert_eq!(a.counts.by_status["unchecked"], 3);
        assert_eq!(a.projects.len(), 2);
        assert_eq!(a.projects[0].counts.citations, 5);
        assert_eq!(a.projects[0].sessions[0].turns.len(), 3);
        assert_eq!(a.projects[0].sessions[0].turns[0].counts.citations, 2);
        assert_eq!(
            a.projects[1].sessions[0].counts.by_status["line_out_of_range"],
            1
        );
        assert_eq!(aggregate([]), Aggregate::default());
    }

    #[test]
    fn text_view() {
        insta::assert_snapshot!(to_text(&sample()));
        assert_eq!(
            to_text(&Aggregate::default()),
            "Evidence citations: 0\n  by type: none\n  by status: none\n"
        );
    }

    #[test]
    fn json_view() {
        let value = serde_json::to_value(sample()).unwrap();
        let turn = &value["projects"][0]["sessions"][0]["turns"][2];
        assert!(turn["turn_ref"].is_null());
        assert_eq!(turn["citations"], 1);
        assert_eq!(value["citations"], 6);
        assert_eq!(value["by_type"]["command"], 1);
    }
}
