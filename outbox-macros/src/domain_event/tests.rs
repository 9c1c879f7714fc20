//! Expansion snapshots (see [`crate::snapshot`]; `UPDATE_SNAPSHOTS=1` rewrites them) and
//! the derive's diagnostics.

use proc_macro2::TokenStream;
use quote::quote;
use syn::DeriveInput;

use super::{derive, expand};
use crate::snapshot::render;

/// Compares the expansion of `input` with the snapshot `domain_event_<name>`.
fn assert_snapshot(name: &str, input: TokenStream) {
    crate::snapshot::assert_snapshot(&format!("domain_event_{name}"), derive, input);
}

#[test]
fn snapshot_all_kinds() {
    assert_snapshot(
        "all_kinds",
        quote! {
            #[derive(Debug, Clone)]
            pub enum OrderingEvent {
                /// One contract.
                #[domain_event(contract = OrderPlacedV1)]
                OrderPlaced(OrderPlaced),
                #[domain_event(contract = OrderCancelledV1, contract = crate::billing::RefundRequestedV1)]
                OrderCancelled(OrderCancelled),
                #[domain_event(map = crate::mapping::map_shipped)]
                OrderShipped(Shipped),
                #[domain_event(map = map_note)]
                NoteAdded { order_id: u64, note: String },
                #[domain_event(local)]
                PricesRecalculated { order_id: u64 },
                #[domain_event(local)]
                Recomputed,
                #[domain_event(map = "map_type")]
                r#type(u8, u8),
            }
        },
    );
}

#[test]
fn snapshot_generic() {
    assert_snapshot(
        "generic",
        quote! {
            pub enum Changed<T: Clone, const N: usize>
            where
                T: Default,
            {
                #[domain_event(contract = ChangedV1)]
                Changed(Change<T>),
                #[domain_event(map = map_batch::<T, N>)]
                Batch([T; N]),
                #[domain_event(local)]
                Nothing,
            }
        },
    );
}

#[test]
fn snapshot_empty_and_all_local() {
    assert_snapshot(
        "empty",
        quote! {
            enum NothingHappens {}
        },
    );
    assert_snapshot(
        "all_local",
        quote! {
            enum Internal {
                #[domain_event(local)]
                Ticked,
                #[domain_event(local)]
                Tocked(u64),
            }
        },
    );
}

#[test]
fn snapshot_errors_and_stub() {
    assert_snapshot(
        "errors_and_stub",
        quote! {
            pub enum OrderingEvent<T> {
                #[domain_event(contract = OrderPlacedV1)]
                OrderPlaced(OrderPlaced),
                Forgotten(T),
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

fn assert_messages(input: TokenStream, expected: &[&str]) {
    let messages = messages(input);
    assert_eq!(messages.len(), expected.len(), "{messages:#?}");
    for (message, start) in messages.iter().zip(expected) {
        assert!(
            message.starts_with(start),
            "{message:?} should start with {start:?}"
        );
    }
}

#[test]
fn every_variant_must_decide() {
    assert_messages(
        quote! {
            enum E {
                #[domain_event(local)]
                A,
                B(u64),
                #[doc = "documented, still undecided"]
                C { id: u64 },
            }
        },
        &[
            "variant `B` is neither mapped nor local: add `#[domain_event(contract = …)]`, \
             `#[domain_event(map = …)]` or `#[domain_event(local)]`",
            "variant `C` is neither mapped nor local",
        ],
    );
}

#[test]
fn options_that_conflict() {
    assert_messages(
        quote! {
            enum E {
                #[domain_event(local, contract = AV1)]
                A(A),
                #[domain_event(map = map_b, local)]
                B(B),
                #[domain_event(contract = CV1, map = map_c)]
                C(C),
                #[domain_event(contract = DV1, contract = other::DV1, contract = DV1)]
                D(D),
            }
        },
        &[
            "variant `A` is marked `local` and also mapped",
            "variant `B` is marked `local` and also mapped",
            "variant `C` has both `contract` and `map`: pick one. `contract = CV1` builds",
            "contract `DV1` is listed twice for variant `D`",
        ],
    );
}

#[test]
fn contract_needs_a_newtype_variant() {
    assert_messages(
        quote! {
            enum E {
                #[domain_event(contract = AV1)]
                A { id: u64 },
                #[domain_event(contract = BV1, contract = BV2)]
                B,
                #[domain_event(contract = CV1)]
                C(u64, u64),
                #[domain_event(contract = DV1)]
                D(),
                #[domain_event(map = map_e)]
                E { id: u64 },
            }
        },
        &[
            "`contract = …` needs a newtype variant, e.g. `A(A)`, whose payload converts into \
             the contract with `From<&A>`; `A` is a struct variant: use `map = …` instead",
            "`contract = …` needs a newtype variant, e.g. `B(B)`, whose payload converts into \
             the contract with `From<&B>`; `B` is a unit variant",
            "`contract = …` needs a newtype variant, e.g. `C(C)`, whose payload converts into \
             the contract with `From<&C>`; `C` is a tuple variant with 2 fields",
            "`contract = …` needs a newtype variant, e.g. `D(D)`, whose payload converts into \
             the contract with `From<&D>`; `D` is a tuple variant without fields",
        ],
    );
}

#[test]
fn empty_and_malformed_attributes() {
    assert_messages(
        quote! {
            enum E {
                #[domain_event()]
                A,
                #[domain_event]
                B,
                #[domain_event = "local"]
                C,
            }
        },
        &[
            "empty #[domain_event]: say what becomes of variant `A` with",
            "empty #[domain_event]: say what becomes of variant `B` with",
            "empty #[domain_event]: say what becomes of variant `C` with",
        ],
    );
}

#[test]
fn darling_reports_unknown_and_duplicate_keys() {
    assert_eq!(
        messages(quote! {
            enum E {
                #[domain_event(contracts = AV1)]
                A(A),
                #[domain_event(map = f, map = g)]
                B(B),
                #[domain_event(locl)]
                C,
                #[domain_event(local, local)]
                D,
            }
        }),
        [
            "Unknown field: `contracts`. Did you mean `contract`?",
            "Duplicate field `map`",
            "Unknown field: `locl`. Did you mean `local`?",
            "Duplicate field `local`",
        ]
    );
}

#[test]
fn duplicate_attributes() {
    assert_messages(
        quote! {
            enum E {
                #[domain_event(contract = AV1)]
                #[domain_event(contract = AV2)]
                #[domain_event(local)]
                A(A),
            }
        },
        &[
            "duplicate #[domain_event] attribute on variant `A`: write all its options in one \
             attribute",
            "duplicate #[domain_event] attribute on variant `A`",
        ],
    );
}

#[test]
fn values_must_be_paths() {
    assert_eq!(
        messages(quote! {
            enum E {
                #[domain_event(contract = 1)]
                A(A),
                #[domain_event(contract = "not a path")]
                B(B),
                #[domain_event(map = |e, out| Ok(()))]
                C(C),
                #[domain_event(contract)]
                D(D),
                #[domain_event(map(f))]
                F(F),
                #[domain_event(local = true)]
                G,
            }
        }),
        [
            "`contract` must be the path of an integration event type, e.g. `contract = \
             OrderPlacedV1`",
            "`contract` must be the path of an integration event type, e.g. `contract = \
             OrderPlacedV1`",
            "`map` must be the path of a mapping function, e.g. `map = \
             crate::mapping::map_order_shipped`; a closure or other expression is not accepted",
            "expected a value, e.g. `contract = OrderPlacedV1`",
            "expected a value, e.g. `map = crate::mapping::map_order_shipped`",
            "`local` takes no value: write `#[domain_event(local)]`",
        ]
    );
}

#[test]
fn paths_may_be_string_literals_or_macro_groups() {
    for (contract, map) in [
        (quote!("a::AV1"), quote!("a::map_b")),
        (quote!(a::AV1), quote!(a::map_b)),
        (
            // What `macro_rules!` `$contract:path` / `$map:expr` fragments look like.
            proc_macro2::TokenTree::Group(proc_macro2::Group::new(
                proc_macro2::Delimiter::None,
                quote!(a::AV1),
            ))
            .into(),
            proc_macro2::TokenTree::Group(proc_macro2::Group::new(
                proc_macro2::Delimiter::None,
                quote!(a::map_b),
            ))
            .into(),
        ),
    ] {
        let input: DeriveInput = syn::parse_quote! {
            enum E {
                #[domain_event(contract = #contract)]
                A(A),
                #[domain_event(map = #map)]
                B { id: u64 },
            }
        };
        let tokens = expand(&input)
            .unwrap_or_else(|e| panic!("{contract}: {e}"))
            .to_string();
        assert!(
            tokens.contains("< a :: AV1 as :: core :: convert :: From < & A >> :: from"),
            "{tokens}"
        );
        assert!(tokens.contains("a :: map_b (self , out)"), "{tokens}");
    }
}

#[test]
fn shapes_and_generics() {
    for (input, start) in [
        (
            quote!(
                struct S {
                    id: u64,
                }
            ),
            "`S` is a struct: DomainEvent is derived on the domain event enum",
        ),
        (
            quote!(
                union U {
                    a: u64,
                }
            ),
            "`U` is a union: DomainEvent is derived on the domain event enum",
        ),
    ] {
        assert_messages(input, &[start]);
    }
    assert_messages(
        quote! {
            enum E<'a, T, 'b> {
                #[domain_event(local)]
                A(&'a T, &'b str),
            }
        },
        &[
            "`E` has the lifetime parameter `'a`: a domain event is `'static`",
            "`E` has the lifetime parameter `'b`",
        ],
    );
}

#[test]
fn misplaced_attributes() {
    assert_messages(
        quote! {
            #[domain_event(local)]
            enum E {
                #[domain_event(local)]
                A {
                    #[domain_event(local)]
                    id: u64,
                },
            }
        },
        &[
            "#[domain_event(...)] belongs on each variant of the enum, not on the enum",
            "#[domain_event(...)] belongs on each variant of the enum, not on a field",
        ],
    );
}

#[test]
fn reports_every_error_at_once() {
    assert_messages(
        quote! {
            #[domain_event(local)]
            enum E<'a> {
                A(&'a str),
                #[domain_event(contract = BV1)]
                B { id: u64 },
                #[domain_event(lcoal)]
                C,
            }
        },
        &[
            "`E` has the lifetime parameter `'a`",
            "#[domain_event(...)] belongs on each variant of the enum, not on the enum",
            "variant `A` is neither mapped nor local",
            "`contract = …` needs a newtype variant",
            "Unknown field: `lcoal`. Did you mean `local`?",
        ],
    );
}

#[test]
fn stub_only_without_unions_and_lifetimes() {
    let stub_of = |input: TokenStream| {
        let input: DeriveInput = syn::parse2(input).expect("derive input");
        derive(&input)
            .to_string()
            .contains(":: outbox_kernel :: mapping :: DomainEvent for")
    };
    assert!(stub_of(quote!(
        struct S;
    )));
    assert!(stub_of(quote!(
        enum E<T> {
            A(T),
        }
    )));
    assert!(!stub_of(quote!(
        enum E<'a> {
            A(&'a str),
        }
    )));
    assert!(!stub_of(quote!(
        union U {
            a: u8,
        }
    )));
}

#[test]
fn snapshot_crate_override() {
    assert_snapshot(
        "crate_override",
        quote! {
            #[domain_event(crate = renamed_kernel)]
            pub enum OrderingEvent {
                #[domain_event(contract = OrderPlacedV1)]
                OrderPlaced(OrderPlaced),
                #[domain_event(local)]
                PricesRecalculated,
            }
        },
    );
}

#[test]
fn crate_override_is_one_path_on_the_enum() {
    let not_a_path = "`crate` must be the path of the `outbox-kernel` crate as this crate names it, \
                      e.g. `crate = \"renamed_kernel\"` for a dependency renamed in Cargo.toml";
    for (attrs, expected) in [
        (
            quote!(#[domain_event(crate = renamed_kernel, crate = other)]),
            "Duplicate field `crate`",
        ),
        (
            quote!(#[domain_event(crate = renamed_kernel)] #[domain_event(crate = other)]),
            "duplicate `crate`: write it once, in one #[domain_event(crate = …)] on the enum",
        ),
        (quote!(#[domain_event(crate = 5)]), not_a_path),
        (quote!(#[domain_event(crate = "not a path")]), not_a_path),
        (
            quote!(#[domain_event(crate)]),
            "expected a value, e.g. `crate = \"renamed_kernel\"`",
        ),
        (
            quote!(#[domain_event(crate = renamed_kernel, local)]),
            "Unknown field: `local`. Available values: `crate`",
        ),
        // Without `crate`, an attribute on the enum is still one that belongs on a variant.
        (
            quote!(#[domain_event(crate = renamed_kernel)] #[domain_event(local)]),
            "#[domain_event(...)] belongs on each variant of the enum, not on the enum",
        ),
    ] {
        let messages = messages(quote! {
            #attrs
            enum E {
                #[domain_event(local)]
                A,
            }
        });
        assert_eq!(messages, [expected], "{attrs}");
    }
}

#[test]
fn the_stub_names_the_overridden_crate() {
    let input: DeriveInput = syn::parse_quote! {
        #[domain_event(crate = "renamed_kernel")]
        enum E {
            Forgotten,
        }
    };
    let output = derive(&input).to_string();
    assert!(
        output.contains("impl renamed_kernel :: mapping :: DomainEvent for E"),
        "{output}"
    );
    assert!(!output.contains("outbox_kernel"), "{output}");
}
