//! Expansion snapshots (see [`crate::snapshot`]; `UPDATE_SNAPSHOTS=1` rewrites them) and the
//! attribute's diagnostics.

use proc_macro2::TokenStream;
use quote::quote;
use syn::ItemFn;

use super::{attribute, expand};
use crate::snapshot::{assert_rendered, render};

/// Compares the expansion of `#[inbox_handler(args)] item` with the snapshot
/// `inbox_handler_<name>`.
fn assert_snapshot(name: &str, args: TokenStream, item: TokenStream) {
    assert_rendered(
        &format!("inbox_handler_{name}"),
        &render(attribute(args, item)),
    );
}

#[test]
fn snapshot_basic() {
    assert_snapshot(
        "basic",
        quote!(consumer = "inventory.reserve-stock"),
        quote! {
            /// Reserves stock.
            async fn reserve_stock(
                uow: &UnitOfWork<InventoryEvent>,
                event: OrderPlacedV1,
            ) -> Result<(), StockError> {
                uow.raise(InventoryEvent::Reserved);
                Ok(())
            }
        },
    );
}

#[test]
fn snapshot_envelope_mapper_upcast() {
    assert_snapshot(
        "envelope_mapper_upcast",
        quote! {
            consumer = "inventory.reserve-stock",
            mapper = &InventoryContracts,
            upcast(from = OrderPlacedV1),
            upcast(from = legacy::OrderPlacedV0),
        },
        quote! {
            pub(crate) async fn r#reserve_stock_v2<'a>(
                uow: &'a outbox_seaorm::UnitOfWork<InventoryEvent>,
                OrderPlacedV2 { order_id, .. }: OrderPlacedV2,
                envelope: &Envelope,
            ) -> ::core::result::Result<(), anyhow::Error> {
                Ok(())
            }
        },
    );
}

#[test]
fn snapshot_errors_keep_the_function() {
    assert_snapshot(
        "errors_keep_the_function",
        quote!(consumer = "Inventory_Reserve"),
        quote! {
            fn reserve_stock(uow: &UnitOfWork, event: OrderPlacedV1) -> Result<(), StockError> {
                Ok(())
            }
        },
    );
}

fn messages(args: TokenStream, item: TokenStream) -> Vec<String> {
    let function: ItemFn = syn::parse2(item).expect("test input is a function");
    match expand(args, &function) {
        Ok(tokens) => panic!("expected errors, got:\n{}", render(tokens)),
        Err(error) => error.into_iter().map(|e| e.to_string()).collect(),
    }
}

fn assert_messages(args: TokenStream, item: TokenStream, expected: &[&str]) {
    let messages = messages(args, item);
    assert_eq!(messages.len(), expected.len(), "{messages:#?}");
    for (message, start) in messages.iter().zip(expected) {
        assert!(
            message.starts_with(start),
            "{message:?} should start with {start:?}"
        );
    }
}

fn assert_ok(args: TokenStream, item: TokenStream) -> String {
    let function: ItemFn = syn::parse2(item).expect("test input is a function");
    match expand(args, &function) {
        Ok(tokens) => render(tokens),
        Err(error) => panic!(
            "expected an expansion, got {:#?}",
            error.into_iter().map(|e| e.to_string()).collect::<Vec<_>>()
        ),
    }
}

#[test]
fn accepted_signatures() {
    let args = quote!(consumer = "inventory.reserve-stock");
    for item in [
        quote!(
            async fn a(uow: &UnitOfWork, event: V1) -> Result<(), E> {
                Ok(())
            }
        ),
        quote!(
            async fn a<'u>(
                uow: &'u UnitOfWork<Ev>,
                _: V1,
                _: &'u Envelope,
            ) -> std::result::Result<(), E> {
                Ok(())
            }
        ),
        quote!(
            pub async fn a(
                _: &UnitOfWork,
                V1 { id }: V1,
            ) -> Result<(), Box<dyn Error + Send + Sync>> {
                Ok(())
            }
        ),
        quote!(
            async fn a(uow: &(UnitOfWork), event: (V1)) -> (Result<(), E>) {
                Ok(())
            }
        ),
    ] {
        assert_ok(args.clone(), item);
    }
}

/// Whether the first argument is a unit of work is required in one place (`event_type`): a
/// second `UnitOfWorkArg` bound or projection would report a wrong first argument twice.
#[test]
fn unit_of_work_checked_once() {
    for item in [
        quote!(
            async fn a(uow: &UnitOfWork<Ev>, event: V1) -> Result<(), E> {
                Ok(())
            }
        ),
        quote!(
            async fn a<'u>(uow: &'u InventoryUow, event: V1, _: &'u Envelope) -> Result<(), E> {
                Ok(())
            }
        ),
    ] {
        let expanded = assert_ok(quote!(consumer = "a.b", mapper = &M), item);
        assert_eq!(expanded.matches("UnitOfWorkArg").count(), 1, "{expanded}");
        assert_eq!(expanded.matches("HandlerEvent").count(), 1, "{expanded}");
    }
}

#[test]
fn not_async() {
    assert_messages(
        quote!(consumer = "inventory.reserve-stock"),
        quote!(
            fn a(uow: &UnitOfWork, event: V1) -> Result<(), E> {
                Ok(())
            }
        ),
        &[
            "an inbox handler must be an `async fn`: `async fn(uow: &UnitOfWork<E>, event: \
           Contract[, envelope: &Envelope]) -> Result<(), Error>`",
        ],
    );
}

#[test]
fn unsafe_generic_method_variadic() {
    assert_messages(
        quote!(consumer = "inventory.reserve-stock"),
        quote!(
            async unsafe fn a<T, const N: usize>(uow: &UnitOfWork, event: V1) -> Result<(), E>
            where
                T: Clone,
            {
                Ok(())
            }
        ),
        &[
            "an inbox handler cannot be `unsafe`",
            "an inbox handler cannot be generic",
            "an inbox handler cannot be generic",
            "an inbox handler cannot have a `where` clause",
        ],
    );
    assert_messages(
        quote!(consumer = "inventory.reserve-stock"),
        quote!(
            async fn a(&self, event: V1) -> Result<(), E> {
                Ok(())
            }
        ),
        &["an inbox handler is a free function, not a method: it cannot take `self`"],
    );
    assert_messages(
        quote!(consumer = "inventory.reserve-stock"),
        quote!(
            async fn a(uow: &UnitOfWork, event: V1, ...) -> Result<(), E> {
                Ok(())
            }
        ),
        &["an inbox handler cannot be variadic"],
    );
}

#[test]
fn arity() {
    for item in [
        quote!(
            async fn a() -> Result<(), E> {
                Ok(())
            }
        ),
        quote!(
            async fn a(uow: &UnitOfWork) -> Result<(), E> {
                Ok(())
            }
        ),
        quote!(
            async fn a(uow: &UnitOfWork, e: V1, env: &Envelope, x: u8) -> Result<(), E> {
                Ok(())
            }
        ),
    ] {
        let found = messages(quote!(consumer = "a.b"), item);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0].starts_with("an inbox handler takes 2 or 3 arguments, found "),
            "{found:#?}"
        );
    }
}

#[test]
fn argument_order_and_references() {
    let args = quote!(consumer = "inventory.reserve-stock");
    let wrong_order = "arguments are in the wrong order: expected (uow, event[, envelope])";
    for item in [
        quote!(
            async fn a(event: V1, uow: &UnitOfWork) -> Result<(), E> {
                Ok(())
            }
        ),
        quote!(
            async fn a(event: V1, uow: &UnitOfWork, envelope: &Envelope) -> Result<(), E> {
                Ok(())
            }
        ),
        quote!(
            async fn a(uow: &UnitOfWork, envelope: &Envelope, event: V1) -> Result<(), E> {
                Ok(())
            }
        ),
    ] {
        assert_messages(args.clone(), item, &[wrong_order]);
    }
    assert_messages(
        args.clone(),
        quote!(
            async fn a(uow: &UnitOfWork, event: &V1) -> Result<(), E> {
                Ok(())
            }
        ),
        &["take the contract by value: `event: V1`"],
    );
    assert_messages(
        args.clone(),
        quote!(
            async fn a(uow: UnitOfWork, event: V1) -> Result<(), E> {
                Ok(())
            }
        ),
        &["the first argument must be the unit of work, by reference"],
    );
    assert_messages(
        args.clone(),
        quote!(
            async fn a(uow: &mut UnitOfWork, event: V1, envelope: &mut Envelope) -> Result<(), E> {
                Ok(())
            }
        ),
        &[
            "take the unit of work by shared reference",
            "take the envelope by shared reference",
        ],
    );
    assert_messages(
        args.clone(),
        quote!(
            async fn a(uow: &UnitOfWork, event: V1, envelope: Envelope) -> Result<(), E> {
                Ok(())
            }
        ),
        &["the third argument, if any, must be the envelope, by reference"],
    );
    assert_messages(
        args,
        quote!(
            async fn a(uow: &impl Sized, event: impl IntegrationEvent) -> Result<(), E> {
                Ok(())
            }
        ),
        &[
            "the unit of work must be a concrete type, not `impl Trait`",
            "the contract must be a concrete type, not `impl Trait`",
        ],
    );
}

#[test]
fn return_type() {
    let args = quote!(consumer = "inventory.reserve-stock");
    assert_messages(
        args.clone(),
        quote!(
            async fn a(uow: &UnitOfWork, event: V1) {}
        ),
        &["an inbox handler returns `Result<(), Error>`: add the return type"],
    );
    assert_messages(
        args.clone(),
        quote!(
            async fn a(uow: &UnitOfWork, event: V1) -> anyhow::Result<()> {
                Ok(())
            }
        ),
        &[
            "an inbox handler returns `Result<(), Error>`, found `anyhow::Result<()>`; write \
           the error type out",
        ],
    );
    assert_messages(
        args,
        quote!(
            async fn a(uow: &UnitOfWork, event: V1) -> Result<u8, E> {
                Ok(1)
            }
        ),
        &["an inbox handler returns `Result<(), Error>`: its success value is `()`"],
    );
}

#[test]
fn consumer_name() {
    let item = quote!(
        async fn a(uow: &UnitOfWork, event: V1) -> Result<(), E> {
            Ok(())
        }
    );
    assert_messages(
        quote!(),
        item.clone(),
        &["missing `consumer = \"inventory.reserve-stock\"`"],
    );
    assert_messages(
        quote!(mapper = &M),
        item.clone(),
        &["missing `consumer = \"inventory.reserve-stock\"`"],
    );
    assert_messages(
        quote!(consumer = "Inventory_Reserve"),
        item.clone(),
        &[
            "invalid consumer name `Inventory_Reserve`: segment `Inventory_Reserve` must start \
           with a lowercase ASCII letter; a consumer name is one or more lowercase kebab-case \
           segments",
        ],
    );
    assert_messages(
        quote!(consumer = ""),
        item.clone(),
        &["invalid consumer name ``: the consumer name is empty"],
    );
    assert_messages(
        quote!(consumer = CONSUMER),
        item.clone(),
        &["`consumer` must be a string literal"],
    );
    assert_messages(
        quote!(consumer = pub(crate)),
        item.clone(),
        &["`consumer` must be a string literal"],
    );
    assert_messages(
        quote!(consumer),
        item.clone(),
        &["expected a value, e.g. `consumer = \"inventory.reserve-stock\"`"],
    );
    assert_ok(quote!(consumer = "inventory.reserve-stock.v2-retry"), item);
}

#[test]
fn unknown_and_duplicate_keys() {
    let item = quote!(
        async fn a(uow: &UnitOfWork, event: V1) -> Result<(), E> {
            Ok(())
        }
    );
    assert_messages(
        quote!(consumer = "a.b", maper = &M),
        item.clone(),
        &["Unknown field: `maper`. Did you mean `mapper`?"],
    );
    assert_messages(
        quote!(consumer = "a.b", consumer = "a.c"),
        item.clone(),
        &["Duplicate field `consumer`"],
    );
    assert_messages(
        quote!(consumer = "a.b", upcast(form = V0)),
        item.clone(),
        &["Unknown field: `form`. Did you mean `from`?"],
    );
    assert_messages(
        quote!(consumer = "a.b", upcast, upcast = V0, upcast()),
        item.clone(),
        &[
            "`upcast` needs the older contract: `upcast(from = OrderPlacedV1)`",
            "write the older contract in a list: `upcast(from = OrderPlacedV1)`",
            "missing `from = …`: the older contract, e.g. `upcast(from = OrderPlacedV1)`",
        ],
    );
    assert_messages(
        quote!(consumer = "a.b", mapper),
        item,
        &["expected a value, e.g. `mapper = &InventoryContracts`"],
    );
}

#[test]
fn upcasts() {
    let item = quote!(
        async fn a(uow: &UnitOfWork, event: V2) -> Result<(), E> {
            Ok(())
        }
    );
    let expanded = assert_ok(
        quote!(consumer = "a.b", upcast(from = V1), upcast(from = Wrapper<V0>), upcast(from = "V00")),
        item.clone(),
    );
    let compact: String = expanded.split_whitespace().collect();
    for from in ["V1", "Wrapper<V0>", "V00"] {
        assert!(
            compact.contains(&format!("HandlerRegistration::upcast::<a,{from}>()")),
            "{from} in:\n{expanded}"
        );
    }
    assert_messages(
        quote!(
            consumer = "a.b",
            upcast(from = V2),
            upcast(from = V1),
            upcast(from = V1)
        ),
        item,
        &[
            "`V2` is the handler's own contract",
            "duplicate `upcast(from = V1)`",
        ],
    );
}

#[test]
fn several_errors_at_once() {
    assert_messages(
        quote!(
            consumer = "Inventory",
            mapper = &M,
            mapper = &N,
            retries = 3
        ),
        quote!(
            fn a(event: &V1) {}
        ),
        &[
            "invalid consumer name `Inventory`",
            "Duplicate field `mapper`",
            "Unknown field: `retries`",
            "an inbox handler must be an `async fn`",
            "an inbox handler takes 2 or 3 arguments, found 1",
            "an inbox handler returns `Result<(), Error>`: add the return type",
        ],
    );
}

#[test]
fn not_a_function() {
    let output = attribute(
        quote!(consumer = "a.b"),
        quote!(
            struct S;
        ),
    )
    .to_string();
    assert!(
        output.contains("#[inbox_handler] goes on an `async fn`"),
        "{output}"
    );
    assert!(output.ends_with("struct S ;"), "{output}");
}

#[test]
fn type_text() {
    for (ty, text) in [
        (quote!(std::io::Result<()>), "std::io::Result<()>"),
        (quote!(&'a mut Vec<u8>), "&'a mut Vec<u8>"),
        (
            quote!(<Vec<u8> as IntoIterator>::Item),
            "<Vec<u8> as IntoIterator>::Item",
        ),
        (quote!(HashMap<K, [u8; 4]>), "HashMap<K, [u8; 4]>"),
        (
            quote!(Box<dyn Error + Send + 'static>),
            "Box<dyn Error + Send + 'static>",
        ),
        (
            quote!(::core::result::Result<(), E>),
            "::core::result::Result<(), E>",
        ),
    ] {
        let ty: syn::Type = syn::parse2(ty).expect("a type");
        assert_eq!(super::signature::type_text(&ty), text);
    }
}

#[test]
fn snapshot_crate_override() {
    assert_snapshot(
        "crate_override",
        quote!(
            consumer = "inventory.reserve-stock",
            crate = "renamed_seaorm"
        ),
        quote! {
            async fn reserve_stock(
                uow: &UnitOfWork,
                event: OrderPlacedV1,
                envelope: &Envelope,
            ) -> Result<(), StockError> {
                Ok(())
            }
        },
    );
}

#[test]
fn crate_override_must_be_one_path() {
    let item = quote! {
        async fn reserve_stock(uow: &UnitOfWork, event: OrderPlacedV1) -> Result<(), E> {
            Ok(())
        }
    };
    let not_a_path = "`crate` must be the path of the `outbox-seaorm` crate as this crate names \
                      it, e.g. `crate = \"renamed_seaorm\"` for a dependency renamed in Cargo.toml";
    assert_messages(
        quote!(consumer = "inventory.reserve-stock", crate = a, crate = b),
        item.clone(),
        &["Duplicate field `crate`"],
    );
    for args in [
        quote!(consumer = "inventory.reserve-stock", crate = 1),
        quote!(consumer = "inventory.reserve-stock", crate = "not a path"),
        quote!(consumer = "inventory.reserve-stock", crate = pub(crate)),
    ] {
        assert_messages(args, item.clone(), &[not_a_path]);
    }
    assert_messages(
        quote!(consumer = "inventory.reserve-stock", crate),
        item,
        &["expected a value, e.g. `crate = \"renamed_seaorm\"`"],
    );
}
