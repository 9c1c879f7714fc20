//! Expansion snapshots (see [`crate::snapshot`]; `UPDATE_SNAPSHOTS=1` rewrites them) and
//! error collection.

use proc_macro2::TokenStream;
use quote::quote;
use syn::DeriveInput;

use super::{derive, expand};
use crate::snapshot::render;

/// Compares the expansion of `input` with the snapshot `name`.
fn assert_snapshot(name: &str, input: TokenStream) {
    crate::snapshot::assert_snapshot(name, derive, input);
}

#[test]
fn snapshot_struct() {
    assert_snapshot(
        "struct",
        quote! {
            #[derive(Serialize, Deserialize, JsonSchema)]
            #[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
            pub struct OrderPlacedV1 {
                pub order_id: u64,
                pub total_cents: i64,
            }
        },
    );
}

#[test]
fn snapshot_tagged_enum() {
    assert_snapshot(
        "tagged_enum",
        quote! {
            #[derive(Serialize, Deserialize, JsonSchema)]
            #[serde(tag = "status", rename_all = "kebab-case")]
            #[integration_event(name = "bookstore.shipping.shipment-changed.v3", key = shipment_id)]
            pub enum ShipmentChangedV3 {
                Dispatched { shipment_id: Uuid, carrier: String },
                Delivered { signed_by: String, shipment_id: Uuid },
            }
        },
    );
}

/// `consumed`: the impl without the registration (a consumer's copy of another team's
/// contract must not be exported as its own).
#[test]
fn snapshot_consumed() {
    assert_snapshot(
        "consumed",
        quote! {
            #[derive(Serialize, Deserialize, JsonSchema)]
            #[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id, consumed)]
            pub struct OrderPlacedV1 {
                pub order_id: ::uuid::Uuid,
            }
        },
    );
}

#[test]
fn snapshot_aggregate_override() {
    assert_snapshot(
        "aggregate_override",
        quote! {
            #[integration_event(
                name = "bookstore.catalog.copy-shelved.v2",
                key = "copy_id",
                aggregate = "book-copy",
            )]
            pub struct CopyShelvedV2 {
                pub copy_id: String,
                pub r#type: String,
            }
        },
    );
}

#[test]
fn snapshot_doc_comments() {
    assert_snapshot(
        "doc_comments",
        quote! {
            /// A book was added to the catalogue.
            ///
            /// Consumers index it for search; `isbn` is the ISBN-13.
            #[integration_event(name = "bookstore.catalog.book-added.v1", key = isbn)]
            pub struct BookAddedV1 {
                /// The ISBN-13 of the book.
                pub isbn: String,
            }
        },
    );
}

#[test]
fn snapshot_errors_and_stub() {
    assert_snapshot(
        "errors_and_stub",
        quote! {
            #[integration_event(name = "Bookstore.Ordering.OrderPlaced", key = order_id)]
            pub struct OrderPlaced {
                pub id: u64,
            }
        },
    );
}

fn messages(input: TokenStream) -> Vec<String> {
    let input: DeriveInput = syn::parse2(input).expect("test input is a derive input");
    match expand(&input) {
        Ok(tokens) => panic!("expected errors, got:\n{}", render(tokens)),
        Err(error) => error.into_iter().map(|e| e.to_string()).collect(),
    }
}

#[test]
fn reports_every_error_at_once() {
    let messages = messages(quote! {
        #[integration_event(name = "bookstore.ordering.v1", key = nope, aggregate = "Order")]
        enum Changed<T> {
            A { order_id: T },
        }
    });
    let expected = [
        "invalid event type `bookstore.ordering.v1`: the event type has 2 name segment(s)",
        "invalid aggregate type `Order`: it must start with a lowercase ASCII letter",
        "`Changed` has generic parameters",
        "`Changed` must be internally or adjacently tagged",
        "no variant of `Changed` has a field `nope`",
    ];
    assert_eq!(messages.len(), expected.len(), "{messages:#?}");
    for (message, start) in messages.iter().zip(expected) {
        assert!(
            message.starts_with(start),
            "{message:?} should start with {start:?}"
        );
    }
}

#[test]
fn darling_reports_unknown_and_duplicate_keys() {
    let messages = messages(quote! {
        #[integration_event(nmae = "a.b.c.v1", key = id, key = id)]
        struct S { id: u64 }
    });
    assert_eq!(
        messages,
        [
            "Unknown field: `nmae`. Did you mean `name`?",
            "Duplicate field `key`",
        ]
    );
}

#[test]
fn missing_attribute_name_and_key() {
    assert_eq!(
        messages(quote!(
            struct S {
                id: u64,
            }
        )),
        [
            "missing #[integration_event(name = \"...\", key = field)]: a contract needs its \
          versioned event type and the field that identifies its aggregate, e.g. \
          #[integration_event(name = \"bookstore.ordering.order-placed.v1\", key = order_id)]"
        ]
    );
    let messages = messages(quote! {
        #[integration_event()]
        struct S { id: u64 }
    });
    assert_eq!(messages.len(), 2, "{messages:#?}");
    assert!(messages[0].starts_with("missing `name = \"...\"`"));
    assert!(messages[1].starts_with("missing `key = <field>`"));
}

#[test]
fn shapes() {
    for (input, start) in [
        (
            quote!(
                union U {
                    a: u64,
                }
            ),
            "`U` is a union",
        ),
        (
            quote!(
                struct T(u64);
            ),
            "`T` is a tuple struct",
        ),
        (
            quote!(
                struct T;
            ),
            "`T` is a unit struct",
        ),
    ] {
        let mut attributed = quote!(#[integration_event(name = "a.b.c.v1", key = a)]);
        attributed.extend(input);
        let messages = messages(attributed);
        assert_eq!(messages.len(), 1, "{messages:#?}");
        assert!(messages[0].starts_with(start), "{messages:#?}");
    }
}

#[test]
fn stub_only_for_concrete_structs_and_enums() {
    let stub_of = |input: TokenStream| {
        let input: DeriveInput = syn::parse2(input).expect("derive input");
        derive(&input)
            .to_string()
            .contains("impl :: outbox_kernel :: IntegrationEvent")
    };
    assert!(stub_of(quote!(
        struct S;
    )));
    assert!(stub_of(quote!(
        enum E {}
    )));
    assert!(!stub_of(quote!(
        struct S<T>(T);
    )));
    assert!(!stub_of(quote!(
        struct S<'a>(&'a str);
    )));
    assert!(!stub_of(quote!(
        union U {
            a: u8,
        }
    )));
}

#[test]
fn key_accepts_ident_string_and_macro_groups() {
    for key in [
        quote!(order_id),
        quote!("order_id"),
        // What a `macro_rules!` `$key:expr` fragment looks like.
        proc_macro2::TokenTree::Group(proc_macro2::Group::new(
            proc_macro2::Delimiter::None,
            quote!(order_id),
        ))
        .into(),
    ] {
        let input: DeriveInput = syn::parse_quote! {
            #[integration_event(name = "a.b.c.v1", key = #key)]
            struct S { order_id: u64 }
        };
        let tokens = expand(&input)
            .unwrap_or_else(|e| panic!("{key}: {e}"))
            .to_string();
        assert!(
            tokens.contains("const KEY_FIELD : & 'static str = \"order_id\""),
            "{tokens}"
        );
    }
    for (key, message) in [
        (quote!(a::b), "`key` must be the name of a field"),
        (quote!("not a field"), "`key` must be the name of a field"),
        (quote!(1), "`key` must be the name of a field"),
    ] {
        let messages = messages(quote! {
            #[integration_event(name = "a.b.c.v1", key = #key)]
            struct S { order_id: u64 }
        });
        assert_eq!(messages.len(), 1, "{messages:#?}");
        assert!(messages[0].starts_with(message), "{messages:#?}");
    }
}

#[test]
fn name_and_aggregate_must_be_literals() {
    let messages = messages(quote! {
        #[integration_event(name = NAME, key = id, aggregate = concat!("a", "b"))]
        struct S { id: u64 }
    });
    assert_eq!(messages.len(), 2, "{messages:#?}");
    assert!(messages[0].starts_with("`name` must be a string literal"));
    assert!(messages[1].starts_with("`aggregate` must be a string literal"));
}

#[test]
fn keys_without_values() {
    let messages = messages(quote! {
        #[integration_event(name, key(order_id), aggregate)]
        struct S { order_id: u64 }
    });
    assert_eq!(
        messages,
        [
            "expected a value, e.g. `name = \"bookstore.ordering.order-placed.v1\"`",
            "expected a value, e.g. `key = order_id`",
            "expected a value, e.g. `aggregate = \"order\"`",
        ]
    );
}

#[test]
fn snapshot_crate_override() {
    assert_snapshot(
        "crate_override",
        quote! {
            #[integration_event(
                name = "bookstore.ordering.order-placed.v1",
                key = order_id,
                crate = "renamed_kernel",
            )]
            pub struct OrderPlacedV1 {
                pub order_id: u64,
            }
        },
    );
}

#[test]
fn crate_override_must_be_one_path() {
    let not_a_path = "`crate` must be the path of the `outbox-kernel` crate as this crate names it, \
                      e.g. `crate = \"renamed_kernel\"` for a dependency renamed in Cargo.toml";
    for (attrs, expected) in [
        (
            quote!(#[integration_event(name = "a.b.c.v1", key = id, crate = a, crate = b)]),
            "Duplicate field `crate`",
        ),
        (
            quote! {
                #[integration_event(name = "a.b.c.v1", key = id, crate = a)]
                #[integration_event(crate = b)]
            },
            "Duplicate field `crate`",
        ),
        (
            quote!(#[integration_event(name = "a.b.c.v1", key = id, crate = 5)]),
            not_a_path,
        ),
        (
            quote!(#[integration_event(name = "a.b.c.v1", key = id, crate = "not a path")]),
            not_a_path,
        ),
        (
            quote!(#[integration_event(name = "a.b.c.v1", key = id, crate)]),
            "expected a value, e.g. `crate = \"renamed_kernel\"`",
        ),
    ] {
        let messages = messages(quote! {
            #attrs
            struct S { id: u64 }
        });
        assert_eq!(messages, [expected], "{attrs}");
    }
}

#[test]
fn the_stub_names_the_overridden_crate() {
    let input: DeriveInput = syn::parse_quote! {
        #[integration_event(name = "Bad", key = id, crate = ::renamed_kernel)]
        struct S { id: u64 }
    };
    let output = derive(&input).to_string();
    assert!(
        output.contains("impl :: renamed_kernel :: IntegrationEvent for S"),
        "{output}"
    );
    assert!(!output.contains("outbox_kernel"), "{output}");
}
