//! The `tool_output` settings a server runs with: the engine's thresholds and the
//! OpenAI-compatible endpoint, if one is configured.

use super::engine::EngineConfig;
use super::model::openai::EndpointConfig;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Settings {
    pub engine: EngineConfig,
    /// `None`: no endpoint; a model is then only reachable through the client's sampling.
    pub endpoint: Option<EndpointConfig>,
}
