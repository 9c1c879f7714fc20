//! The Bookstore demo.
//!
//! Today it walks through the contracts layer: the registered contracts, an `OrderPlacedV1`
//! wrapped in an envelope, its CloudEvents binary-mode headers, and the typed errors a
//! consumer gets for a wrong version, a missing field and an oversized payload. The outbox
//! scenarios of the articles join it as the unit of work, relay and inbox land.
#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use bookstore_contracts::{MoneyV1, OrderCancelledV1, OrderPlacedV1, OrderedBookV1};
use outbox_core::cloudevents;
use outbox_core::{ContractRegistry, Envelope, EnvelopeConfig, IntegrationEvent};
use uuid::Uuid;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bookstore demo failed: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    println!("== Contracts registered in this binary ==");
    let registry = ContractRegistry::collect()?;
    for contract in registry.contracts() {
        println!(
            "  {}  key {}.{}  ({})",
            contract.event_type, contract.aggregate_type, contract.key_field, contract.rust_type
        );
    }

    println!("\n== An order placed, in its envelope ==");
    let placed = OrderPlacedV1 {
        order_id: Uuid::now_v7(),
        checkout_id: Uuid::now_v7(),
        customer_id: Uuid::now_v7(),
        books: vec![OrderedBookV1 {
            book_id: "dune".into(),
            quantity: 2,
            unit_price: MoneyV1 {
                amount: "12.50".into(),
                currency: "EUR".into(),
            },
        }],
    };
    let envelope = Envelope::from_event(&placed)?.with_correlation_id(placed.checkout_id);
    println!("  message_id  {}", envelope.message_id);
    println!(
        "  event_type  {} (version {})",
        envelope.event_type, envelope.version
    );
    println!(
        "  aggregate   {} {}",
        envelope.aggregate_type, envelope.aggregate_id
    );
    println!("  payload     {}", envelope.payload);

    println!("\n== The same envelope as CloudEvents 1.0 binary-mode headers ==");
    let message = cloudevents::to_binary(&envelope)?;
    for (name, value) in &message.headers {
        println!("  {name}: {value}");
    }
    let received = message
        .headers
        .iter()
        .map(|(name, value)| (name, value.as_bytes()));
    let back = cloudevents::from_binary(received, &message.body, &EnvelopeConfig::default())?;
    let decoded: OrderPlacedV1 = back.decode()?;
    println!(
        "  decoded back: same envelope = {}, same event = {}",
        back == envelope,
        decoded == placed
    );

    println!("\n== What a consumer gets for bad input (typed errors, nothing lost) ==");
    match envelope.decode::<OrderCancelledV1>() {
        Err(error) => println!("  decode as {}: {error}", OrderCancelledV1::EVENT_TYPE),
        Ok(_) => return Err("an order-placed envelope decoded as order-cancelled".into()),
    }
    let mut broken = envelope.clone();
    if let Some(book) = broken.payload["books"][0].as_object_mut() {
        book.remove("quantity");
    }
    match broken.decode::<OrderPlacedV1>() {
        Err(error) => println!("  missing field: {error}"),
        Ok(_) => return Err("a payload without quantity decoded".into()),
    }
    let tight = EnvelopeConfig::default().with_max_payload_bytes(64);
    match tight.encode(&placed) {
        Err(error) => println!("  oversized: {error}"),
        Ok(_) => return Err("an oversized payload was accepted".into()),
    }
    Ok(())
}
