//! What `tools/list` shows of each tool.
//!
//! prompt-diary's tools are listed with the name, description, input schema and output
//! schema that the workspace's prompt-diary release itself lists, kept as data
//! (`schemas/prompt-diary-<release>.json`, written by `tools/gen/reference_schemas.py` from
//! the release's own server): a client, or an agent tuned on prompt-diary, sees the same
//! shapes whichever server answers. Only the annotations are ours.
//!
//! The tools this server adds follow the same conventions, as pydantic writes them: no
//! `$schema` key, a `title` of `<tool>Arguments`, a `properties` object even when empty,
//! a `title` on each property, `items: {}` for an array of anything, and no `format` on
//! integers. `tool_output`'s schema is published exactly as specified and kept so.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool};
use serde::Deserialize;
use serde_json::Value;

use crate::workspace::contract::Contract;

const PROMPT_DIARY_0_2_10: &str = include_str!("schemas/prompt-diary-0.2.10.json");
const PROMPT_DIARY_0_2_20: &str = include_str!("schemas/prompt-diary-0.2.20.json");

/// Tools whose schema is published exactly as specified, conventions aside.
const EXACT: [&str; 1] = ["tool_output"];

/// One tool as prompt-diary lists it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceTool {
    pub name: String,
    pub description: String,
    pub input_schema: JsonObject,
    #[serde(default)]
    pub output_schema: Option<JsonObject>,
}

/// prompt-diary's tools, in its order, as `contract`'s release lists them.
pub fn reference(contract: Contract) -> Result<Vec<ReferenceTool>, serde_json::Error> {
    serde_json::from_str(match contract {
        Contract::V0_2_10 => PROMPT_DIARY_0_2_10,
        Contract::V0_2_20 => PROMPT_DIARY_0_2_20,
    })
}

/// `tools` as listed under `contract`: prompt-diary's first, in its order and with its
/// schemas, then ours by name, with the conventions applied.
pub fn listed(mut tools: Vec<Tool>, contract: Contract) -> Result<Vec<Tool>, serde_json::Error> {
    let reference = reference(contract)?;
    for tool in &mut tools {
        match reference.iter().find(|r| r.name == tool.name) {
            Some(r) => {
                tool.description = Some(r.description.clone().into());
                tool.input_schema = Arc::new(r.input_schema.clone());
                tool.output_schema = r.output_schema.clone().map(Arc::new);
            }
            None if EXACT.contains(&tool.name.as_ref()) => {}
            None => {
                let mut schema = tool.input_schema.as_ref().clone();
                conventions(&tool.name, &mut schema);
                tool.input_schema = Arc::new(schema);
            }
        }
    }
    tools.sort_by_key(|t| {
        let at = reference
            .iter()
            .position(|r| r.name == t.name)
            .unwrap_or(reference.len());
        (at, t.name.clone())
    });
    Ok(tools)
}

/// Applies pydantic's conventions to the input schema of the tool `name`.
pub fn conventions(name: &str, schema: &mut JsonObject) {
    schema.remove("$schema");
    if !schema.contains_key("title") {
        schema.insert("title".into(), Value::String(format!("{name}Arguments")));
    }
    if !schema.contains_key("properties") {
        schema.insert("properties".into(), Value::Object(JsonObject::new()));
    }
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for (property, value) in properties.iter_mut() {
            if let Value::Object(value) = value {
                if !value.contains_key("title") {
                    value.insert("title".into(), Value::String(title_of(property)));
                }
                tidy(value);
            }
        }
    }
    if let Some(Value::Object(defs)) = schema.get_mut("$defs") {
        for value in defs.values_mut() {
            if let Value::Object(value) = value {
                tidy(value);
            }
        }
    }
}

/// `items: true` as `items: {}`, no `format` on an integer, in `schema` and beneath it.
fn tidy(schema: &mut JsonObject) {
    if schema.get("items") == Some(&Value::Bool(true)) {
        schema.insert("items".into(), Value::Object(JsonObject::new()));
    }
    let integer = match schema.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(types)) => types.iter().any(|t| t == "integer"),
        _ => false,
    };
    if integer {
        schema.remove("format");
    }
    for key in ["items", "additionalProperties"] {
        if let Some(Value::Object(inner)) = schema.get_mut(key) {
            tidy(inner);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(inner)) = schema.get_mut(key) {
            for value in inner {
                if let Value::Object(value) = value {
                    tidy(value);
                }
            }
        }
    }
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for value in properties.values_mut() {
            if let Value::Object(value) = value {
                tidy(value);
            }
        }
    }
}

/// A field's title as pydantic makes it: words split at `_`, each capitalized.
fn title_of(field: &str) -> String {
    field
        .split('_')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_uppercase().chain(chars).collect::<String>()
            })
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// prompt-diary 0.2.10's registration order, which 0.2.20 keeps.
    const ORDER: [&str; 8] = [
        "prompt_diary_ping",
        "write_evidence",
        "write_work_item",
        "write_project_summary",
        "write_report_title",
        "write_engagement",
        "write_team_learning",
        "read_session_lines",
    ];

    #[test]
    fn both_releases_list_prompt_diary_s_eight_tools_in_its_order() {
        for contract in Contract::ALL {
            let names: Vec<String> = reference(contract)
                .expect("the data parses")
                .into_iter()
                .map(|t| t.name)
                .collect();
            assert_eq!(names, ORDER, "{contract:?}");
        }
    }

    #[test]
    fn conventions_make_a_schemars_schema_look_like_pydantic_s() {
        let mut schema = match json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "project_key": {"type": "string"},
                "limit": {"type": "integer", "format": "int64", "default": 50},
                "rows": {"type": "array", "items": true},
                "turn_ref": {"title": "Turn", "type": ["integer", "null"], "format": "uint32"}
            }
        }) {
            Value::Object(map) => map,
            _ => unreachable!("an object literal"),
        };
        conventions("search", &mut schema);
        assert_eq!(
            Value::Object(schema),
            json!({
                "type": "object",
                "title": "searchArguments",
                "properties": {
                    "project_key": {"type": "string", "title": "Project Key"},
                    "limit": {"type": "integer", "default": 50, "title": "Limit"},
                    "rows": {"type": "array", "items": {}, "title": "Rows"},
                    "turn_ref": {"title": "Turn", "type": ["integer", "null"]}
                }
            })
        );
        let mut empty = JsonObject::new();
        conventions("ping", &mut empty);
        assert_eq!(
            Value::Object(empty),
            json!({"title": "pingArguments", "properties": {}})
        );
    }
}
