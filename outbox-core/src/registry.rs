//! The contract registry: every contract linked into the binary, sorted by event type.
//!
//! `#[derive(IntegrationEvent)]` submits a [`ContractRegistration`] through the `inventory`
//! crate. [`ContractRegistry::collect`] gathers them, sorts them by event type and rejects two
//! Rust types claiming the same event type.
//!
//! # Linking every contracts crate
//!
//! `inventory` registrations live in static constructors of the crate that defines the
//! contract. The linker drops a crate that nothing references, and with it its
//! registrations. A binary that exports schemas must therefore reference every contracts
//! crate it wants to see, with [`link_contracts!`](crate::link_contracts):
//!
//! ```ignore
//! fn main() -> std::process::ExitCode {
//!     outbox_kernel::link_contracts!(bookstore_contracts, shipping_contracts);
//!     outbox_kernel::cli::run()
//! }
//! ```

use std::collections::BTreeMap;
use std::fmt;

/// What `#[derive(IntegrationEvent)]` registers for one contract.
///
/// Built only by the derive; read it through [`ContractRegistry`].
#[derive(Debug)]
pub struct ContractRegistration {
    /// Full versioned event type, e.g. `bookstore.ordering.order-placed.v1`.
    pub event_type: &'static str,
    /// Event type without the version segment.
    pub name: &'static str,
    /// Contract version.
    pub version: u32,
    /// Aggregate type the key identifies.
    pub aggregate_type: &'static str,
    /// Name of the key field.
    pub key_field: &'static str,
    /// Fully qualified Rust type, e.g. `bookstore_contracts::OrderPlacedV1`.
    pub rust_type: &'static str,
    /// The type's doc comment (empty when it has none).
    pub description: &'static str,
    /// Builds the contract's JSON Schema (draft 2020-12, serialize mode) with a fresh
    /// generator.
    pub schema: fn() -> schemars::Schema,
}

inventory::collect!(ContractRegistration);

impl ContractRegistration {
    /// Builds the contract's JSON Schema (draft 2020-12, serialize mode).
    pub fn json_schema(&self) -> schemars::Schema {
        (self.schema)()
    }
}

/// Errors found while collecting contracts.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryError {
    /// Two Rust types declare the same versioned event type.
    #[error("event type `{event_type}` is claimed by two Rust types: `{first}` and `{second}`")]
    DuplicateEventType {
        /// The contested event type.
        event_type: String,
        /// One claimant (alphabetically first).
        first: String,
        /// The other claimant.
        second: String,
    },
}

/// Every registered contract, sorted by event type, without duplicates.
#[derive(Clone)]
pub struct ContractRegistry {
    contracts: Vec<&'static ContractRegistration>,
}

impl fmt::Debug for ContractRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.contracts.iter().map(|c| c.event_type))
            .finish()
    }
}

impl ContractRegistry {
    /// Collects every contract linked into this binary.
    ///
    /// # Errors
    /// [`RegistryError::DuplicateEventType`] when two Rust types claim one event type.
    pub fn collect() -> Result<Self, RegistryError> {
        Self::from_registrations(inventory::iter::<ContractRegistration>())
    }

    /// Builds a registry from explicit registrations (sorted and checked like
    /// [`collect`](Self::collect)).
    ///
    /// # Errors
    /// [`RegistryError::DuplicateEventType`] when two registrations share an event type.
    pub fn from_registrations(
        registrations: impl IntoIterator<Item = &'static ContractRegistration>,
    ) -> Result<Self, RegistryError> {
        let mut by_type: BTreeMap<&'static str, &'static ContractRegistration> = BTreeMap::new();
        for registration in registrations {
            if let Some(existing) = by_type.insert(registration.event_type, registration) {
                let mut claimants = [existing.rust_type, registration.rust_type];
                claimants.sort_unstable();
                return Err(RegistryError::DuplicateEventType {
                    event_type: registration.event_type.to_owned(),
                    first: claimants[0].to_owned(),
                    second: claimants[1].to_owned(),
                });
            }
        }
        Ok(Self {
            contracts: by_type.into_values().collect(),
        })
    }

    /// The contracts, sorted by event type.
    pub fn contracts(&self) -> &[&'static ContractRegistration] {
        &self.contracts
    }

    /// The contract with this event type, if registered.
    pub fn get(&self, event_type: &str) -> Option<&'static ContractRegistration> {
        self.contracts
            .binary_search_by(|c| c.event_type.cmp(event_type))
            .ok()
            .map(|i| self.contracts[i])
    }

    /// Number of contracts.
    pub fn len(&self) -> usize {
        self.contracts.len()
    }

    /// Whether no contract is registered.
    pub fn is_empty(&self) -> bool {
        self.contracts.is_empty()
    }
}

/// References every listed crate so that the linker keeps it, and with it the contracts it
/// registers. Call it at the start of `main` of a binary that exports or checks schemas.
///
/// Each argument is the name of a crate that defines contracts with
/// `#[derive(IntegrationEvent)]` and calls [`contracts_crate!`](crate::contracts_crate) once
/// at its root.
#[macro_export]
macro_rules! link_contracts {
    ($($krate:ident),+ $(,)?) => {
        $( $krate::__outbox_contracts_anchor(); )+
    };
}

/// Marks the current crate as a contracts crate: defines the anchor function that
/// [`link_contracts!`](crate::link_contracts) calls. Put it once at the crate root.
#[macro_export]
macro_rules! contracts_crate {
    () => {
        #[doc(hidden)]
        #[inline(never)]
        pub fn __outbox_contracts_anchor() {
            $crate::__private::anchor(::core::module_path!());
        }
    };
}
