//! The producer's side: contracts that use every construct `#[derive(IntegrationEvent)]`
//! exports. Their export is committed under `schemas/` (the test `committed_export` keeps it
//! equal to these types); the build script generates [`crate::consumer`] from it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, NaiveDate, Utc};
use outbox_core::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

outbox_core::contracts_crate!();

/// Scalars, formats and options: every field kind of a flat struct.
#[derive(Debug, Clone, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "roundtrip.constructs.scalars-changed.v1", key = item_id)]
pub struct ScalarsChangedV1 {
    /// The item (format `uuid`).
    pub item_id: Uuid,
    /// When it happened (format `date-time`).
    pub at: DateTime<Utc>,
    /// A calendar day (format `date`).
    pub day: NaiveDate,
    /// Text.
    pub label: String,
    /// A flag.
    pub active: bool,
    /// Format `uint8`.
    pub small: u8,
    /// Format `uint32`.
    pub count: u32,
    /// Format `uint64`.
    pub big: u64,
    /// Format `int32`.
    pub delta: i32,
    /// Format `int64`.
    pub balance: i64,
    /// Format `double`.
    pub ratio: f64,
    /// An option serialized as `null` when absent (required, nullable).
    pub note: Option<String>,
    /// An option left out when absent (not required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nickname: Option<String>,
    /// A nullable number.
    pub score: Option<i64>,
    /// Any JSON value.
    pub extra: serde_json::Value,
}

/// A postal address: a nested type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AddressV1 {
    /// Street and number.
    pub street: String,
    /// Postal code.
    pub postcode: String,
    /// ISO 3166 country code.
    pub country: CountryV1,
}

/// A country, as a string enum renamed in kebab case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CountryV1 {
    /// Germany.
    Germany,
    /// The Netherlands.
    TheNetherlands,
    /// Turkey.
    Turkey,
}

/// One line of a shipment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LineV1 {
    /// Catalogue id.
    pub sku: String,
    /// Copies.
    pub quantity: u32,
}

/// Nested types, arrays, sets, maps, tuples and renamed fields.
#[derive(Debug, Clone, PartialEq, Eq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "roundtrip.constructs.shipment-prepared.v1", key = shipment_id)]
#[serde(rename_all = "camelCase")]
pub struct ShipmentPreparedV1 {
    /// The shipment.
    pub shipment_id: Uuid,
    /// Where it goes (a nested type).
    pub deliver_to: AddressV1,
    /// Where it may go back to (an optional nested type).
    pub return_to: Option<AddressV1>,
    /// The lines (an array of a nested type).
    pub lines: Vec<LineV1>,
    /// Labels (an array of strings).
    pub labels: Vec<String>,
    /// Distinct tags (`uniqueItems`).
    pub tags: BTreeSet<String>,
    /// Weight per parcel (a map of numbers).
    pub weights: BTreeMap<String, u64>,
    /// Lines by warehouse (a map of a nested type).
    pub by_warehouse: HashMap<String, Vec<LineV1>>,
    /// A pair (a tuple: `prefixItems`).
    pub dimensions: (u32, u32),
    /// A field renamed explicitly.
    #[serde(rename = "carrier-code")]
    pub carrier_code: String,
}

/// How a payment was made: an internally tagged enum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PaymentMethodV1 {
    /// A card.
    Card {
        /// The last four digits.
        last4: String,
    },
    /// A bank transfer.
    Transfer {
        /// The account.
        iban: String,
        /// The reference, when one was given.
        reference: Option<String>,
    },
    /// Cash on delivery.
    Cash,
}

/// A refund: an externally tagged enum (serde's default).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RefundV1 {
    /// Nothing refunded.
    None,
    /// A part, in cents.
    Partial(u64),
    /// All of it, with a reason.
    Full {
        /// Why.
        reason: String,
    },
}

/// A note: an adjacently tagged enum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum NoteV1 {
    /// Free text.
    Text(String),
    /// A reference to a document.
    Document {
        /// Its id.
        id: u64,
    },
}

/// Who paid: an untagged enum (told apart by shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum PayerV1 {
    /// A customer account.
    Account {
        /// The account id.
        account_id: String,
    },
    /// A guest, by e-mail.
    Guest {
        /// The address.
        email: String,
    },
}

/// Audit fields, flattened into the contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AuditV1 {
    /// Who made the change.
    pub changed_by: String,
    /// Revision counter.
    pub revision: u32,
}

/// Enums: a tagged one, an externally tagged one, an adjacently tagged one, an untagged one, a
/// plain string enum; a flattened struct; a closed object (`deny_unknown_fields`).
#[derive(Debug, Clone, PartialEq, Eq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "roundtrip.constructs.payment-settled.v1", key = payment_id)]
#[serde(deny_unknown_fields)]
pub struct PaymentSettledV1 {
    /// The payment.
    pub payment_id: String,
    /// How it was paid.
    pub method: PaymentMethodV1,
    /// What was refunded.
    pub refund: RefundV1,
    /// Where the payer lives.
    pub country: CountryV1,
    /// Several methods tried, in order.
    pub attempts: Vec<PaymentMethodV1>,
    /// A note (adjacently tagged).
    pub note: NoteV1,
    /// Who paid (untagged).
    pub payer: PayerV1,
}

/// A flattened struct: its fields sit beside the contract's own.
#[derive(Debug, Clone, PartialEq, Eq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "roundtrip.constructs.stock-counted.v1", key = warehouse_id)]
pub struct StockCountedV1 {
    /// The warehouse.
    pub warehouse_id: String,
    /// Copies counted.
    pub copies: u64,
    /// Who counted, and the revision.
    #[serde(flatten)]
    pub audit: AuditV1,
}

/// A contract that is itself an enum, tagged, with the key in every variant.
#[derive(Debug, Clone, PartialEq, Eq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "roundtrip.constructs.parcel-changed.v1", key = parcel_id)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum ParcelChangedV1 {
    /// Handed to the carrier.
    Dispatched {
        /// The parcel.
        parcel_id: Uuid,
        /// The carrier.
        carrier: String,
    },
    /// Delivered.
    Delivered {
        /// The parcel.
        parcel_id: Uuid,
        /// Who signed.
        signed_by: Option<String>,
    },
}

/// A constrained value (pattern, lengths, range): typify validates what the schema says.
#[derive(Debug, Clone, PartialEq, Eq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "roundtrip.constructs.price-set.v1", key = sku)]
pub struct PriceSetV1 {
    /// The product, 3 to 12 characters.
    #[schemars(length(min = 3, max = 12))]
    pub sku: String,
    /// Decimal amount, e.g. `12.50`.
    #[schemars(regex(pattern = r"^(0|[1-9][0-9]*)(\.[0-9]{1,4})?$"))]
    pub amount: String,
    /// Percent off, 0 to 100.
    #[schemars(range(min = 0, max = 100))]
    pub discount: u8,
}

/// A tree: a recursive type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CategoryV1 {
    /// Its name.
    pub name: String,
    /// Its children.
    pub children: Vec<CategoryV1>,
}

/// A recursive nested type.
#[derive(Debug, Clone, PartialEq, Eq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "roundtrip.constructs.catalog-reorganized.v1", key = catalog_id)]
pub struct CatalogReorganizedV1 {
    /// The catalogue.
    pub catalog_id: u64,
    /// Its root category.
    pub root: CategoryV1,
}
