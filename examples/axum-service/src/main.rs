//! An axum service: `POST /orders` writes the order row and its `OrderPlacedV1` event through
//! one unit of work, in one transaction; a refused request (4xx) writes neither. The event
//! waits in the outbox table for a relay (book: The polling relay).
//!
//! ```text
//! cargo run -p example-axum-service  # SQLite in memory, on LISTEN (default 127.0.0.1:3000)
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres cargo run -p example-axum-service
//! curl -i 127.0.0.1:3000/orders -H 'content-type: application/json' \
//!     -d '{"order_id": "order-42", "books": ["dune"]}'
//! ```
#![allow(clippy::print_stdout)]

use std::time::Duration;

use axum::extract::{Json, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::{Router, routing::post};
use outbox::mapping::DerivedMapping;
use outbox::{DomainEvent, IntegrationEvent, Outbox, Raise, schema};
use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection};
use sea_orm::{EntityTrait, Schema, Set, SqlErr};
use serde::{Deserialize, Serialize};

/// The contract other services consume.
#[derive(IntegrationEvent, Serialize, Deserialize, schemars::JsonSchema)]
#[integration_event(name = "shop.ordering.order-placed.v1", key = order_id)]
struct OrderPlacedV1 {
    order_id: String,
    books: Vec<String>,
}

/// What the handler raises; mapped to the contract at commit.
#[derive(DomainEvent)]
enum OrderingEvent {
    #[domain_event(contract = OrderPlacedV1)]
    OrderPlaced(NewOrder),
}

/// The body of `POST /orders`.
#[derive(Deserialize)]
struct NewOrder {
    order_id: String,
    books: Vec<String>,
}

impl From<&NewOrder> for OrderPlacedV1 {
    fn from(order: &NewOrder) -> Self {
        let (order_id, books) = (order.order_id.clone(), order.books.clone());
        Self { order_id, books }
    }
}

/// The business table.
mod orders {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "orders")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

type Refusal = (StatusCode, String);

/// `201` with the event's message id; `409` (a known order) and `422` write nothing.
async fn place_order(
    State((db, outbox)): State<(DatabaseConnection, Outbox)>,
    Json(order): Json<NewOrder>,
) -> Result<impl IntoResponse, Refusal> {
    if order.order_id.is_empty() || order.books.is_empty() {
        return Err((StatusCode::UNPROCESSABLE_ENTITY, "no id or no book".into()));
    }
    let row = orders::ActiveModel {
        id: Set(order.order_id.clone()),
    };
    let uow = outbox
        .begin(&db, &DerivedMapping)
        .await
        .map_err(unavailable)?;
    uow.raise(OrderingEvent::OrderPlaced(order));
    // An error returns early and drops `uow`: rolled back, the raised event is never written.
    orders::Entity::insert(row)
        .exec(&uow)
        .await
        .map_err(|error| match error.sql_err() {
            Some(SqlErr::UniqueConstraintViolation(_)) => (StatusCode::CONFLICT, error.to_string()),
            _ => unavailable(error),
        })?;
    // One COMMIT: the order row and its outbox row, or neither.
    let committed = uow.commit().await.map_err(unavailable)?;
    Ok((StatusCode::CREATED, Json(committed.message_ids)))
}

fn unavailable(error: impl std::fmt::Display) -> Refusal {
    (StatusCode::SERVICE_UNAVAILABLE, error.to_string())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| "sqlite::memory:".into());
    let mut options = ConnectOptions::new(url.as_str());
    if url.contains(":memory:") {
        // In-memory SQLite lives on its only connection: keep exactly one.
        let forever = None::<Duration>;
        options.max_connections(1).min_connections(1);
        options.idle_timeout(forever).max_lifetime(forever);
    }
    let db = Database::connect(options).await?;
    let outbox = Outbox::default();
    schema::install(&db, &outbox).await?;
    let mut orders_table =
        Schema::new(db.get_database_backend()).create_table_from_entity(orders::Entity);
    db.execute(orders_table.if_not_exists()).await?;

    let app = Router::new().route("/orders", post(place_order));
    let app = app.with_state((db, outbox));
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(listen).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
