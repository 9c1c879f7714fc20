//! How generated code names the runtime crates, and their hidden support module, whose
//! name carries the version.
//!
//! Without `crate = "…"`, the crate is found in the manifest of the crate being compiled
//! (with `proc-macro-crate`, workspace dependencies and renames included): through the
//! facade `outbox` when the crate depends on it (`::outbox::__kernel`,
//! `::outbox::__seaorm`), else under the name it gives `outbox-kernel` / `outbox-seaorm`
//! (`::outbox_kernel`, or `::outbox_core` for a dependency renamed so), else the package's
//! own name. `crate = "…"` names it outright (a re-export of one's own).
//!
//! The support module (`outbox_kernel::__private_0_1_0`, `outbox_seaorm::__private_0_1_0`) is
//! named after the version of this crate: the three crates are released together, under
//! one version, and a runtime crate of another version has no module of that name, so a
//! mismatched pair fails to compile instead of calling support code written for another
//! version.

use std::marker::PhantomData;

use darling::FromMeta;
use darling::ast::{MetaNameValueInvalidExpr, NestedMeta};
use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::{Attribute, Expr, Ident, Meta, Path, Token};

use crate::shared::{str_lit, ungroup};

/// The key of the override.
pub(crate) const CRATE: &str = "crate";

/// The name of the runtime crates' support module for `version`: `__private_` followed by
/// the version with `_` for every character that cannot be in an identifier
/// (`0.1.0` → `__private_0_1_0`).
fn private_module_name(version: &str) -> String {
    let version: String = version
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("__private_{version}")
}

/// A runtime crate the generated code calls into.
pub(crate) trait RuntimeCrate {
    /// The package, as users know it.
    const PACKAGE: &'static str;
    /// The path generated code uses when the manifest says nothing (the package's name).
    const DEFAULT: &'static str;
    /// Where the facade `outbox` re-exports it.
    const FACADE_MODULE: &'static str;
    /// How the override is written, for messages.
    const EXAMPLE: &'static str;
}

/// The facade package, which re-exports both runtime crates.
const FACADE: &str = "outbox";

/// `outbox-kernel`, the runtime of `#[derive(IntegrationEvent)]` and `#[derive(DomainEvent)]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Core;

impl RuntimeCrate for Core {
    const PACKAGE: &'static str = "outbox-kernel";
    const DEFAULT: &'static str = "::outbox_kernel";
    const FACADE_MODULE: &'static str = "__kernel";
    const EXAMPLE: &'static str = "crate = \"renamed_kernel\"";
}

/// `outbox-seaorm`, the runtime of `#[inbox_handler]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SeaOrm;

impl RuntimeCrate for SeaOrm {
    const PACKAGE: &'static str = "outbox-seaorm";
    const DEFAULT: &'static str = "::outbox_seaorm";
    const FACADE_MODULE: &'static str = "__seaorm";
    const EXAMPLE: &'static str = "crate = \"renamed_seaorm\"";
}

/// The path of `R` as the crate being compiled can name it, read from its manifest (see
/// the [module documentation](self)).
fn discovered<R: RuntimeCrate>() -> TokenStream {
    use proc_macro_crate::{FoundCrate, crate_name};
    let path = match crate_name(FACADE) {
        Ok(FoundCrate::Name(name)) => format!("::{name}::{}", R::FACADE_MODULE),
        // The facade's own tests and doc tests.
        Ok(FoundCrate::Itself) => format!("::{FACADE}::{}", R::FACADE_MODULE),
        Err(_) => match crate_name(R::PACKAGE) {
            Ok(FoundCrate::Name(name)) => format!("::{name}"),
            // The package's own tests, doc tests and examples.
            Ok(FoundCrate::Itself) | Err(_) => R::DEFAULT.to_owned(),
        },
    };
    path.parse()
        .unwrap_or_else(|_| unreachable!("a path of identifiers"))
}

/// `crate = "renamed_kernel"` (or `crate = renamed_kernel`): the path under which the runtime
/// crate `R` is reachable, for a dependency renamed in `Cargo.toml` or re-exported.
#[derive(Debug, Clone)]
pub(crate) struct CratePath<R> {
    /// The path as written.
    pub(crate) path: Path,
    runtime: PhantomData<R>,
}

impl<R> CratePath<R> {
    fn new(path: Path) -> Self {
        Self {
            path,
            runtime: PhantomData,
        }
    }
}

impl<R: RuntimeCrate> CratePath<R> {
    /// The error for a value that is not a path.
    fn not_a_path() -> darling::Error {
        darling::Error::custom(format!(
            "`crate` must be the path of the `{}` crate as this crate names it, e.g. `{}` for \
             a dependency renamed in Cargo.toml",
            R::PACKAGE,
            R::EXAMPLE
        ))
    }

    /// The path in `expr`: a path, or a path in a string literal.
    fn parse(expr: &Expr) -> Option<Path> {
        match ungroup(expr) {
            Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => {
                Some(path.path.clone())
            }
            Expr::Lit(_) => str_lit(expr).and_then(|lit| lit.parse::<Path>().ok()),
            _ => None,
        }
    }
}

impl<R: RuntimeCrate> FromMeta for CratePath<R> {
    fn from_word() -> darling::Result<Self> {
        Err(darling::Error::custom(format!(
            "expected a value, e.g. `{}`",
            R::EXAMPLE
        )))
    }

    fn from_list(_: &[NestedMeta]) -> darling::Result<Self> {
        Self::from_word()
    }

    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        Self::parse(expr)
            .map(Self::new)
            .ok_or_else(|| Self::not_a_path().with_span(expr))
    }

    fn from_invalid_expr(value: &MetaNameValueInvalidExpr) -> darling::Result<Self> {
        Err(Self::not_a_path().with_span(&value.value))
    }
}

/// The paths generated code names a runtime crate by: the crate itself and its support
/// module.
#[derive(Debug, Clone)]
pub(crate) struct Runtime {
    /// The crate: as discovered (`::outbox::__kernel`, `::outbox_kernel`, …), or the
    /// override.
    pub(crate) krate: TokenStream,
    /// Its support module: `<crate>::__private_0_1_0`.
    pub(crate) private: TokenStream,
}

impl Runtime {
    /// The paths of `R`: under `path` when given, else the default.
    pub(crate) fn of<R: RuntimeCrate>(path: Option<&CratePath<R>>) -> Self {
        let krate = match path {
            Some(path) => path.path.to_token_stream(),
            None => discovered::<R>(),
        };
        let module = Ident::new(
            &private_module_name(env!("CARGO_PKG_VERSION")),
            Span::call_site(),
        );
        let private = quote!(#krate::#module);
        Self { krate, private }
    }

    /// The paths of `R` for a stub emitted next to errors: the override of the first
    /// `#[attribute(...)]` in `attrs` that names a valid `crate = …`, else the default.
    /// Nothing is reported here: the errors come from the parse proper.
    pub(crate) fn lenient<R: RuntimeCrate>(attrs: &[Attribute], attribute: &str) -> Self {
        let path = attrs
            .iter()
            .filter(|attr| attr.path().is_ident(attribute))
            .filter_map(|attr| {
                attr.parse_args_with(
                    syn::punctuated::Punctuated::<Meta, Token![,]>::parse_terminated,
                )
                .ok()
            })
            .flatten()
            .find_map(|meta| match meta {
                Meta::NameValue(value) if value.path.is_ident(CRATE) => {
                    CratePath::<R>::parse(&value.value).map(CratePath::<R>::new)
                }
                _ => None,
            });
        Self::of(path.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;
    use syn::DeriveInput;

    use super::*;

    #[test]
    fn the_support_module_carries_the_version() {
        assert_eq!(private_module_name("0.1.0"), "__private_0_1_0");
        assert_eq!(private_module_name("12.3.45"), "__private_12_3_45");
        assert_eq!(
            private_module_name("1.0.0-rc.1+build.7"),
            "__private_1_0_0_rc_1_build_7"
        );
        let runtime = Runtime::of::<Core>(None);
        assert_eq!(runtime.krate.to_string(), ":: outbox_kernel");
        assert_eq!(
            runtime.private.to_string(),
            format!(
                ":: outbox_kernel :: {}",
                private_module_name(env!("CARGO_PKG_VERSION"))
            )
        );
    }

    #[test]
    fn lenient_reads_the_first_valid_override() {
        let input: DeriveInput = syn::parse_quote! {
            #[integration_event(name = "a.b.c.v1", unknown(1 + ))]
            #[integration_event(crate = 5)]
            #[integration_event(key = id, crate = "renamed_kernel")]
            #[integration_event(crate = other)]
            struct Event;
        };
        let runtime = Runtime::lenient::<Core>(&input.attrs, "integration_event");
        assert_eq!(runtime.krate.to_string(), "renamed_kernel");
        let none = Runtime::lenient::<SeaOrm>(&[], "inbox_handler");
        assert_eq!(none.krate.to_string(), quote!(::outbox_seaorm).to_string());
    }
}
