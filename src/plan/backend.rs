//! Every backend benchplan speaks, as data: one [`BackendSpec`] per [`Backend`] says
//! its name, its endpoints, how its request body is sent, how its answer comes back
//! (which stream parser reads it, or one pooling answer), which inputs it takes and
//! which simulator handler serves it. The planner's compatibility rules, the client's
//! content type and stream parser, the simulator's routes and the `--backend` help
//! all read this table; adding a backend is a row here, its body builder
//! (`client::backend`) and, for a new API, its stream parser.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The request function used against the target (vLLM's `--backend`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// Completions API (`/v1/completions`), streamed.
    Vllm,
    /// Completions API (`/v1/completions`), streamed; vLLM's default backend.
    Openai,
    /// Chat completions API (`/v1/chat/completions`), streamed.
    OpenaiChat,
    /// Responses API (`/v1/responses`), streamed as typed events.
    OpenaiResponses,
    /// Audio transcription or translation (`/v1/audio/transcriptions` or
    /// `/v1/audio/translations`): a multipart upload of a WAV clip, streamed back as
    /// chat-style chunks.
    OpenaiAudio,
    /// Embeddings API (`/v1/embeddings`), a pooling backend.
    OpenaiEmbeddings,
    /// vLLM's rerank API (`/v1/rerank`), a pooling backend.
    VllmRerank,
}

/// The shape of a streamed answer: which rules decide what a chunk says (the client's
/// stream parser) and how the simulator writes it. One enum for both sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Completions,
    Chat,
    /// The Responses API's typed events: read by `client::responses`, never as chunks.
    Responses,
    /// `/v1/audio/transcriptions` and `/translations`: chat-shaped chunks
    /// (`transcription.chunk`) with no role delta, each carrying the usage so far when
    /// `stream_continuous_usage_stats` asks for it, as vLLM's do; read as chat.
    Transcription,
}

/// How a request body is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyForm {
    Json,
    /// A multipart form (an uploaded file).
    Multipart,
}

/// What a dataset gives each request, and so which backends can send it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inputs {
    /// A text prompt.
    Text,
    /// A prompt with images.
    Images,
    /// An audio clip.
    Audio,
    /// A query and documents to rank.
    RerankPairs,
    /// A conversation history, turn by turn.
    Conversation,
}

impl Inputs {
    /// The backend a dataset of these inputs needs, and why (for the planner's
    /// message); None for text, which most backends take.
    pub fn needs(self) -> Option<(Backend, &'static str)> {
        match self {
            Inputs::Text => None,
            Inputs::Images => Some((Backend::OpenaiChat, "sends images, which need the chat API")),
            Inputs::Audio => Some((
                Backend::OpenaiAudio,
                "uploads audio clips, which need the audio API",
            )),
            Inputs::RerankPairs => Some((Backend::VllmRerank, "builds rerank queries")),
            Inputs::Conversation => Some((Backend::OpenaiChat, "sends a conversation history")),
        }
    }
}

/// The simulator's handler of a backend's endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimHandler {
    Completions,
    Chat,
    Responses,
    Transcription,
    Embeddings,
    Rerank,
}

/// One backend, as data.
#[derive(Debug)]
pub struct BackendSpec {
    pub backend: Backend,
    /// As written in plans and on the command line.
    pub name: &'static str,
    /// Every path the simulator serves for it; the first is the endpoint used when the
    /// plan gives none.
    pub endpoints: &'static [&'static str],
    /// Endings an endpoint must have (vLLM's `_validate_api_url`; `profile` fits any).
    pub endpoint_suffixes: &'static [&'static str],
    pub body: BodyForm,
    /// The stream parser of its answer; None for a pooling backend (one answer, no
    /// streaming, no sampling parameters).
    pub stream: Option<Api>,
    /// Whether the server's `usage.prompt_tokens` counts as the input (vLLM's audio
    /// request reads only `completion_tokens`: the input is the dataset's length).
    pub reads_prompt_usage: bool,
    /// The inputs it can send.
    pub takes: &'static [Inputs],
    /// When it takes no text: why a text dataset will not do, and the fix.
    pub needs_dataset: Option<(&'static str, &'static str)>,
    pub sim: SimHandler,
    /// It sends chat messages: the server applies the chat template (a custom
    /// dataset's prompts are not templated by the client), and the chat request's
    /// wordings apply (`content` as a string or parts, `max_tokens` or
    /// `max_completion_tokens`: what a refused request may be reworded in).
    pub chat_messages: bool,
    /// It takes several inputs in one request (`batch_size` of the random dataset).
    pub batched_inputs: bool,
    /// It streams with `stream_options` (which a refused request may drop).
    pub stream_options: bool,
    /// It takes `min_p` (the Responses API has none).
    pub takes_min_p: bool,
    /// vLLM's request function for it merges `extra_body` into the request (its rerank
    /// function ignores it; benchplan merges it always, a declared deviation).
    pub vllm_merges_extra_body: bool,
}

impl BackendSpec {
    /// Whether its requests carry an audio clip (the smoke request sends a quiet one).
    pub fn sends_audio(&self) -> bool {
        self.takes.contains(&Inputs::Audio)
    }
}

/// Every backend, in the order of [`Backend`].
pub const BACKENDS: [BackendSpec; 7] = [
    BackendSpec {
        backend: Backend::Vllm,
        name: "vllm",
        endpoints: &["/v1/completions"],
        endpoint_suffixes: &["completions"],
        body: BodyForm::Json,
        stream: Some(Api::Completions),
        reads_prompt_usage: true,
        takes: &[Inputs::Text],
        needs_dataset: None,
        sim: SimHandler::Completions,
        batched_inputs: false,
        chat_messages: false,
        stream_options: true,
        takes_min_p: true,
        vllm_merges_extra_body: true,
    },
    BackendSpec {
        backend: Backend::Openai,
        name: "openai",
        endpoints: &["/v1/completions"],
        endpoint_suffixes: &["completions"],
        body: BodyForm::Json,
        stream: Some(Api::Completions),
        reads_prompt_usage: true,
        takes: &[Inputs::Text],
        needs_dataset: None,
        sim: SimHandler::Completions,
        batched_inputs: false,
        chat_messages: false,
        stream_options: true,
        takes_min_p: true,
        vllm_merges_extra_body: true,
    },
    BackendSpec {
        backend: Backend::OpenaiChat,
        name: "openai-chat",
        endpoints: &["/v1/chat/completions"],
        endpoint_suffixes: &["chat/completions"],
        body: BodyForm::Json,
        stream: Some(Api::Chat),
        reads_prompt_usage: true,
        takes: &[Inputs::Text, Inputs::Images, Inputs::Conversation],
        needs_dataset: None,
        sim: SimHandler::Chat,
        batched_inputs: false,
        chat_messages: true,
        stream_options: true,
        takes_min_p: true,
        vllm_merges_extra_body: true,
    },
    BackendSpec {
        backend: Backend::OpenaiResponses,
        name: "openai-responses",
        endpoints: &["/v1/responses"],
        endpoint_suffixes: &["responses"],
        body: BodyForm::Json,
        stream: Some(Api::Responses),
        reads_prompt_usage: true,
        takes: &[Inputs::Text],
        needs_dataset: None,
        sim: SimHandler::Responses,
        batched_inputs: false,
        chat_messages: false,
        stream_options: false,
        takes_min_p: false,
        vllm_merges_extra_body: true,
    },
    BackendSpec {
        backend: Backend::OpenaiAudio,
        name: "openai-audio",
        endpoints: &["/v1/audio/transcriptions", "/v1/audio/translations"],
        endpoint_suffixes: &["transcriptions", "translations"],
        body: BodyForm::Multipart,
        // A transcription streams chat-shaped chunks (`choices[0].delta.content`).
        stream: Some(Api::Transcription),
        reads_prompt_usage: false,
        takes: &[Inputs::Audio],
        needs_dataset: Some((
            "uploads audio clips, and dataset `{}` has none",
            "set dataset = { name = \"random-audio\", duration = \"10s\" } or { name = \"custom_audio\", path = \"clips/\" }",
        )),
        sim: SimHandler::Transcription,
        batched_inputs: false,
        chat_messages: false,
        stream_options: true,
        takes_min_p: true,
        vllm_merges_extra_body: true,
    },
    BackendSpec {
        backend: Backend::OpenaiEmbeddings,
        name: "openai-embeddings",
        endpoints: &["/v1/embeddings"],
        endpoint_suffixes: &["embeddings"],
        body: BodyForm::Json,
        stream: None,
        reads_prompt_usage: true,
        takes: &[Inputs::Text],
        needs_dataset: None,
        sim: SimHandler::Embeddings,
        batched_inputs: true,
        chat_messages: false,
        stream_options: false,
        takes_min_p: true,
        vllm_merges_extra_body: true,
    },
    BackendSpec {
        backend: Backend::VllmRerank,
        name: "vllm-rerank",
        endpoints: &["/v1/rerank", "/rerank"],
        endpoint_suffixes: &["rerank"],
        body: BodyForm::Json,
        stream: None,
        reads_prompt_usage: true,
        takes: &[Inputs::RerankPairs],
        needs_dataset: Some((
            "needs the `random-rerank` dataset, not `{}`",
            "set dataset = { name = \"random-rerank\", … }",
        )),
        sim: SimHandler::Rerank,
        batched_inputs: false,
        chat_messages: false,
        stream_options: false,
        takes_min_p: true,
        vllm_merges_extra_body: false,
    },
];

impl Backend {
    pub const ALL: [Backend; 7] = [
        Backend::Vllm,
        Backend::Openai,
        Backend::OpenaiChat,
        Backend::OpenaiResponses,
        Backend::OpenaiAudio,
        Backend::OpenaiEmbeddings,
        Backend::VllmRerank,
    ];

    /// This backend's row of [`BACKENDS`].
    pub fn spec(self) -> &'static BackendSpec {
        &BACKENDS[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The endpoint used when the plan gives none.
    pub fn default_endpoint(self) -> &'static str {
        self.spec().endpoints[0]
    }

    /// Whether an endpoint path fits this backend (vLLM also accepts `profile`).
    pub fn accepts_endpoint(self, endpoint: &str) -> bool {
        let e = endpoint.trim_end_matches('/');
        let suffix_ok =
            self.spec().endpoint_suffixes.iter().any(|s| e.ends_with(s)) || e.ends_with("profile");
        // `/v1/chat/completions` also ends with `completions`: only a backend that names
        // the chat suffix takes it.
        let chat = e.ends_with("chat/completions");
        suffix_ok && (!chat || self.spec().endpoint_suffixes.contains(&"chat/completions"))
    }

    /// Pooling backends answer once, without streaming, and take no sampling parameters.
    pub fn is_pooling(self) -> bool {
        self.spec().stream.is_none()
    }

    /// The backend whose simulator handler serves `path`, if any.
    pub fn served_at(path: &str) -> Option<&'static BackendSpec> {
        BACKENDS.iter().find(|b| b.endpoints.contains(&path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_in_the_enums_order_and_names_match_serde_and_clap() {
        use clap::ValueEnum;
        for (i, b) in Backend::ALL.iter().enumerate() {
            assert_eq!(BACKENDS[i].backend, *b);
            assert_eq!(serde_json::to_value(b).unwrap(), b.name());
            assert_eq!(b.to_possible_value().unwrap().get_name(), b.name());
            assert!(b.accepts_endpoint(b.default_endpoint()), "{}", b.name());
        }
    }

    #[test]
    fn endpoints_fit_their_backends_as_vllm_checks_them() {
        assert!(Backend::OpenaiAudio.accepts_endpoint("/v1/audio/translations"));
        assert!(!Backend::Openai.accepts_endpoint("/v1/chat/completions"));
        assert!(Backend::OpenaiChat.accepts_endpoint("/v1/chat/completions/"));
        assert!(Backend::Vllm.accepts_endpoint("/start_profile"));
        assert!(!Backend::OpenaiEmbeddings.accepts_endpoint("/v1/rerank"));
        assert_eq!(
            Backend::served_at("/rerank").unwrap().backend,
            Backend::VllmRerank
        );
        assert!(Backend::served_at("/v1/models").is_none());
    }
}
