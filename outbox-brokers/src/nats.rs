//! nats adapter (in progress).
