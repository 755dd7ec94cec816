//! Which prompt-diary contract a workspace is served with.
//!
//! One binary serves two releases of prompt-diary's MCP contract. The workspace chooses:
//! `metadata.json`'s `schema_version` 2 is written by prompt-diary 0.2.10's `prepare`, 7
//! by 0.2.20's. The contracts differ in validation rules, record shapes and messages, not
//! in architecture, so code that differs asks the contract for a rule or a shape rather
//! than keeping two copies of a tool.

/// A prompt-diary MCP contract served by this binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Contract {
    /// prompt-diary 0.2.10: workspace schema 2.
    V0_2_10,
    /// prompt-diary 0.2.20: workspace schema 7.
    V0_2_20,
}

impl Contract {
    /// Every contract served, oldest first.
    pub const ALL: [Contract; 2] = [Contract::V0_2_10, Contract::V0_2_20];

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
}
