//! The `#[integration_event(...)]` attribute, parsed with darling.
//!
//! darling checks the attribute's syntax: unknown keys (with a "did you mean" suggestion),
//! duplicate keys and values of the wrong kind. What the values mean (the event-type grammar,
//! whether the key names a field) is checked afterwards, in the parent module, so that those
//! errors can be reported together with the errors about the type itself.

use darling::{FromDeriveInput, FromMeta};
use syn::{Attribute, DeriveInput, Expr, Ident, LitStr};

use crate::runtime::{Core, CratePath};
use crate::shared::{str_lit, ungroup};

/// How `name` is written.
const NAME_EXAMPLE: &str = "name = \"bookstore.ordering.order-placed.v1\"";
/// How `key` is written.
const KEY_EXAMPLE: &str = "key = order_id";
/// How `aggregate` is written.
const AGGREGATE_EXAMPLE: &str = "aggregate = \"order\"";

/// The path of the attribute.
pub(crate) const ATTRIBUTE: &str = "integration_event";

/// The options of `#[integration_event(...)]` as written, not yet validated.
#[derive(Debug, FromDeriveInput)]
#[darling(attributes(integration_event))]
pub(crate) struct ContractAttr {
    /// `name = "bookstore.ordering.order-placed.v1"`: the versioned event type.
    pub(crate) name: Option<EventTypeLit>,
    /// `key = order_id`: the field that identifies the aggregate.
    pub(crate) key: Option<KeyField>,
    /// `aggregate = "order"`: the aggregate type, instead of the one derived from the key.
    pub(crate) aggregate: Option<AggregateLit>,
    /// `crate = "renamed_kernel"`: the path of `outbox-kernel`, for a renamed dependency.
    #[darling(rename = "crate")]
    pub(crate) krate: Option<CratePath<Core>>,
    /// `consumed`: a consumer's copy of another team's contract (generated from its exported
    /// schema by `outbox-codegen`, or written by hand). It implements the trait but is not
    /// registered, so the consumer's own `schemas export` does not publish it as its own.
    #[darling(default)]
    pub(crate) consumed: ConsumedFlag,
}

/// The attribute, once we know it is present.
pub(crate) struct ParsedAttr<'a> {
    /// The first `#[integration_event(...)]` of the type (errors about a missing key point
    /// at it).
    pub(crate) first: &'a Attribute,
    /// Its options.
    pub(crate) options: ContractAttr,
}

/// Parses the attribute.
///
/// # Errors
/// When the type has no `#[integration_event(...)]` at all (on the type's name), or when
/// darling rejects its syntax (on the offending tokens).
pub(crate) fn parse(input: &DeriveInput) -> syn::Result<ParsedAttr<'_>> {
    let Some(first) = input.attrs.iter().find(|a| a.path().is_ident(ATTRIBUTE)) else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "missing #[integration_event(name = \"...\", key = field)]: a contract needs its \
             versioned event type and the field that identifies its aggregate, e.g. \
             #[integration_event(name = \"bookstore.ordering.order-placed.v1\", key = order_id)]",
        ));
    };
    let options = ContractAttr::from_derive_input(input)?;
    Ok(ParsedAttr { first, options })
}

/// The error for `key` or `key(...)` instead of `key = value` (darling puts it on the item).
fn needs_value(example: &str) -> darling::Error {
    darling::Error::custom(format!("expected a value, e.g. `{example}`"))
}

/// `name = "..."`: must be a string literal (the grammar is checked later, on its value).
#[derive(Debug, Clone)]
pub(crate) struct EventTypeLit(pub(crate) LitStr);

impl FromMeta for EventTypeLit {
    fn from_word() -> darling::Result<Self> {
        Err(needs_value(NAME_EXAMPLE))
    }

    fn from_list(_: &[darling::ast::NestedMeta]) -> darling::Result<Self> {
        Err(needs_value(NAME_EXAMPLE))
    }

    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        str_lit(expr).cloned().map(Self).ok_or_else(|| {
            darling::Error::custom(format!(
                "`name` must be a string literal, e.g. `{NAME_EXAMPLE}`: the derive validates \
                 the event type at compile time, so it cannot be a constant or a macro call"
            ))
            .with_span(expr)
        })
    }
}

/// `aggregate = "..."`: must be a string literal (its form is checked later).
#[derive(Debug, Clone)]
pub(crate) struct AggregateLit(pub(crate) LitStr);

impl FromMeta for AggregateLit {
    fn from_word() -> darling::Result<Self> {
        Err(needs_value(AGGREGATE_EXAMPLE))
    }

    fn from_list(_: &[darling::ast::NestedMeta]) -> darling::Result<Self> {
        Err(needs_value(AGGREGATE_EXAMPLE))
    }

    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        str_lit(expr).cloned().map(Self).ok_or_else(|| {
            darling::Error::custom(format!(
                "`aggregate` must be a string literal, e.g. `{AGGREGATE_EXAMPLE}`"
            ))
            .with_span(expr)
        })
    }
}

/// `key = order_id` (or `key = "order_id"`): the name of a field.
#[derive(Debug, Clone)]
pub(crate) struct KeyField(pub(crate) Ident);

impl FromMeta for KeyField {
    fn from_word() -> darling::Result<Self> {
        Err(needs_value(KEY_EXAMPLE))
    }

    fn from_list(_: &[darling::ast::NestedMeta]) -> darling::Result<Self> {
        Err(needs_value(KEY_EXAMPLE))
    }

    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        let ident = match ungroup(expr) {
            Expr::Path(path) if path.qself.is_none() => path.path.get_ident().cloned(),
            Expr::Lit(_) => str_lit(expr).and_then(|s| s.parse::<Ident>().ok()),
            _ => None,
        };
        ident.map(Self).ok_or_else(|| {
            darling::Error::custom(format!(
                "`key` must be the name of a field, e.g. `{KEY_EXAMPLE}`"
            ))
            .with_span(expr)
        })
    }
}

/// `consumed`: a flag, present or not.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ConsumedFlag(pub(crate) bool);

impl FromMeta for ConsumedFlag {
    fn from_word() -> darling::Result<Self> {
        Ok(Self(true))
    }

    fn from_list(_: &[darling::ast::NestedMeta]) -> darling::Result<Self> {
        Err(flag_without_value())
    }

    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        Err(flag_without_value().with_span(expr))
    }
}

fn flag_without_value() -> darling::Error {
    darling::Error::custom(
        "`consumed` is a flag: write `consumed` alone, on a consumer's copy of another team's \
         contract",
    )
}
