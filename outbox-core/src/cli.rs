//! The embeddable `schemas` command line.
