//! `#[inbox_handler]`.
//!
//! [`expand`] validates the attribute's arguments and the function's signature, and generates,
//! next to the unchanged function, a braced struct of the same name (it lives in the type
//! namespace, so the function stays callable, e.g. in unit tests) implementing
//! `outbox_seaorm::inbox::InboxHandler`, plus two `inventory` registrations per handled event
//! type (the contract, and each `upcast(from = …)`): its route, and what it decodes
//! (`outbox_kernel::consumed::ConsumedContract`, for `schemas expect`). Every problem is reported on the tokens that
//! cause it, and all problems are reported at once. When there are problems, [`attribute`]
//! emits them together with the function unchanged (see [`fallback`]), so that one mistake does
//! not cascade into "cannot find function" errors wherever the function is called.
//!
//! What the tokens cannot tell (the first argument is a `UnitOfWork`, the contract an
//! `IntegrationEvent`, the mapper fits the unit of work's events, an older contract converts
//! with `From`) is left to the compiler: the generated code names the user's types and
//! expressions with their own spans, so its errors point at them, one error per mistake (the
//! unit-of-work check is written once, and a failure of it leaves an error type behind that
//! rustc does not report again; see [`event_type`]).
//!
//! Generated code names everything by absolute path (`::outbox_seaorm::...`, or the path given
//! with `crate = "…"`, and `::core::...`); it reaches `outbox_kernel` through `outbox_seaorm`'s
//! re-export (`::outbox_seaorm::core`), so a consumer crate needs only `outbox-seaorm`, and
//! `inventory` through outbox-seaorm's versioned support module (see [`crate::runtime`]). Its
//! locals (`uow`, `event`, `envelope`) have mixed-site hygiene.

mod args;
mod signature;

use proc_macro2::{Ident, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::ItemFn;
use syn::ext::IdentExt;
use syn::spanned::Spanned;

use self::args::HandlerArgs;
use self::signature::Handler;
use crate::runtime::{Runtime, SeaOrm};
use crate::shared::Errors;

/// Expands the attribute: the function and its handler, or the errors and the function.
pub fn attribute(args: TokenStream, item: TokenStream) -> TokenStream {
    let function = match syn::parse2::<ItemFn>(item.clone()) {
        Ok(function) => function,
        Err(error) => {
            let error = syn::Error::new(
                error.span(),
                format!(
                    "#[inbox_handler] goes on an `async fn`: {} ({error})",
                    signature::EXPECTED
                ),
            )
            .to_compile_error();
            return quote!(#error #item);
        }
    };
    expand(args, &function).unwrap_or_else(|error| fallback(&function, &error))
}

/// Validates the arguments and the signature of `function`, and generates the function, its
/// handler struct and impl, and the registrations.
///
/// # Errors
/// Every problem found, each on its own span (combined into one [`syn::Error`]).
pub fn expand(args: TokenStream, function: &ItemFn) -> syn::Result<TokenStream> {
    let mut errors = Errors::default();
    let args = args::parse(args, &mut errors);
    let handler = signature::check(&function.sig, &mut errors);
    let upcasts = args
        .as_ref()
        .map(|args| check_upcasts(args, handler.as_ref(), &mut errors));
    errors.finish()?;
    match (args, handler, upcasts) {
        (Some(args), Some(handler), Some(())) if args.consumer.0.is_some() => {
            Ok(generate(function, &args, &handler))
        }
        // Each missing part was reported above; this arm is not reached.
        _ => Err(syn::Error::new_spanned(
            &function.sig.ident,
            "internal error of #[inbox_handler]: invalid input without a diagnostic",
        )),
    }
}

/// The output when [`expand`] fails: the errors, and the function unchanged.
pub fn fallback(function: &ItemFn, error: &syn::Error) -> TokenStream {
    let errors = error.to_compile_error();
    quote! {
        #errors
        #function
    }
}

/// An `upcast(from = …)` that names the handler's own contract, or the same type twice, would
/// register one event type twice for the consumer: reported on the repeated type.
fn check_upcasts(args: &HandlerArgs, handler: Option<&Handler<'_>>, errors: &mut Errors) {
    let text = signature::type_text;
    let contract = handler.map(|handler| text(handler.contract));
    let mut seen = Vec::new();
    for upcast in &args.upcast {
        let from = text(&upcast.from);
        if contract.as_ref() == Some(&from) {
            errors.push(syn::Error::new_spanned(
                &upcast.from,
                format!(
                    "`{from}` is the handler's own contract: `upcast(from = …)` names an older \
                     contract the handler also accepts"
                ),
            ));
        } else if seen.contains(&from) {
            errors.push(syn::Error::new_spanned(
                &upcast.from,
                format!("duplicate `upcast(from = {from})`"),
            ));
        }
        seen.push(from);
    }
}

/// The first and last token spans of a type: rustc reports an item or a type made of tokens
/// spanned from `first` to `last` on the whole range, which stable Rust cannot build with
/// `Span::join`.
#[derive(Clone, Copy)]
struct Range {
    first: Span,
    last: Span,
}

/// The range of `ty`'s tokens.
fn range(ty: &syn::Type) -> Range {
    let tokens: Vec<TokenTree> = ty.to_token_stream().into_iter().collect();
    let span = |token: Option<&TokenTree>| token.map_or_else(Span::call_site, TokenTree::span);
    Range {
        first: span(tokens.first()),
        last: span(tokens.last()),
    }
}

impl Range {
    /// `tokens` (generated, not the user's) with every top-level token at `first` and the last
    /// one at `last`. The contents of groups keep their spans (the body of a function, a user's
    /// expression).
    fn respan(self, tokens: TokenStream) -> TokenStream {
        let mut tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let count = tokens.len();
        for (i, token) in tokens.iter_mut().enumerate() {
            token.set_span(if i + 1 == count {
                self.last
            } else {
                self.first
            });
        }
        tokens.into_iter().collect()
    }

    /// `tokens` (generated) all at `first`; the contents of groups keep their spans.
    fn at_first(self, tokens: TokenStream) -> TokenStream {
        Self {
            last: self.first,
            ..self
        }
        .respan(tokens)
    }

    /// `tokens` (generated) all at `last`; the contents of groups keep their spans.
    fn at_last(self, tokens: TokenStream) -> TokenStream {
        Self {
            first: self.last,
            ..self
        }
        .respan(tokens)
    }
}

/// A local variable of the generated code: mixed-site hygiene (user tokens cannot see or
/// shadow it), located at `at` so that type errors involving it point there.
fn local(name: &str, at: Span) -> Ident {
    Ident::new(name, Span::mixed_site().located_at(at))
}

fn generate(function: &ItemFn, args: &HandlerArgs, handler: &Handler<'_>) -> TokenStream {
    let vis = &function.vis;
    let ident = &function.sig.ident;
    let name = ident.unraw().to_string();
    let Some(consumer) = &args.consumer.0 else {
        unreachable!("checked by `expand`")
    };
    let consumer = &consumer.0;
    // rustdoc links cannot name a raw identifier (`r#type`): no link then.
    let link = if ident.to_string().starts_with("r#") {
        format!("`{name}`")
    } else {
        format!("[`{name}`](fn@{name})")
    };
    let doc = format!(
        "Inbox handler of {link} for consumer `{}` (generated by `#[inbox_handler]`).",
        consumer.value()
    );
    let handler_path = format!("::{name}");
    let (contract, error) = (handler.contract, handler.error);

    // Where rustc reports what the tokens cannot tell. The contract and the error type are the
    // user's own tokens. Whether the first argument is a unit of work is checked once, by
    // `event_type`, on the argument's type; when it is not, the handler's `Self::Event` is an
    // error type and nothing else is reported about it. Everything that names `Self::Event` is
    // spanned on the unit of work's type, where an event type that does not derive
    // `DomainEvent` without a `mapper` is reported. `handle` is spanned on the function's name,
    // where a future that is not `Send` is reported ("future returned by `reserve_stock` is not
    // `Send`"). Each `upcast` is spanned on its older contract, where a missing `From` impl is
    // reported.
    let runtime = Runtime::of::<SeaOrm>(args.krate.0.as_ref());
    let Runtime { krate, private } = &runtime;
    let uow = range(handler.uow);
    let event = event_type(&runtime, handler, uow);
    let mapper = mapper_fn(&runtime, args, uow);
    let handle = handle_fn(&runtime, ident, handler, uow);
    let upcasts = args.upcast.iter().map(|upcast| {
        let from = &upcast.from;
        let mut handler = ident.clone();
        handler.set_span(from.span());
        quote_spanned! {from.span()=>
            #private::inventory::submit! {
                #krate::inbox::HandlerRegistration::upcast::<#handler, #from>()
            }
            #private::inventory::submit! {
                #krate::inbox::HandlerRegistration::consumed_upcast::<#handler, #from>()
            }
        }
    });

    quote! {
        #function

        #[doc = #doc]
        #[allow(non_camel_case_types)]
        #vis struct #ident {}

        const _: () = {
            #[automatically_derived]
            impl #krate::inbox::InboxHandler for #ident {
                type Contract = #contract;
                #event
                type Error = #error;

                const CONSUMER: &'static str = #consumer;
                const HANDLER: &'static str = ::core::concat!(::core::module_path!(), #handler_path);

                #mapper
                #handle
            }

            #private::inventory::submit! {
                #krate::inbox::HandlerRegistration::of::<#ident>()
            }
            #private::inventory::submit! {
                #krate::inbox::HandlerRegistration::consumed::<#ident>()
            }
            #(#upcasts)*
        };
    }
}

/// `type Event`: the domain events of the first argument's unit of work `U`, read through
/// `UnitOfWorkArg` (so that a type alias of `UnitOfWork<E>` works), such that a `U` that is not
/// a unit of work gives one error.
///
/// Projected straight as `<U as UnitOfWorkArg>::Event`, the unmet bound was reported again
/// wherever `Self::Event` is used (the mapper, the signature of `handle`, and the trait's own
/// checks of that signature, in `outbox_seaorm`'s source), and the call of the function added a
/// mismatched-types error. Instead, `U: UnitOfWorkArg` is required once, in the constant
/// argument of `__private::HandlerEvent` (see there): when it fails, that constant, and with it
/// `Self::Event`, is an error, which rustc reports no further. The checked type is
/// `__private::Argument<U>` spanned from the argument's `&` to its last token, so that the error
/// points at the whole argument (`&sea_orm::DatabaseConnection`), as its message spells it.
fn event_type(runtime: &Runtime, handler: &Handler<'_>, uow: Range) -> TokenStream {
    let Runtime { krate, private } = runtime;
    let ty = handler.uow;
    let argument = range(handler.uow_argument);
    let open = argument.at_first(quote! {
        #private::check::<<#private::Argument<
    });
    let close = argument.at_last(quote! {
        > as #krate::inbox::UnitOfWorkArg>::Event>()
    });
    let check = quote!(#open #ty #close);
    let before = uow.at_first(quote!(type Event = <));
    let after = uow.at_last(quote!(
        as #private::HandlerEvent<{ #check }>>::Event;
    ));
    quote!(#before #ty #after)
}

/// `fn mapper()`: `mapper = …` converted with `Into` (spanned on the expression: a mapper of
/// other events is reported there), or the derived mapping.
fn mapper_fn(runtime: &Runtime, args: &HandlerArgs, uow: Range) -> TokenStream {
    let krate = &runtime.krate;
    let body = match &args.mapper.0 {
        Some(mapper) => {
            let expr = &mapper.0;
            quote_spanned! {expr.span()=>
                ::core::convert::Into::<#krate::unit_of_work::MapperRef<Self::Event>>::into(#expr)
            }
        }
        None => {
            let path = uow.respan(quote!(
                #krate::inbox::derived_mapper::<Self::Event>
            ));
            quote!(#path())
        }
    };
    let signature = uow.respan(quote! {
        fn mapper() -> #krate::unit_of_work::MapperRef<Self::Event>
    });
    let body = uow.at_last(quote!({ #body }));
    quote!(#signature #body)
}

/// `fn handle()`: calls the user's function with the unit of work, the contract and, when it
/// takes it, the envelope.
fn handle_fn(runtime: &Runtime, ident: &Ident, handler: &Handler<'_>, uow: Range) -> TokenStream {
    let krate = &runtime.krate;
    let uow_param = uow.respan(quote!(&'a #krate::UnitOfWork<Self::Event>));
    let uow_var = local("uow", uow.first);
    let event_var = local("event", Span::call_site());
    let envelope_var = local("envelope", Span::call_site());
    let (envelope_param, call) = if handler.envelope {
        (
            envelope_var.to_token_stream(),
            quote_spanned!(ident.span()=> #ident(#uow_var, #event_var, #envelope_var)),
        )
    } else {
        (
            quote!(_),
            quote_spanned!(ident.span()=> #ident(#uow_var, #event_var)),
        )
    };
    quote_spanned! {ident.span()=>
        fn handle<'a>(
            #uow_var: #uow_param,
            #event_var: Self::Contract,
            #envelope_param: &'a #krate::core::Envelope,
        ) -> impl ::core::future::Future<
            Output = ::core::result::Result<(), Self::Error>,
        > + ::core::marker::Send + 'a {
            #call
        }
    }
}

#[cfg(test)]
mod tests;
