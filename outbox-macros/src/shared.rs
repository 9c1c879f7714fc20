//! Helpers both derives use: collecting errors, and reading attribute values.

use syn::{Expr, Lit, LitStr};

/// Collects errors, each with its own span, into one [`syn::Error`].
///
/// `syn::Error` rather than `darling::Error`: it keeps the first *and* last token of a
/// multi-token span (e.g. `<'a, T>`), which stable Rust cannot join into one `Span`. darling's
/// errors convert into it without loss.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    /// Adds an error.
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(errors) => errors.combine(error),
            None => self.0 = Some(error),
        }
    }

    /// The value of `result`, or `None` after recording its error.
    pub(crate) fn handle<T>(&mut self, result: syn::Result<T>) -> Option<T> {
        result.map_err(|error| self.push(error)).ok()
    }

    /// `Err` with every recorded error, if any.
    pub(crate) fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

/// Removes the invisible groups and parentheses around an expression (a value passed
/// through a `macro_rules!` fragment arrives in an invisible group).
pub(crate) fn ungroup(mut expr: &Expr) -> &Expr {
    loop {
        match expr {
            Expr::Group(group) => expr = &group.expr,
            Expr::Paren(paren) => expr = &paren.expr,
            _ => return expr,
        }
    }
}

/// The string literal of an expression, if it is one.
pub(crate) fn str_lit(expr: &Expr) -> Option<&LitStr> {
    match ungroup(expr) {
        Expr::Lit(lit) => match &lit.lit {
            Lit::Str(s) => Some(s),
            _ => None,
        },
        _ => None,
    }
}
