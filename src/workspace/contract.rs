//! Which prompt-diary contract a workspace is served with.
//!
//! One binary serves two releases of prompt-diary's MCP contract. The workspace chooses:
//! `metadata.json`'s `schema_version` 2 is written by prompt-diary 0.2.10's `prepare`, 7
//! by 0.2.20's. The contracts differ in validation rules, record shapes and messages, not
//! in architecture, so code that differs asks the contract for a rule or a shape rather
//! than keeping two copies of a tool.

use crate::util::pyjson::Value;

/// A prompt-diary MCP contract served by this binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Contract {
    /// prompt-diary 0.2.10: workspace schema 2.
    V0_2_10,
    /// prompt-diary 0.2.20: workspace schema 7.
    V0_2_20,
}

impl Contract {
    /// Every contract served, oldest first.
    pub const ALL: [Contract; 2] = [Contract::V0_2_10, Contract::V0_2_20];

    /// The newest contract served: the release to install.
    pub const NEWEST: Contract = Contract::ALL[Contract::ALL.len() - 1];

    /// The contract whose `prepare` writes this workspace `schema_version`.
    pub fn from_workspace_schema(version: i64) -> Option<Contract> {
        Contract::ALL
            .into_iter()
            .find(|c| c.workspace_schema() == version)
    }

    /// The `schema_version` this contract's `prepare` writes to `metadata.json`.
    pub fn workspace_schema(self) -> i64 {
        match self {
            Contract::V0_2_10 => 2,
            Contract::V0_2_20 => 7,
        }
    }

    /// The prompt-diary release that defines this contract.
    pub fn release(self) -> &'static str {
        match self {
            Contract::V0_2_10 => "0.2.10",
            Contract::V0_2_20 => "0.2.20",
        }
    }
}

/// What `metadata.json` says about the contract: its `schema_version` compared as Python
/// compares it (`7.0 == 7`), or absent. prompt-diary 0.2.10 never reads the field, so a
/// workspace without one is served as 0.2.10, as it always was.
pub fn select(schema_version: Option<&Value>) -> Option<Contract> {
    let Some(value) = schema_version else {
        return Some(Contract::V0_2_10);
    };
    let number = match value {
        Value::Int(text) => text.parse::<i64>().ok()?,
        Value::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => *f as i64,
        _ => return None,
    };
    Contract::from_workspace_schema(number)
}

/// Why a workspace's `schema_version` is refused: prompt-diary 0.2.20's own refusal for a
/// workspace it did not prepare, then the versions this binary serves and what the file says.
pub fn unsupported_message(file: &str, schema_version: Option<&Value>) -> String {
    let found =
        schema_version.map_or_else(|| "none".to_owned(), crate::util::pyjson::to_sorted_compact);
    let served: Vec<String> = Contract::ALL
        .iter()
        .map(|c| format!("{} (prompt-diary {})", c.workspace_schema(), c.release()))
        .collect();
    let newest = Contract::ALL
        .iter()
        .copied()
        .max_by_key(|c| c.workspace_schema());
    let newest = newest.unwrap_or(Contract::V0_2_20);
    let newer = matches!(
        schema_version,
        Some(crate::util::pyjson::Value::Int(digits))
            if digits.parse::<i64>().map_or(!digits.starts_with('-'), |n| n > newest.workspace_schema())
    );
    let fix = if newer {
        format!(
            "A newer prompt-diary prepared it, so preparing again with it gives the same schema: \
             install prompt-diary {release} (`pip install prompt-diary=={release}`) and prepare \
             the day again, or upgrade evidence-store to a release that serves schema_version \
             {found}.",
            release = newest.release()
        )
    } else {
        format!(
            "Prepare it again with a prompt-diary release evidence-store serves (`pip install \
             prompt-diary=={}`).",
            newest.release()
        )
    };
    format!(
        "Unsupported prepared workspace schema at {file}. Run prompt-diary prepare --force for \
         this report date and timezone to rebuild it. evidence-store serves workspace \
         schema_version {}; this workspace has schema_version {found}. {fix}",
        served.join(" and ")
    )
}

/// How the contracts differ, as data: each rule names the behaviour it switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// `read_session_lines` answers in cursor pages of at most 32 KiB with sparse records,
    /// and handles name records of that shape, rather than the whole capped range at once
    /// in compact records.
    pub paged_reads: bool,
    /// Index turns may carry `previous_context {start_line, end_line}`, which must end
    /// before the turn starts.
    pub previous_context: bool,
    /// `write_evidence`'s trigger is only `citations`, exactly the turn's first line; the
    /// server reads that line and stores the human text as `quoted_messages`.
    pub server_quoted_trigger: bool,
    /// `schema_version` of evidence cards written.
    pub card_schema: i64,
    /// An existing card must carry `card_schema`, this project and session, and an
    /// `evidence_chains` list, or `write_evidence` refuses to append to it.
    pub checks_card_schema: bool,
    /// Material work items carry a `disposition`; every other kind must leave it empty.
    pub work_item_disposition: bool,
    /// `schema_version` of `project-synthesis.json`.
    pub envelope_schema: i64,
    /// An existing envelope of another `schema_version` counts as absent: the next
    /// `write_work_item` replaces it with a new one.
    pub replaces_other_envelopes: bool,
    /// `schema_version` of `daily-report.json`.
    pub report_schema: i64,
}

impl Contract {
    pub fn rules(self) -> Rules {
        match self {
            Contract::V0_2_10 => Rules {
                paged_reads: false,
                previous_context: false,
                server_quoted_trigger: false,
                card_schema: 1,
                checks_card_schema: false,
                work_item_disposition: false,
                envelope_schema: 1,
                replaces_other_envelopes: false,
                report_schema: 1,
            },
            Contract::V0_2_20 => Rules {
                paged_reads: true,
                previous_context: true,
                server_quoted_trigger: true,
                card_schema: 2,
                checks_card_schema: true,
                work_item_disposition: true,
                envelope_schema: 2,
                replaces_other_envelopes: true,
                report_schema: 2,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_schema_round_trips() {
        for c in Contract::ALL {
            assert_eq!(
                Contract::from_workspace_schema(c.workspace_schema()),
                Some(c)
            );
        }
        assert_eq!(Contract::from_workspace_schema(3), None);
    }

    #[test]
    fn schema_version_selects_the_contract_as_python_compares() {
        let check = |json: Option<&str>, expect: Option<Contract>| {
            let value = json.map(|j| crate::util::pyjson::parse(j).unwrap());
            assert_eq!(select(value.as_ref()), expect, "{json:?}");
        };
        check(None, Some(Contract::V0_2_10));
        check(Some("2"), Some(Contract::V0_2_10));
        check(Some("2.0"), Some(Contract::V0_2_10));
        check(Some("7"), Some(Contract::V0_2_20));
        check(Some("7.0"), Some(Contract::V0_2_20));
        for other in [
            "3", "6", "1", "0", "-7", "7.5", "true", "null", "\"7\"", "[7]", "1e400",
        ] {
            check(Some(other), None);
        }
    }

    #[test]
    fn the_refusal_names_every_served_version() {
        let value = crate::util::pyjson::parse("5").unwrap();
        assert_eq!(
            unsupported_message("/w/metadata.json", Some(&value)),
            "Unsupported prepared workspace schema at /w/metadata.json. Run prompt-diary \
             prepare --force for this report date and timezone to rebuild it. evidence-store \
             serves workspace schema_version 2 (prompt-diary 0.2.10) and 7 (prompt-diary \
             0.2.20); this workspace has schema_version 5. Prepare it again with a prompt-diary \
             release evidence-store serves (`pip install prompt-diary==0.2.20`)."
        );
        let value = crate::util::pyjson::parse("99").unwrap();
        assert!(
            unsupported_message("/w/metadata.json", Some(&value)).ends_with(
                "this workspace has schema_version 99. A newer prompt-diary prepared it, so \
                 preparing again with it gives the same schema: install prompt-diary 0.2.20 \
                 (`pip install prompt-diary==0.2.20`) and prepare the day again, or upgrade \
                 evidence-store to a release that serves schema_version 99."
            )
        );
    }
}
