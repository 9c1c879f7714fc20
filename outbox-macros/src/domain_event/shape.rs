//! What the derive accepts as a domain event type: an enum, without lifetime parameters,
//! whose attributes are on its variants (only `crate = …` goes on the enum).
//!
//! Type and const parameters are accepted; each type parameter gets the bounds of the
//! `DomainEvent` trait (`Send + 'static`), see [`bounded`].

use quote::quote;
use syn::punctuated::Punctuated;
use syn::{Data, DeriveInput, GenericParam, Generics, Token, Variant, parse_quote};

use super::attr::{ATTRIBUTE, is_enum_attr};
use crate::shared::Errors;

/// The variants of `input`, if it is an enum; reports structs and unions.
pub(crate) fn variants<'a>(
    input: &'a DeriveInput,
    errors: &mut Errors,
) -> Option<&'a Punctuated<Variant, Token![,]>> {
    let ident = &input.ident;
    let (keyword, kind) = match &input.data {
        Data::Enum(data) => return Some(&data.variants),
        Data::Struct(data) => {
            let token = &data.struct_token;
            (quote!(#token), "struct")
        }
        Data::Union(data) => {
            let token = &data.union_token;
            (quote!(#token), "union")
        }
    };
    errors.push(syn::Error::new_spanned(
        quote!(#keyword #ident),
        format!(
            "`{ident}` is a {kind}: DomainEvent is derived on the domain event enum, with a \
             #[domain_event(...)] on each variant saying which contracts it maps to"
        ),
    ));
    None
}

/// Reports lifetime parameters: a domain event is kept by the unit of work until commit, so
/// it is `'static` and cannot borrow.
pub(crate) fn check_generics(input: &DeriveInput, errors: &mut Errors) {
    let ident = &input.ident;
    for param in &input.generics.params {
        if let GenericParam::Lifetime(param) = param {
            errors.push(syn::Error::new_spanned(
                &param.lifetime,
                format!(
                    "`{ident}` has the lifetime parameter `{}`: a domain event is `'static` (the \
                     unit of work keeps it until commit), so it must own its data",
                    param.lifetime
                ),
            ));
        }
    }
}

/// Reports `#[domain_event(...)]` on the enum itself (other than `crate = …`, see
/// [`is_enum_attr`]) or on a field: it belongs on variants.
pub(crate) fn check_misplaced(
    input: &DeriveInput,
    variants: &Punctuated<Variant, Token![,]>,
    errors: &mut Errors,
) {
    let on_fields = variants
        .iter()
        .flat_map(|variant| variant.fields.iter())
        .flat_map(|field| field.attrs.iter());
    for (attr, place) in input
        .attrs
        .iter()
        .filter(|attr| !is_enum_attr(attr))
        .map(|attr| (attr, "the enum"))
        .chain(on_fields.map(|attr| (attr, "a field")))
    {
        if attr.path().is_ident(ATTRIBUTE) {
            errors.push(syn::Error::new_spanned(
                attr,
                format!("#[domain_event(...)] belongs on each variant of the enum, not on {place}"),
            ));
        }
    }
}

/// `generics` with `T: Send + 'static` added for each type parameter `T`, as the
/// `DomainEvent` trait requires of the whole type.
pub(crate) fn bounded(generics: &Generics) -> Generics {
    let mut bounded = generics.clone();
    let params: Vec<_> = generics
        .params
        .iter()
        .filter_map(|param| match param {
            GenericParam::Type(param) => Some(&param.ident),
            _ => None,
        })
        .collect();
    if params.is_empty() {
        return bounded;
    }
    let where_clause = bounded.make_where_clause();
    for param in params {
        where_clause
            .predicates
            .push(parse_quote!(#param: ::core::marker::Send + 'static));
    }
    bounded
}
