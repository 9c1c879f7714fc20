//! redis adapter (in progress).
