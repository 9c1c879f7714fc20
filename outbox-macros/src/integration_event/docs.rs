//! The contract's description: its doc comment.
//!
//! Lines are joined the way `schemars` builds a schema's `description` (one leading space
//! removed from each line, lines joined with `\n`, the whole trimmed), so the registered
//! description equals the schema's for an ordinary doc comment.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::{Attribute, Expr, Lit, Meta};

/// The description of a contract.
#[derive(Debug, Clone)]
pub(crate) enum Description {
    /// Every `#[doc = ...]` line is a string literal (the usual case: `///` comments): the
    /// description, computed now.
    Literal(String),
    /// Some line is another expression, e.g. `#[doc = include_str!("x.md")]`: a constant
    /// expression that joins and trims the lines at compile time.
    Expr(TokenStream),
}

/// One `#[doc = ...]` line.
enum Line<'a> {
    Literal(String),
    Expr(&'a Expr),
}

/// The description written in `attrs`' doc comments (empty when there are none).
pub(crate) fn description(attrs: &[Attribute]) -> Description {
    let lines: Vec<Line<'_>> = attrs
        .iter()
        .filter(|attr| attr.path().is_ident("doc"))
        .filter_map(|attr| match &attr.meta {
            Meta::NameValue(nv) => Some(&nv.value),
            _ => None,
        })
        .map(|value| match value {
            Expr::Lit(lit) => match &lit.lit {
                Lit::Str(s) => {
                    let line = s.value();
                    Line::Literal(line.strip_prefix(' ').unwrap_or(&line).to_owned())
                }
                _ => Line::Expr(value),
            },
            _ => Line::Expr(value),
        })
        .collect();

    if lines.iter().all(|line| matches!(line, Line::Literal(_))) {
        let text: Vec<&str> = lines
            .iter()
            .filter_map(|line| match line {
                Line::Literal(text) => Some(text.as_str()),
                Line::Expr(_) => None,
            })
            .collect();
        return Description::Literal(text.join("\n").trim_ascii().to_owned());
    }

    let mut parts = TokenStream::new();
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            parts.extend(quote!("\n",));
        }
        match line {
            Line::Literal(text) => parts.extend(quote!(#text,)),
            Line::Expr(expr) => parts.extend(quote!(#expr,)),
        }
    }
    Description::Expr(quote! {
        <::core::primitive::str>::trim_ascii(::core::concat!(#parts))
    })
}

impl ToTokens for Description {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        match self {
            Self::Literal(text) => text.to_tokens(tokens),
            Self::Expr(expr) => expr.to_tokens(tokens),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::{DeriveInput, parse_quote};

    fn of(input: DeriveInput) -> Description {
        description(&input.attrs)
    }

    fn literal(input: DeriveInput) -> String {
        match of(input) {
            Description::Literal(text) => text,
            Description::Expr(expr) => panic!("expected a literal, got {expr}"),
        }
    }

    #[test]
    fn literal_doc_comments() {
        assert_eq!(
            literal(parse_quote! {
                /// An order was placed.
                ///
                ///   Indented line.
                #[derive(Debug)]
                #[doc = "Last line, no leading space."]
                ///
                struct S;
            }),
            "An order was placed.\n\n  Indented line.\nLast line, no leading space."
        );
        assert_eq!(
            literal(parse_quote!(
                struct S;
            )),
            ""
        );
        assert_eq!(
            literal(parse_quote! {
                #[doc(hidden)]
                struct S;
            }),
            ""
        );
    }

    #[test]
    fn non_literal_doc_becomes_a_const_expression() {
        let Description::Expr(expr) = of(parse_quote! {
            /// Head.
            #[doc = include_str!("x.md")]
            struct S;
        }) else {
            panic!("expected an expression");
        };
        let expected = quote! {
            <::core::primitive::str>::trim_ascii(
                ::core::concat!("Head.", "\n", include_str!("x.md"),)
            )
        };
        assert_eq!(expr.to_string(), expected.to_string());
    }
}
