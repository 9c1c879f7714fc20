//! What the derive accepts as a contract type, and where its key field is.
//!
//! A contract is a concrete (non-generic) struct with named fields, or a concrete enum that
//! serde tags internally or adjacently (`#[serde(tag = "...")]`) and whose variants are all
//! struct variants holding the key field.

use proc_macro2::{TokenStream, TokenTree};
use quote::quote;
use syn::ext::IdentExt;
use syn::punctuated::Punctuated;
use syn::{
    Attribute, Data, DeriveInput, Fields, FieldsNamed, Generics, Ident, Meta, Token, Type, Variant,
};

use super::Errors;

/// The body of a contract type whose shape is acceptable.
pub(crate) enum Body<'a> {
    /// A struct with named fields.
    Struct(&'a FieldsNamed),
    /// An enum (serde-tagged or not: a missing tag is reported, but the variants are still
    /// checked).
    Enum(&'a Punctuated<Variant, Token![,]>),
}

/// Where the key field is, once found.
pub(crate) enum KeyAccess<'a> {
    /// `self.<field>` of a struct.
    Struct {
        /// The field, as declared.
        field: &'a Ident,
        /// Its type (errors about a key that is not `Display` point at it).
        ty: &'a Type,
    },
    /// `Self::<Variant> { <field>, .. }` of each variant of an enum.
    Enum {
        /// Each variant, with its key field as declared and that field's type.
        variants: Vec<(&'a Ident, &'a Ident, &'a Type)>,
    },
}

/// Reports generic parameters: a contract has one schema and one event type, so it must be
/// a concrete type.
pub(crate) fn check_generics(ident: &Ident, generics: &Generics, errors: &mut Errors) {
    if !generics.params.is_empty() {
        let (lt, params, gt) = (&generics.lt_token, &generics.params, &generics.gt_token);
        errors.push(syn::Error::new_spanned(
            quote!(#lt #params #gt),
            format!(
                "`{ident}` has generic parameters: an integration event contract must be a \
                 concrete type, with one schema per event type"
            ),
        ));
    }
}

/// The body of `input`, if its shape can be a contract; reports the shapes that cannot.
pub(crate) fn body<'a>(input: &'a DeriveInput, errors: &mut Errors) -> Option<Body<'a>> {
    let ident = &input.ident;
    match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Named(fields) => Some(Body::Struct(fields)),
            Fields::Unnamed(fields) => {
                errors.push(syn::Error::new_spanned(
                    fields,
                    format!(
                        "`{ident}` is a tuple struct: an integration event contract must be a \
                         struct with named fields, one of which is the `key`"
                    ),
                ));
                None
            }
            Fields::Unit => {
                errors.push(syn::Error::new_spanned(
                    ident,
                    format!(
                        "`{ident}` is a unit struct: an integration event contract must be a \
                         struct with named fields, one of which is the `key`"
                    ),
                ));
                None
            }
        },
        Data::Enum(data) => {
            if !serde_tagged(&input.attrs) {
                errors.push(syn::Error::new_spanned(
                    ident,
                    format!(
                        "`{ident}` must be internally or adjacently tagged: add \
                         #[serde(tag = \"type\")] or #[serde(tag = \"type\", content = \
                         \"data\")]; an integration event enum must name its variant in a \
                         field of the payload, externally tagged and untagged enums are not \
                         supported"
                    ),
                ));
            }
            Some(Body::Enum(&data.variants))
        }
        Data::Union(data) => {
            let union_token = &data.union_token;
            errors.push(syn::Error::new_spanned(
                quote!(#union_token #ident),
                format!(
                    "`{ident}` is a union: an integration event contract must be a struct with \
                     named fields or a serde-tagged enum"
                ),
            ));
            None
        }
    }
}

/// Whether a `#[serde(...)]` attribute sets `tag = "..."` (internally or adjacently tagged).
///
/// Only the top level of the attribute's list is scanned, for the key `tag` followed by `=`
/// at the start of an item; nested lists such as `bound(...)` are single token trees and
/// cannot match.
pub(crate) fn serde_tagged(attrs: &[Attribute]) -> bool {
    attrs
        .iter()
        .filter(|attr| attr.path().is_ident("serde"))
        .filter_map(|attr| match &attr.meta {
            Meta::List(list) => Some(&list.tokens),
            _ => None,
        })
        .any(list_sets_tag)
}

fn list_sets_tag(tokens: &TokenStream) -> bool {
    let mut tokens = tokens.clone().into_iter().peekable();
    let mut at_item_start = true;
    while let Some(token) = tokens.next() {
        match &token {
            TokenTree::Ident(ident) if at_item_start && ident == "tag" => {
                if matches!(tokens.peek(), Some(TokenTree::Punct(p)) if p.as_char() == '=') {
                    return true;
                }
                at_item_start = false;
            }
            TokenTree::Punct(p) if p.as_char() == ',' => at_item_start = true,
            _ => at_item_start = false,
        }
    }
    false
}

/// Whether a field's name is `key` (`r#type` and `type` are the same name).
fn named(field: Option<&Ident>, key: &Ident) -> bool {
    field.is_some_and(|field| field.unraw() == key.unraw())
}

/// The names of the named fields, for "no such field" messages.
fn field_list(fields: &FieldsNamed) -> String {
    let names: Vec<String> = fields
        .named
        .iter()
        .filter_map(|f| f.ident.as_ref())
        .map(|f| format!("`{}`", f.unraw()))
        .collect();
    if names.is_empty() {
        "it has no fields".to_owned()
    } else {
        format!("its fields are {}", names.join(", "))
    }
}

impl<'a> Body<'a> {
    /// Finds the key field.
    ///
    /// # Errors
    /// On the key, when a struct has no such field or no variant of an enum has it; on each
    /// variant lacking it, when only some variants do.
    pub(crate) fn key(&self, ident: &Ident, key: &Ident) -> syn::Result<KeyAccess<'a>> {
        match self {
            Self::Struct(fields) => fields
                .named
                .iter()
                .find(|f| named(f.ident.as_ref(), key))
                .and_then(|f| {
                    Some(KeyAccess::Struct {
                        field: f.ident.as_ref()?,
                        ty: &f.ty,
                    })
                })
                .ok_or_else(|| {
                    syn::Error::new_spanned(
                        key,
                        format!(
                            "no field `{}` in `{ident}`: the key must name one of its fields; {}",
                            key.unraw(),
                            field_list(fields)
                        ),
                    )
                }),
            Self::Enum(variants) => {
                let mut found = Vec::new();
                let mut errors = Errors::default();
                for variant in variants.iter() {
                    let field = match &variant.fields {
                        Fields::Named(fields) => {
                            fields.named.iter().find(|f| named(f.ident.as_ref(), key))
                        }
                        _ => None,
                    };
                    match field.and_then(|f| Some((f.ident.as_ref()?, &f.ty))) {
                        Some((field, ty)) => found.push((&variant.ident, field, ty)),
                        None => errors.push(syn::Error::new_spanned(
                            &variant.ident,
                            format!(
                                "variant `{}` has no field `{}`: every variant of an \
                                 integration event enum must be a struct variant holding the \
                                 key field",
                                variant.ident,
                                key.unraw()
                            ),
                        )),
                    }
                }
                if found.is_empty() && !variants.is_empty() {
                    return Err(syn::Error::new_spanned(
                        key,
                        format!(
                            "no variant of `{ident}` has a field `{}`: the key must name a field \
                             that every variant holds",
                            key.unraw()
                        ),
                    ));
                }
                errors.finish()?;
                Ok(KeyAccess::Enum { variants: found })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    #[test]
    fn serde_tag_detection() {
        let tagged: DeriveInput = parse_quote! {
            #[serde(rename_all = "snake_case", tag = "kind")]
            enum E {}
        };
        assert!(serde_tagged(&tagged.attrs));
        let adjacent: DeriveInput = parse_quote! {
            #[serde(deny_unknown_fields)]
            #[serde(tag = "t", content = "c")]
            enum E {}
        };
        assert!(serde_tagged(&adjacent.attrs));
        for input in [
            parse_quote!(
                enum E {}
            ),
            parse_quote! {
                #[serde(untagged)]
                enum E {}
            },
            parse_quote! {
                #[serde(rename = "tag")]
                enum E {}
            },
            parse_quote! {
                #[serde(bound(tag = "x"))]
                enum E {}
            },
            parse_quote! {
                #[schemars(tag = "x")]
                enum E {}
            },
            parse_quote! {
                #[serde = "tag"]
                enum E {}
            },
        ] {
            let input: DeriveInput = input;
            assert!(!serde_tagged(&input.attrs), "{:?}", input.attrs);
        }
    }

    #[test]
    fn enum_key_errors_point_at_each_variant_lacking_it() {
        let input: DeriveInput = parse_quote! {
            enum E {
                A { order_id: u64 },
                B { other: u64 },
                C(u64),
                D,
            }
        };
        let body = body(&input, &mut Errors::default()).unwrap();
        let key: Ident = parse_quote!(order_id);
        let error = body.key(&input.ident, &key).err().unwrap();
        let messages: Vec<String> = error.into_iter().map(|e| e.to_string()).collect();
        assert_eq!(messages.len(), 3, "{messages:?}");
        for (message, variant) in messages.iter().zip(["B", "C", "D"]) {
            assert!(
                message.starts_with(&format!("variant `{variant}` has no field `order_id`")),
                "{message}"
            );
        }
        let missing: Ident = parse_quote!(nope);
        let message = body.key(&input.ident, &missing).err().unwrap().to_string();
        assert!(
            message.starts_with("no variant of `E` has a field `nope`"),
            "{message}"
        );
    }

    #[test]
    fn raw_identifiers_match() {
        let input: DeriveInput = parse_quote! {
            struct S { r#type: String, id: u64 }
        };
        let body = body(&input, &mut Errors::default()).unwrap();
        for key in [
            parse_quote!(r#type),
            Ident::new("type_", proc_macro2::Span::call_site()),
        ] {
            let found = body.key(&input.ident, &key);
            assert_eq!(found.is_ok(), key != "type_", "{key}");
        }
        let message = body
            .key(&input.ident, &parse_quote!(kind))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            message,
            "no field `kind` in `S`: the key must name one of its fields; its fields are `type`, `id`"
        );
    }
}
