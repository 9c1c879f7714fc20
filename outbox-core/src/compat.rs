//! Breaking-change check of contract schemas against a baseline.
