//! kafka adapter (in progress).
