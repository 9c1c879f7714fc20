//! rabbitmq adapter (in progress).
