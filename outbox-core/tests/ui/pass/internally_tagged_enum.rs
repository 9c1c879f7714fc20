use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "kebab-case")]
#[integration_event(name = "bookstore.shipping.shipment-changed.v3", key = shipment_id)]
pub enum ShipmentChangedV3 {
    Dispatched {
        shipment_id: String,
        carrier: String,
    },
    Delivered {
        signed_by: String,
        shipment_id: String,
    },
}

fn main() {
    assert_eq!(
        ShipmentChangedV3::EVENT_TYPE,
        "bookstore.shipping.shipment-changed.v3"
    );
    assert_eq!(
        ShipmentChangedV3::NAME,
        "bookstore.shipping.shipment-changed"
    );
    assert_eq!(ShipmentChangedV3::VERSION, 3);
    assert_eq!(ShipmentChangedV3::AGGREGATE_TYPE, "shipment");
    assert_eq!(ShipmentChangedV3::KEY_FIELD, "shipment_id");
    let dispatched = ShipmentChangedV3::Dispatched {
        shipment_id: "s-1".to_owned(),
        carrier: "post".to_owned(),
    };
    let delivered = ShipmentChangedV3::Delivered {
        signed_by: "Ann".to_owned(),
        shipment_id: "s-2".to_owned(),
    };
    assert_eq!(dispatched.aggregate_id(), "s-1");
    assert_eq!(delivered.aggregate_id(), "s-2");
}
