//! The Ordering service's HTTP API: `POST /orders` places an order through a unit of work
//! (the order rows and the outbox row of its `OrderPlacedV1` commit together);
//! `GET /healthz`.
//!
//! ```text
//! POST /orders  {"checkout_id": "…", "customer_id": "…", "currency": "EUR",
//!                "lines": [{"book_id": "dune", "quantity": 2, "unit_price_cents": 1250}]}
//! 201 {"order_id": "…"}   409 the checkout already placed an order   422 refused
//! ```

use std::net::SocketAddr;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use outbox_seaorm::{Outbox, schema};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, Schema};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::ordering::entity::{order_lines, orders};
use crate::ordering::{OrderLine, PlaceOrder, PlaceOrderError, place_order};

/// One line of `POST /orders`.
#[derive(Debug, Deserialize)]
pub struct LineRequest {
    /// The book.
    pub book_id: String,
    /// Copies.
    pub quantity: u32,
    /// Price of one copy in cents.
    pub unit_price_cents: i64,
}

/// `POST /orders`.
#[derive(Debug, Deserialize)]
pub struct OrderRequest {
    /// The checkout (a second submission of it places nothing).
    pub checkout_id: Uuid,
    /// The customer.
    pub customer_id: Uuid,
    /// ISO 4217 currency.
    pub currency: String,
    /// What is ordered.
    pub lines: Vec<LineRequest>,
}

/// `201 Created`.
#[derive(Debug, Serialize)]
pub struct OrderPlaced {
    /// The new order.
    pub order_id: Uuid,
}

#[derive(Debug, Serialize)]
struct Refusal {
    error: String,
}

/// Creates the Ordering tables and the outbox tables when they are missing.
///
/// # Errors
/// The database's error.
pub async fn set_up(db: &DatabaseConnection, outbox: &Outbox) -> Result<(), DbErr> {
    let schema_of = Schema::new(db.get_database_backend());
    db.execute(
        schema_of
            .create_table_from_entity(orders::Entity)
            .if_not_exists(),
    )
    .await?;
    db.execute(
        schema_of
            .create_table_from_entity(order_lines::Entity)
            .if_not_exists(),
    )
    .await?;
    schema::install(db, outbox).await
}

#[derive(Clone)]
struct Api {
    db: DatabaseConnection,
    outbox: Outbox,
}

/// The API's routes.
pub fn router(db: DatabaseConnection, outbox: Outbox) -> Router {
    Router::new()
        .route("/orders", post(place))
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(Api { db, outbox })
}

async fn place(State(api): State<Api>, Json(request): Json<OrderRequest>) -> Response {
    let command = PlaceOrder {
        checkout_id: request.checkout_id,
        customer_id: request.customer_id,
        currency: request.currency,
        lines: request
            .lines
            .into_iter()
            .map(|line| OrderLine {
                book_id: line.book_id,
                quantity: line.quantity,
                unit_price_cents: line.unit_price_cents,
            })
            .collect(),
    };
    match place_order(&api.db, &api.outbox, command).await {
        Ok(order) => (
            StatusCode::CREATED,
            Json(OrderPlaced { order_id: order.id }),
        )
            .into_response(),
        Err(error) => {
            let status = match &error {
                PlaceOrderError::DuplicateCheckout { .. } => StatusCode::CONFLICT,
                PlaceOrderError::Refused(_) => StatusCode::UNPROCESSABLE_ENTITY,
                PlaceOrderError::UnknownOrder(_) => StatusCode::NOT_FOUND,
                PlaceOrderError::Database(_) | PlaceOrderError::UnitOfWork(_) => {
                    tracing::warn!(%error, "placing an order failed");
                    StatusCode::SERVICE_UNAVAILABLE
                }
            };
            (
                status,
                Json(Refusal {
                    error: error.to_string(),
                }),
            )
                .into_response()
        }
    }
}

/// Serves the API on `listen` until `shutdown`.
///
/// # Errors
/// The address cannot be bound, or serving failed.
pub async fn serve(
    db: DatabaseConnection,
    outbox: Outbox,
    listen: SocketAddr,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    tracing::info!(%listen, "ordering API listening");
    axum::serve(listener, router(db, outbox))
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}
