//! The `#[domain_event(...)]` attributes, parsed with darling: on each variant (its fate), and
//! on the enum itself (`crate = …` only).
//!
//! darling checks the attribute's syntax: unknown keys (with a "did you mean" suggestion),
//! duplicate `map`, `local` or `crate` and values of the wrong kind. Which attributes a variant
//! carries, and whether its options fit together and fit the variant's shape, is checked here
//! and in the parent module, so that all those errors are reported together.

use darling::FromMeta;
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Attribute, DeriveInput, Expr, ExprPath, Meta, TypePath, Variant};

use crate::runtime::{CRATE, Core, CratePath};
use crate::shared::{Errors, str_lit, ungroup};

/// The path of the attribute.
pub(crate) const ATTRIBUTE: &str = "domain_event";

/// How `contract` is written.
const CONTRACT_EXAMPLE: &str = "contract = OrderPlacedV1";
/// How `map` is written.
const MAP_EXAMPLE: &str = "map = crate::mapping::map_order_shipped";

/// The three ways to decide a variant's fate, as the user writes them.
pub(crate) const CHOICES: &str = "`#[domain_event(contract = …)]`, `#[domain_event(map = …)]` or \
                                  `#[domain_event(local)]`";

/// The options of `#[domain_event(...)]` on the enum, as written.
#[derive(Debug, FromMeta)]
pub(crate) struct EnumOptions {
    /// `crate = "renamed_kernel"`: the path of `outbox-kernel`, for a renamed dependency.
    #[darling(rename = "crate")]
    pub(crate) krate: Option<CratePath<Core>>,
}

/// Whether `attr` is a `#[domain_event(...)]` list holding a `crate` key: an attribute of
/// the enum. Any other `#[domain_event]` on the enum belongs on a variant.
pub(crate) fn is_enum_attr(attr: &Attribute) -> bool {
    let Meta::List(list) = &attr.meta else {
        return false;
    };
    attr.path().is_ident(ATTRIBUTE)
        && darling::ast::NestedMeta::parse_meta_list(list.tokens.clone()).is_ok_and(|items| {
            items.iter().any(|item| {
                matches!(item, darling::ast::NestedMeta::Meta(meta) if meta.path().is_ident(CRATE))
            })
        })
}

/// Parses the enum's `#[domain_event(crate = …)]` (see [`is_enum_attr`]), reporting into
/// `errors` darling's errors (on the offending tokens) and every attribute after the first
/// that gives `crate` (on itself).
///
/// The override, if one is given and valid.
pub(crate) fn parse_enum(input: &DeriveInput, errors: &mut Errors) -> Option<CratePath<Core>> {
    let mut first = None;
    for attr in input.attrs.iter().filter(|attr| is_enum_attr(attr)) {
        let options = errors.handle(EnumOptions::from_meta(&attr.meta).map_err(Into::into));
        if first.is_some() {
            errors.push(syn::Error::new_spanned(
                attr,
                "duplicate `crate`: write it once, in one #[domain_event(crate = …)] on the enum",
            ));
        } else {
            first = Some(options.and_then(|options| options.krate));
        }
    }
    first.flatten()
}

/// The options of one `#[domain_event(...)]` as written, not yet validated.
#[derive(Debug, FromMeta)]
pub(crate) struct VariantOptions {
    /// `contract = OrderPlacedV1`, repeatable: the contracts built from the variant's payload
    /// with `From`, emitted in this order.
    #[darling(multiple)]
    pub(crate) contract: Vec<ContractPath>,
    /// `map = path::to::function`: a function that emits the contracts itself.
    pub(crate) map: Option<MapPath>,
    /// `local`: the event never leaves the process.
    pub(crate) local: LocalFlag,
}

/// The attribute of a variant, once we know it is there.
pub(crate) struct VariantAttr<'a> {
    /// The attribute (errors about an empty attribute point at it).
    pub(crate) attr: &'a Attribute,
    /// Its options.
    pub(crate) options: VariantOptions,
}

/// Parses the `#[domain_event(...)]` of `variant`, reporting into `errors` a missing
/// attribute (on the variant's name), every attribute after the first (each on itself), an
/// attribute that is not a list and darling's errors about the options (on the offending
/// tokens).
///
/// `None` when there is no usable attribute.
pub(crate) fn parse<'a>(variant: &'a Variant, errors: &mut Errors) -> Option<VariantAttr<'a>> {
    let ident = &variant.ident;
    let mut attrs = variant
        .attrs
        .iter()
        .filter(|attr| attr.path().is_ident(ATTRIBUTE));
    let Some(attr) = attrs.next() else {
        errors.push(syn::Error::new_spanned(
            ident,
            format!(
                "variant `{ident}` is neither mapped nor local: add {CHOICES}; every variant of \
                 a domain event enum says which contracts it becomes, so that no event is \
                 forgotten"
            ),
        ));
        return None;
    };
    for duplicate in attrs {
        errors.push(syn::Error::new_spanned(
            duplicate,
            format!(
                "duplicate #[domain_event] attribute on variant `{ident}`: write all its options \
                 in one attribute, e.g. `#[domain_event(contract = OrderCancelledV1, contract = \
                 RefundRequestedV1)]`"
            ),
        ));
    }
    if !matches!(attr.meta, Meta::List(_)) {
        errors.push(empty(attr, variant));
        return None;
    }
    let options = errors.handle(VariantOptions::from_meta(&attr.meta).map_err(Into::into))?;
    Some(VariantAttr { attr, options })
}

/// The error for `#[domain_event]`, `#[domain_event()]` and `#[domain_event = ...]`.
pub(crate) fn empty(attr: &Attribute, variant: &Variant) -> syn::Error {
    syn::Error::new_spanned(
        attr,
        format!(
            "empty #[domain_event]: say what becomes of variant `{}` with {CHOICES}",
            variant.ident
        ),
    )
}

/// The error for `contract` or `map(...)` instead of `contract = value` (darling puts it on
/// the item).
fn needs_value(example: &str) -> darling::Error {
    darling::Error::custom(format!("expected a value, e.g. `{example}`"))
}

/// `contract = OrderPlacedV1` (or `contract = "OrderPlacedV1"`): the path of a contract type.
#[derive(Debug, Clone)]
pub(crate) struct ContractPath(pub(crate) TypePath);

impl FromMeta for ContractPath {
    fn from_word() -> darling::Result<Self> {
        Err(needs_value(CONTRACT_EXAMPLE))
    }

    fn from_list(_: &[darling::ast::NestedMeta]) -> darling::Result<Self> {
        Err(needs_value(CONTRACT_EXAMPLE))
    }

    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        let path = match ungroup(expr) {
            Expr::Path(path) => Some(TypePath {
                attrs: Vec::new(),
                qself: path.qself.clone(),
                path: path.path.clone(),
            }),
            Expr::Lit(_) => str_lit(expr).and_then(|s| s.parse::<TypePath>().ok()),
            _ => None,
        };
        path.map(Self).ok_or_else(|| {
            darling::Error::custom(format!(
                "`contract` must be the path of an integration event type, e.g. \
                 `{CONTRACT_EXAMPLE}`"
            ))
            .with_span(expr)
        })
    }
}

/// `map = path::to::function` (or the path in a string literal): the mapping function.
#[derive(Debug, Clone)]
pub(crate) struct MapPath(pub(crate) ExprPath);

impl FromMeta for MapPath {
    fn from_word() -> darling::Result<Self> {
        Err(needs_value(MAP_EXAMPLE))
    }

    fn from_list(_: &[darling::ast::NestedMeta]) -> darling::Result<Self> {
        Err(needs_value(MAP_EXAMPLE))
    }

    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        let path = match ungroup(expr) {
            Expr::Path(path) => Some(path.clone()),
            Expr::Lit(_) => str_lit(expr).and_then(|s| s.parse::<ExprPath>().ok()),
            _ => None,
        };
        path.map(Self).ok_or_else(|| {
            darling::Error::custom(format!(
                "`map` must be the path of a mapping function, e.g. `{MAP_EXAMPLE}`; a \
                 closure or other expression is not accepted"
            ))
            .with_span(expr)
        })
    }
}

/// `local`: a word without a value. Like `darling::util::Flag`, but with a clear message for
/// `local = true` and `local(...)`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LocalFlag(Option<Span>);

impl LocalFlag {
    /// Whether `local` was written.
    pub(crate) fn is_present(self) -> bool {
        self.0.is_some()
    }

    /// Where `local` was written (the call site when it was not).
    pub(crate) fn span(self) -> Span {
        self.0.unwrap_or_else(Span::call_site)
    }
}

impl FromMeta for LocalFlag {
    fn from_none() -> Option<Self> {
        Some(Self(None))
    }

    fn from_meta(item: &Meta) -> darling::Result<Self> {
        match item {
            Meta::Path(path) => Ok(Self(Some(path.span()))),
            _ => Err(darling::Error::custom(
                "`local` takes no value: write `#[domain_event(local)]`",
            )
            .with_span(item)),
        }
    }
}
