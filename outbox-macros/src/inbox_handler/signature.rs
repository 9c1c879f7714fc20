//! The handler function's signature: `async fn(uow: &UnitOfWork<E>, event: Contract[,
//! envelope: &Envelope]) -> Result<(), Error>`.
//!
//! What can be seen in the tokens is checked here, each problem on the tokens that cause it:
//! `async`, not `unsafe`, no type or const parameters, no receiver, the arity, which arguments
//! are references (in which order), and a `Result<(), E>` return type. Whether the types are
//! what they should be (a `UnitOfWork`, an `IntegrationEvent`, an `Envelope`) is left to the
//! compiler: the generated code names them with the spans of the user's types, so its errors
//! point there.

use proc_macro2::{Punct, Spacing, Span, TokenStream};
use quote::{ToTokens, quote};
use syn::{
    FnArg, GenericArgument, GenericParam, PathArguments, ReturnType, Safety, Signature, Type,
    TypeReference,
};

use crate::shared::Errors;

/// The expected signature, as stated in errors.
pub(crate) const EXPECTED: &str = "`async fn(uow: &UnitOfWork<E>, event: Contract[, envelope: \
                                   &Envelope]) -> Result<(), Error>`";

/// The parts of a valid handler signature the generated code needs.
#[derive(Debug)]
pub(crate) struct Handler<'a> {
    /// The first argument's type, the reference (`&'a UnitOfWork<E>`).
    pub(crate) uow_argument: &'a Type,
    /// The unit of work type behind the first argument's reference (`UnitOfWork<E>`).
    pub(crate) uow: &'a Type,
    /// The contract type (the second argument).
    pub(crate) contract: &'a Type,
    /// Whether the function takes the envelope (a third argument).
    pub(crate) envelope: bool,
    /// The `E` of the `Result<(), E>` return type.
    pub(crate) error: &'a Type,
}

/// An error spanning from `first` to `last` (stable Rust cannot join two spans; `syn::Error`
/// keeps both ends of the tokens it is given).
fn error_between(first: Span, last: Span, message: impl std::fmt::Display) -> syn::Error {
    let mut tokens = TokenStream::new();
    for span in [first, last] {
        let mut punct = Punct::new('.', Spacing::Alone);
        punct.set_span(span);
        tokens.extend(punct.into_token_stream());
    }
    syn::Error::new_spanned(tokens, message)
}

/// The referenced type of `&T` / `&mut T` (through invisible groups and parentheses).
fn reference(ty: &Type) -> Option<&TypeReference> {
    match ty {
        Type::Reference(reference) => Some(reference),
        Type::Group(group) => reference(&group.elem),
        Type::Paren(paren) => reference(&paren.elem),
        _ => None,
    }
}

/// `impl Trait` makes the function generic; the generated impl needs concrete types. Whether
/// `ty` is concrete enough.
fn check_concrete(ty: &Type, what: &str, errors: &mut Errors) -> bool {
    if matches!(strip(ty), Type::ImplTrait(_)) {
        errors.push(syn::Error::new_spanned(
            ty,
            format!("{what} must be a concrete type, not `impl Trait`: {EXPECTED}"),
        ));
        return false;
    }
    true
}

/// Checks `sig`, reporting every problem into `errors`.
///
/// `None` when the signature cannot be used (each reason was reported).
pub(crate) fn check<'a>(sig: &'a Signature, errors: &mut Errors) -> Option<Handler<'a>> {
    let mut usable = true;
    if sig.asyncness.is_none() {
        errors.push(error_between(
            sig.fn_token.span,
            sig.ident.span(),
            format!("an inbox handler must be an `async fn`: {EXPECTED}"),
        ));
        usable = false;
    }
    if let Safety::Unsafe(token) = &sig.safety {
        errors.push(syn::Error::new_spanned(
            token,
            "an inbox handler cannot be `unsafe`: the consumer calls it without an `unsafe` block",
        ));
        usable = false;
    }
    usable &= check_generics(sig, errors);
    usable &= check_receiver_and_variadic(sig, errors);
    let args = arguments(sig, errors);
    let error = result_error(sig, errors);
    if !usable {
        return None;
    }
    let (uow_argument, uow, contract, envelope) = args?;
    Some(Handler {
        uow_argument,
        uow,
        contract,
        envelope,
        error: error?,
    })
}

/// Type and const parameters and `where` clauses are errors; lifetime parameters are allowed
/// (`uow: &'a UnitOfWork<E>`). Whether the signature is still usable.
fn check_generics(sig: &Signature, errors: &mut Errors) -> bool {
    let mut usable = true;
    for param in &sig.generics.params {
        if !matches!(param, GenericParam::Lifetime(_)) {
            errors.push(syn::Error::new_spanned(
                param,
                "an inbox handler cannot be generic: the consumer decodes one concrete contract \
                 and needs one unit-of-work and error type (lifetime parameters are fine)",
            ));
            usable = false;
        }
    }
    if let Some(where_clause) = &sig.generics.where_clause {
        errors.push(syn::Error::new_spanned(
            where_clause,
            "an inbox handler cannot have a `where` clause: its types are concrete",
        ));
        usable = false;
    }
    usable
}

/// `self` and `...` are errors. Whether the signature is still usable.
fn check_receiver_and_variadic(sig: &Signature, errors: &mut Errors) -> bool {
    let mut usable = true;
    for arg in &sig.inputs {
        if let FnArg::Receiver(receiver) = arg {
            errors.push(syn::Error::new_spanned(
                receiver,
                format!(
                    "an inbox handler is a free function, not a method: it cannot take `self`; \
                     {EXPECTED}"
                ),
            ));
            usable = false;
        }
    }
    if let Some(variadic) = &sig.variadic {
        errors.push(syn::Error::new_spanned(
            variadic,
            format!("an inbox handler cannot be variadic: {EXPECTED}"),
        ));
        usable = false;
    }
    usable
}

/// The first argument's type, its unit-of-work referent, the contract and whether the envelope
/// is taken, after checking the arity and which arguments are references.
fn arguments<'a>(
    sig: &'a Signature,
    errors: &mut Errors,
) -> Option<(&'a Type, &'a Type, &'a Type, bool)> {
    if sig
        .inputs
        .iter()
        .any(|arg| matches!(arg, FnArg::Receiver(_)))
    {
        // Reported by `check_receiver_and_variadic`; the positions mean nothing then.
        return None;
    }
    let types: Vec<&Type> = sig
        .inputs
        .iter()
        .filter_map(|arg| match arg {
            FnArg::Typed(typed) => Some(&*typed.ty),
            FnArg::Receiver(_) => None,
        })
        .collect();
    let ([uow, contract] | [uow, contract, _]) = types[..] else {
        let message = format!(
            "an inbox handler takes 2 or 3 arguments, found {}: {EXPECTED}",
            types.len()
        );
        // Too many: on the extra arguments; too few: on the parentheses.
        let extra: Vec<&FnArg> = sig.inputs.iter().skip(3).collect();
        errors.push(if extra.is_empty() {
            syn::Error::new(sig.paren_token.span.join(), message)
        } else {
            syn::Error::new_spanned(quote!(#(#extra),*), message)
        });
        return None;
    };
    let envelope = types.get(2).copied();

    let (uow_ref, contract_ref) = (reference(uow), reference(contract));
    // One argument by value (the contract), the others by reference, but not in that order.
    let by_value: Vec<usize> = (0..types.len())
        .filter(|&i| reference(types[i]).is_none())
        .collect();
    if matches!(by_value[..], [i] if i != 1) {
        errors.push(syn::Error::new_spanned(
            &sig.inputs,
            format!(
                "arguments are in the wrong order: expected (uow, event[, envelope]), i.e. \
                 {EXPECTED}"
            ),
        ));
        return None;
    }

    let mut usable = true;
    match uow_ref {
        None => {
            errors.push(syn::Error::new_spanned(
                uow,
                "the first argument must be the unit of work, by reference: \
                 `uow: &UnitOfWork<E>`",
            ));
            usable = false;
        }
        Some(TypeReference {
            mutability: Some(mutability),
            ..
        }) => {
            errors.push(syn::Error::new_spanned(
                mutability,
                "take the unit of work by shared reference: `uow: &UnitOfWork<E>`, not `&mut`",
            ));
            usable = false;
        }
        Some(_) => {}
    }
    if let Some(reference) = contract_ref {
        errors.push(syn::Error::new_spanned(
            reference,
            format!(
                "take the contract by value: `event: {}`; the handler owns the decoded message",
                type_text(&reference.elem)
            ),
        ));
        usable = false;
    }
    if let Some(envelope) = envelope {
        match reference(envelope) {
            None => {
                errors.push(syn::Error::new_spanned(
                    envelope,
                    "the third argument, if any, must be the envelope, by reference: \
                     `envelope: &Envelope`",
                ));
                usable = false;
            }
            Some(TypeReference {
                mutability: Some(mutability),
                ..
            }) => {
                errors.push(syn::Error::new_spanned(
                    mutability,
                    "take the envelope by shared reference: `envelope: &Envelope`, not `&mut`",
                ));
                usable = false;
            }
            Some(_) => {}
        }
    }
    if let Some(reference) = uow_ref {
        usable &= check_concrete(&reference.elem, "the unit of work", errors);
    }
    usable &= check_concrete(contract, "the contract", errors);
    match uow_ref {
        Some(reference) if usable => Some((uow, &*reference.elem, contract, envelope.is_some())),
        _ => None,
    }
}

/// The `E` of a `Result<(), E>` return type (the last path segment is `Result` and has two
/// type arguments, the first `()`).
fn result_error<'a>(sig: &'a Signature, errors: &mut Errors) -> Option<&'a Type> {
    let ReturnType::Type(_, ty) = &sig.output else {
        errors.push(syn::Error::new(
            sig.paren_token.span.close(),
            "an inbox handler returns `Result<(), Error>`: add the return type, e.g. \
             `-> Result<(), StockError>`",
        ));
        return None;
    };
    let arguments = match strip(ty) {
        Type::Path(path) if path.qself.is_none() => path
            .path
            .segments
            .last()
            .filter(|last| last.ident == "Result")
            .and_then(|last| match &last.arguments {
                PathArguments::AngleBracketed(arguments) => Some(arguments),
                _ => None,
            }),
        _ => None,
    };
    let types: Option<Vec<&Type>> = arguments.map(|arguments| {
        arguments
            .args
            .iter()
            .filter_map(|arg| match arg {
                GenericArgument::Type(ty) => Some(ty),
                _ => None,
            })
            .collect()
    });
    let Some([ok, error]) = types.as_deref() else {
        errors.push(syn::Error::new_spanned(
            ty,
            format!(
                "an inbox handler returns `Result<(), Error>`, found `{}`; write the error type \
                 out (`Result<(), anyhow::Error>`, not an alias such as `anyhow::Result<()>`)",
                type_text(ty)
            ),
        ));
        return None;
    };
    if !matches!(strip(ok), Type::Tuple(tuple) if tuple.elems.is_empty()) {
        errors.push(syn::Error::new_spanned(
            ok,
            "an inbox handler returns `Result<(), Error>`: its success value is `()`",
        ));
        return None;
    }
    Some(error)
}

/// `ty` as the user would write it (`std::io::Result<()>`, not `std :: io :: Result < () >`),
/// for messages.
pub(crate) fn type_text(ty: &Type) -> String {
    let spaced = ty.to_token_stream().to_string();
    let mut text = String::with_capacity(spaced.len());
    let mut chars = spaced.chars().peekable();
    while let Some(c) = chars.next() {
        let next = chars.peek().copied();
        let previous = text.chars().last();
        // Drop the spaces around `::` and `<`, before `>`, `,` and `;`, and after `&`.
        let drop = c == ' '
            && (matches!(previous, Some(':' | '<' | '&'))
                || matches!(next, Some(':' | '<' | '>' | ',' | ';')));
        if !drop {
            text.push(c);
        }
    }
    text
}

/// `ty` without invisible groups and parentheses.
fn strip(ty: &Type) -> &Type {
    match ty {
        Type::Group(group) => strip(&group.elem),
        Type::Paren(paren) => strip(&paren.elem),
        _ => ty,
    }
}
