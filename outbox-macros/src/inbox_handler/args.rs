//! The arguments of `#[inbox_handler(...)]`, parsed with darling.
//!
//! darling checks their syntax: unknown keys (with a "did you mean" suggestion), duplicate
//! `consumer` or `mapper`, and values of the wrong kind. The consumer name's grammar is checked
//! here too, so that a malformed name is reported together with an unknown key. What the values
//! mean for the types (a mapper of the right events, an upcast with a `From` impl) is left to
//! the compiler, on spans of the user's tokens.

use darling::FromMeta;
use darling::ast::{MetaNameValueInvalidExpr, NestedMeta};
use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::{Expr, LitStr, Meta, Type};

use outbox_names::check_consumer_name;

use crate::runtime::{CratePath, SeaOrm};
use crate::shared::{Errors, str_lit, ungroup};

/// How `consumer` is written.
const CONSUMER_EXAMPLE: &str = "consumer = \"inventory.reserve-stock\"";
/// How `mapper` is written.
const MAPPER_EXAMPLE: &str = "mapper = &InventoryContracts";
/// How `upcast` is written.
const UPCAST_EXAMPLE: &str = "upcast(from = OrderPlacedV1)";

/// The key of the consumer name.
const CONSUMER: &str = "consumer";

/// The arguments as written: each one parsed, not yet checked against the function.
#[derive(Debug, FromMeta)]
pub(crate) struct HandlerArgs {
    /// `consumer = "inventory.reserve-stock"`: the inbox's dedup scope. Required; an `Option`
    /// so that its absence is reported with our message, next to darling's other errors.
    pub(crate) consumer: Optional<ConsumerLit>,
    /// `mapper = &InventoryContracts`: the mapper of the events the handler raises.
    pub(crate) mapper: Optional<MapperExpr>,
    /// `upcast(from = OrderPlacedV1)`, repeatable: older contracts converted with `From`.
    #[darling(multiple)]
    pub(crate) upcast: Vec<UpcastArg>,
    /// `crate = "renamed_seaorm"`: the path of `outbox-seaorm`, for a renamed dependency.
    #[darling(rename = "crate")]
    pub(crate) krate: Optional<CratePath<SeaOrm>>,
}

/// Parses the arguments of the attribute, reporting into `errors` a syntax error, darling's
/// errors (on the offending tokens) and a missing `consumer` (on the attribute).
///
/// `None` when the arguments cannot be used.
pub(crate) fn parse(args: TokenStream, errors: &mut Errors) -> Option<HandlerArgs> {
    let items = errors.handle(NestedMeta::parse_meta_list(args))?;
    let has_consumer = items.iter().any(|item| match item {
        NestedMeta::Meta(meta) => meta.path().is_ident(CONSUMER),
        NestedMeta::NameValueInvalidExpr(invalid) => invalid.path.is_ident(CONSUMER),
        NestedMeta::Lit(_) => false,
    });
    if !has_consumer {
        errors.push(syn::Error::new(
            Span::call_site(),
            format!(
                "missing `{CONSUMER_EXAMPLE}`: the consumer name is the inbox's dedup scope, \
                 e.g. #[inbox_handler({CONSUMER_EXAMPLE})]"
            ),
        ));
    }
    errors.handle(HandlerArgs::from_list(&items).map_err(Into::into))
}

/// An optional key: like `Option<T>`, but also forwards `from_invalid_expr` (darling's
/// `Option` does not), which parses a value that is not an expression (`Wrapper<V1>`,
/// `pub(crate)`) or reports it with our message.
#[derive(Debug)]
pub(crate) struct Optional<T>(pub(crate) Option<T>);

impl<T: FromMeta> FromMeta for Optional<T> {
    fn from_none() -> Option<Self> {
        Some(Self(None))
    }

    fn from_meta(item: &Meta) -> darling::Result<Self> {
        T::from_meta(item).map(|value| Self(Some(value)))
    }

    fn from_invalid_expr(value: &MetaNameValueInvalidExpr) -> darling::Result<Self> {
        T::from_invalid_expr(value).map(|value| Self(Some(value)))
    }
}

/// The error for `key` or `key(...)` instead of `key = value` (darling puts it on the item).
fn needs_value(example: &str) -> darling::Error {
    darling::Error::custom(format!("expected a value, e.g. `{example}`"))
}

/// The error for a `consumer` that is not a string literal.
fn not_a_literal() -> darling::Error {
    darling::Error::custom(format!(
        "`consumer` must be a string literal, e.g. `{CONSUMER_EXAMPLE}`: the macro validates the \
         name at compile time, so it cannot be a constant or a macro call"
    ))
}

/// `consumer = "..."`: a string literal that follows the consumer-name grammar.
#[derive(Debug, Clone)]
pub(crate) struct ConsumerLit(pub(crate) LitStr);

impl FromMeta for ConsumerLit {
    fn from_word() -> darling::Result<Self> {
        Err(needs_value(CONSUMER_EXAMPLE))
    }

    fn from_list(_: &[NestedMeta]) -> darling::Result<Self> {
        Err(needs_value(CONSUMER_EXAMPLE))
    }

    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        let Some(lit) = str_lit(expr) else {
            return Err(not_a_literal().with_span(expr));
        };
        let value = lit.value();
        match check_consumer_name(&value) {
            Ok(()) => Ok(Self(lit.clone())),
            Err(error) => Err(darling::Error::custom(format!(
                "invalid consumer name `{value}`: {error}"
            ))
            .with_span(lit)),
        }
    }

    fn from_invalid_expr(_: &MetaNameValueInvalidExpr) -> darling::Result<Self> {
        Err(not_a_literal())
    }
}

/// `mapper = <expression>`: anything `Into<MapperRef<E>>` (`&InventoryContracts`, a `static`,
/// an `Arc`), evaluated each time a message is handled. A string literal's contents are parsed
/// as the expression, as darling does for other expressions.
#[derive(Debug, Clone)]
pub(crate) struct MapperExpr(pub(crate) Expr);

impl FromMeta for MapperExpr {
    fn from_word() -> darling::Result<Self> {
        Err(needs_value(MAPPER_EXAMPLE))
    }

    fn from_list(_: &[NestedMeta]) -> darling::Result<Self> {
        Err(needs_value(MAPPER_EXAMPLE))
    }

    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        Expr::from_expr(expr).map(Self)
    }
}

/// `upcast(from = OrderPlacedV1)`: an older contract the handler also accepts.
#[derive(Debug, Clone)]
pub(crate) struct UpcastArg {
    /// The older contract type.
    pub(crate) from: Type,
}

/// The inside of `upcast(...)`.
#[derive(FromMeta)]
struct UpcastList {
    from: Optional<UpcastType>,
}

/// `from = OlderContract` (or the type in a string literal).
struct UpcastType(Type);

impl FromMeta for UpcastType {
    fn from_word() -> darling::Result<Self> {
        Err(needs_value(UPCAST_EXAMPLE))
    }

    fn from_list(_: &[NestedMeta]) -> darling::Result<Self> {
        Err(needs_value(UPCAST_EXAMPLE))
    }

    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        let parsed = match str_lit(expr) {
            Some(lit) => lit.parse::<Type>(),
            None => syn::parse2::<Type>(ungroup(expr).to_token_stream()),
        };
        parsed.map(Self).map_err(|_| {
            darling::Error::custom(format!(
                "`from` must be a contract type, e.g. `{UPCAST_EXAMPLE}`"
            ))
            .with_span(expr)
        })
    }

    fn from_invalid_expr(value: &MetaNameValueInvalidExpr) -> darling::Result<Self> {
        syn::parse2::<Type>(value.value.clone())
            .map(Self)
            .map_err(Into::into)
    }
}

impl FromMeta for UpcastArg {
    fn from_word() -> darling::Result<Self> {
        Err(darling::Error::custom(format!(
            "`upcast` needs the older contract: `{UPCAST_EXAMPLE}`"
        )))
    }

    fn from_expr(_: &Expr) -> darling::Result<Self> {
        Err(darling::Error::custom(format!(
            "write the older contract in a list: `{UPCAST_EXAMPLE}`"
        )))
    }

    fn from_list(items: &[NestedMeta]) -> darling::Result<Self> {
        match UpcastList::from_list(items)?.from.0 {
            Some(UpcastType(from)) => Ok(Self { from }),
            None => Err(darling::Error::custom(format!(
                "missing `from = …`: the older contract, e.g. `{UPCAST_EXAMPLE}`"
            ))),
        }
    }

    fn from_invalid_expr(_: &MetaNameValueInvalidExpr) -> darling::Result<Self> {
        Self::from_expr(&syn::parse_quote!(_))
    }
}
