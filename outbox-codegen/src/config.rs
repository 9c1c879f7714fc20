//! What to generate: plain data, built only by [`CodegenConfig::builder`].

use std::collections::BTreeSet;

/// Settings of a generation. Build it with [`CodegenConfig::builder`]:
///
/// ```
/// use outbox_codegen::CodegenConfig;
///
/// let config = CodegenConfig::builder()
///     .kernel_path("outbox_core")
///     .only(["bookstore.ordering.order-placed.v1"])
///     .derive("PartialEq")
///     .build();
/// assert_eq!(config.kernel_path, "outbox_core");
/// assert!(config.derives.contains(&"PartialEq".to_owned()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CodegenConfig {
    /// How the consumer's crate names `outbox-kernel`: the generated code derives
    /// `<kernel_path>::IntegrationEvent` and passes `crate = "<kernel_path>"` to it. Default
    /// `outbox_kernel`; `outbox::core` through the facade, or a rename.
    pub kernel_path: String,
    /// The event types to generate; empty means every contract of the folder.
    pub only: BTreeSet<String>,
    /// Derives added to every generated type besides typify's own (`Clone`, `Debug`,
    /// `serde::Deserialize`, `serde::Serialize`) and `schemars::JsonSchema`, which the
    /// `IntegrationEvent` trait needs.
    pub derives: Vec<String>,
}

impl CodegenConfig {
    /// A builder with the defaults: `outbox_kernel`, every contract, no extra derive.
    pub fn builder() -> CodegenConfigBuilder {
        CodegenConfigBuilder {
            config: Self {
                kernel_path: "outbox_kernel".to_owned(),
                only: BTreeSet::new(),
                derives: Vec::new(),
            },
        }
    }
}

/// Builds a [`CodegenConfig`].
#[derive(Debug, Clone)]
#[must_use]
pub struct CodegenConfigBuilder {
    config: CodegenConfig,
}

impl CodegenConfigBuilder {
    /// How the consumer's crate names `outbox-kernel` (see [`CodegenConfig::kernel_path`]).
    pub fn kernel_path(mut self, path: impl Into<String>) -> Self {
        self.config.kernel_path = path.into();
        self
    }

    /// Generates only these event types (may be called several times).
    pub fn only<I, S>(mut self, event_types: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.config
            .only
            .extend(event_types.into_iter().map(Into::into));
        self
    }

    /// Adds a derive to every generated type, e.g. `"PartialEq"`.
    pub fn derive(mut self, derive: impl Into<String>) -> Self {
        self.config.derives.push(derive.into());
        self
    }

    /// The configuration.
    pub fn build(self) -> CodegenConfig {
        self.config
    }
}
