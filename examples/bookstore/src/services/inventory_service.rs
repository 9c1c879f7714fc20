//! The Inventory service: the `inventory.reserve-stock` consumer reading the `BOOKSTORE`
//! JetStream stream into its inbox on MariaDB (each message applied once), and
//! `GET /stock/{book}` to see what it reserved.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use outbox_brokers::nats::{self, NatsConsumerRunner, NatsStream};
use outbox_seaorm::{Outbox, schema};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, Schema};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::{STREAM, SUBJECTS};
use crate::DemoError;
use crate::inventory::{reserve_stock_consumer, stock_book, stock_items, stock_of};

/// The books Inventory stocks on first start: id, title, copies.
pub const CATALOGUE: [(&str, &str, u32); 3] = [
    ("dune", "Dune", 1000),
    ("neuromancer", "Neuromancer", 1000),
    ("solaris", "Solaris", 1000),
];

/// Creates the stock and inbox tables when missing and stocks the catalogue once.
///
/// # Errors
/// The database's error.
pub async fn set_up(db: &DatabaseConnection, outbox: &Outbox) -> Result<(), DbErr> {
    let schema_of = Schema::new(db.get_database_backend());
    db.execute(
        schema_of
            .create_table_from_entity(stock_items::Entity)
            .if_not_exists(),
    )
    .await?;
    schema::install(db, outbox).await?;
    for (book, title, copies) in CATALOGUE {
        if stock_of(db, book).await?.is_none() {
            stock_book(db, book, title, copies).await?;
        }
    }
    Ok(())
}

/// `GET /stock/{book}`.
#[derive(Debug, Serialize)]
pub struct Stock {
    /// The book.
    pub book_id: String,
    /// Copies on the shelf.
    pub on_hand: u32,
    /// Copies reserved for placed orders.
    pub reserved: u32,
}

async fn stock(State(db): State<DatabaseConnection>, Path(book): Path<String>) -> Response {
    match stock_of(&db, &book).await {
        Ok(Some(item)) => Json(Stock {
            book_id: item.book_id,
            on_hand: item.on_hand,
            reserved: item.reserved,
        })
        .into_response(),
        Ok(None) => StatusCode::NOT_FOUND.into_response(),
        Err(error) => (StatusCode::SERVICE_UNAVAILABLE, error.to_string()).into_response(),
    }
}

/// Consumes the stream into the inbox and serves `GET /stock/{book}` on `listen` until
/// `shutdown`.
///
/// # Errors
/// [`DemoError`]: NATS, the stream or the address.
pub async fn run(
    db: DatabaseConnection,
    outbox: Outbox,
    nats_url: &str,
    listen: SocketAddr,
    shutdown: CancellationToken,
) -> Result<(), DemoError> {
    let client = nats::connect(nats_url).await.map_err(DemoError::broker)?;
    NatsStream::new(STREAM, [SUBJECTS])
        .ensure(&client)
        .await
        .map_err(DemoError::broker)?;
    let consumer = reserve_stock_consumer(&db, &outbox).map_err(DemoError::broker)?;
    let runner = NatsConsumerRunner::builder(client, consumer, STREAM)
        .fetch_wait(Duration::from_millis(500))
        .build()
        .map_err(DemoError::broker)?;
    let running = tokio::spawn(runner.run(shutdown.clone()));
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|error| DemoError::Broker(format!("cannot listen on {listen}: {error}")))?;
    tracing::info!(%listen, stream = STREAM, "inventory consuming");
    let app = Router::new()
        .route("/stock/{book}", get(stock))
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(db);
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await;
    let report = running.await;
    tracing::info!(?report, "inventory stopped");
    served.map_err(|error| DemoError::Broker(format!("serving {listen}: {error}")))
}
