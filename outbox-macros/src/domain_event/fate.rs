//! What becomes of each variant: its contracts, its mapping function, or nothing (`local`).
//!
//! [`fate`] checks that the options of a variant's attribute fit together and fit the
//! variant's shape.

use std::collections::HashSet;

use quote::ToTokens;
use syn::{ExprPath, Fields, Type, TypePath, Variant};

use super::attr::{self, VariantAttr, VariantOptions};
use crate::shared::Errors;

/// The validated decision for one variant.
pub(crate) enum Fate<'a> {
    /// Newtype variant: each contract is built from the payload with `From<&Payload>` and
    /// emitted, in the order written.
    Contracts {
        /// The type of the newtype's field.
        payload: &'a Type,
        /// The contract types, at least one.
        contracts: Vec<TypePath>,
    },
    /// A mapping function emits the contracts.
    Map {
        /// The function.
        function: ExprPath,
        /// Whether the variant is a newtype: the function then receives the payload, otherwise
        /// the whole event.
        newtype: bool,
    },
    /// The event never leaves the process.
    Local,
}

/// The field type of a tuple variant with exactly one field.
fn newtype_payload(variant: &Variant) -> Option<&Type> {
    match &variant.fields {
        Fields::Unnamed(fields) if fields.unnamed.len() == 1 => {
            fields.unnamed.first().map(|field| &field.ty)
        }
        _ => None,
    }
}

/// A path as the user would write it: `crate::contracts::OrderPlacedV1`, not
/// `crate :: contracts :: OrderPlacedV1`.
fn text(path: &TypePath) -> String {
    path.to_token_stream()
        .to_string()
        .replace(" :: ", "::")
        .replace(":: ", "::")
        .replace(" ::", "::")
        .replace(" < ", "<")
        .replace("< ", "<")
        .replace(" >", ">")
}

/// How a variant that is not a newtype is described in messages.
fn shape(variant: &Variant) -> String {
    match &variant.fields {
        Fields::Named(_) => "a struct variant".to_owned(),
        Fields::Unit => "a unit variant".to_owned(),
        Fields::Unnamed(fields) => match fields.unnamed.len() {
            0 => "a tuple variant without fields".to_owned(),
            1 => "a newtype variant".to_owned(),
            n => format!("a tuple variant with {n} fields"),
        },
    }
}

/// Checks the options of `variant`'s attribute and returns its fate; reports every problem
/// into `errors` (then `None`).
pub(crate) fn fate<'a>(
    variant: &'a Variant,
    attr: VariantAttr<'_>,
    errors: &mut Errors,
) -> Option<Fate<'a>> {
    let ident = &variant.ident;
    let VariantOptions {
        contract,
        map,
        local,
    } = attr.options;
    let contracts: Vec<TypePath> = contract.into_iter().map(|c| c.0).collect();
    let mut valid = true;
    let mut fail = |error: syn::Error| {
        errors.push(error);
        valid = false;
    };

    if local.is_present() && (!contracts.is_empty() || map.is_some()) {
        fail(syn::Error::new(
            local.span(),
            format!(
                "variant `{ident}` is marked `local` and also mapped: a local event never leaves \
                 the process and emits no contract; keep either `local` or the mapping"
            ),
        ));
    }
    if let (Some(first), Some(map)) = (contracts.first(), &map) {
        fail(syn::Error::new_spanned(
            &map.0,
            format!(
                "variant `{ident}` has both `contract` and `map`: pick one. `contract = {}` \
                 builds the contract from the payload with `From`; `map = …` names a function \
                 that emits every contract of the event itself, with `out.emit(&contract)`",
                text(first)
            ),
        ));
    }
    let payload = newtype_payload(variant);
    if let (Some(first), None) = (contracts.first(), payload) {
        fail(syn::Error::new_spanned(
            first,
            format!(
                "`contract = …` needs a newtype variant, e.g. `{ident}({ident})`, whose payload \
                 converts into the contract with `From<&{ident}>`; `{ident}` is {}: use \
                 `map = …` instead, a function that receives the whole event",
                shape(variant)
            ),
        ));
    }
    let mut seen = HashSet::new();
    for contract in &contracts {
        if !seen.insert(text(contract)) {
            fail(syn::Error::new_spanned(
                contract,
                format!(
                    "contract `{}` is listed twice for variant `{ident}`: it would be emitted \
                     twice",
                    text(contract)
                ),
            ));
        }
    }
    if contracts.is_empty() && map.is_none() && !local.is_present() {
        fail(attr::empty(attr.attr, variant));
    }
    if !valid {
        return None;
    }

    // The checks above leave one option (or several `contract`s, on a newtype variant).
    Some(match (payload, map) {
        (_, Some(map)) => Fate::Map {
            function: map.0,
            newtype: payload.is_some(),
        },
        (Some(payload), None) if !contracts.is_empty() => Fate::Contracts { payload, contracts },
        _ => Fate::Local,
    })
}
