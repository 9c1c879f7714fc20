//! `#[derive(DomainEvent)]`.
//!
//! [`expand`] validates a domain event enum and generates its `DomainEvent` impl: one `match`
//! arm per variant, without a wildcard, so the mapping is exhaustive twice over: the derive
//! rejects a variant that does not say what it becomes, and the compiler rejects a `match`
//! that misses one. Every problem is reported on the tokens that cause it, and all problems
//! are reported at once. When there are problems, [`derive()`] emits them together with a stub
//! impl (see [`fallback`]) so that one mistake does not cascade into "`DomainEvent` is not
//! implemented" errors wherever the enum is used.
//!
//! The generated code names everything by absolute path (`::outbox_kernel::...`, or the path
//! given with `#[domain_event(crate = "…")]` on the enum). Its locals
//! (`out`, `payload`) have mixed-site hygiene, so a mapping function named like them still
//! resolves to the user's function.
//!
//! Decisions:
//! - `contract` needs a newtype variant: the payload is converted with
//!   `From<&Payload>`, the one reviewed place where domain fields become contract fields.
//!   Unit, struct and other tuple variants map with `map = …`, which receives the whole event.
//! - `contract` and `map` on one variant are rejected: a mapping function can emit any
//!   number of contracts itself, and one place per variant keeps the mapping reviewable.
//! - Generic enums are accepted (each type parameter gets `Send + 'static`, as the trait
//!   requires); lifetime parameters are rejected, since a domain event is `'static`.

mod attr;
mod fate;
mod shape;

use proc_macro2::{Ident, Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, GenericParam, Variant};

use self::fate::Fate;
use crate::runtime::{Core, Runtime};
use crate::shared::Errors;

/// Expands the derive: the impl, or the errors and a stub impl.
pub fn derive(input: &DeriveInput) -> TokenStream {
    expand(input).unwrap_or_else(|error| fallback(input, &error))
}

/// Validates `input` and generates its `DomainEvent` impl.
///
/// # Errors
/// Every problem found, each on its own span (combined into one [`syn::Error`]).
pub fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let mut errors = Errors::default();
    let variants = shape::variants(input, &mut errors);
    shape::check_generics(input, &mut errors);
    let mut fates = Vec::new();
    let mut krate = None;
    if let Some(variants) = variants {
        krate = attr::parse_enum(input, &mut errors);
        shape::check_misplaced(input, variants, &mut errors);
        for variant in variants {
            let fate = attr::parse(variant, &mut errors)
                .and_then(|attr| fate::fate(variant, attr, &mut errors));
            fates.extend(fate.map(|fate| (variant, fate)));
        }
    }
    errors.finish()?;
    Ok(generate(input, &Runtime::of(krate.as_ref()), &fates))
}

/// The output when [`expand`] fails: the errors, plus a stub `DomainEvent` impl (no
/// contracts, empty name, not local) so that code using the type still type-checks and only
/// the real mistakes are reported. The stub names outbox-kernel by the `crate = "…"` override
/// when one can be read.
///
/// No stub is emitted for unions and types with lifetime parameters: they can never be
/// domain events, and a stub for them would only add errors of its own.
pub fn fallback(input: &DeriveInput, error: &syn::Error) -> TokenStream {
    let errors = error.to_compile_error();
    let borrows = input
        .generics
        .params
        .iter()
        .any(|param| matches!(param, GenericParam::Lifetime(_)));
    if matches!(input.data, Data::Union(_)) || borrows {
        return errors;
    }
    let ident = &input.ident;
    let generics = shape::bounded(&input.generics);
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let krate = Runtime::lenient::<Core>(&input.attrs, attr::ATTRIBUTE).krate;
    quote! {
        #errors
        #[automatically_derived]
        impl #impl_generics #krate::mapping::DomainEvent for #ident #ty_generics #where_clause {
            fn map_contracts(
                &self,
                _: &mut #krate::mapping::ContractSink<'_>,
            ) -> ::core::result::Result<(), #krate::mapping::MapError> {
                ::core::result::Result::Ok(())
            }
            fn event_name(&self) -> &'static str {
                ""
            }
            fn is_local(&self) -> bool {
                false
            }
        }
    }
}

/// A local variable of the generated code: mixed-site hygiene (user tokens cannot see or
/// shadow it), located at `at` so that type errors involving it point there.
fn local(name: &str, at: Span) -> Ident {
    Ident::new(name, Span::mixed_site().located_at(at))
}

/// The `match` arm of `map_contracts` for one variant.
///
/// Each call is spanned on the contract or function the user wrote, so that a contract that
/// is not an `IntegrationEvent` or lacks the `From` impl, or a function with the wrong
/// signature, is reported there.
fn map_arm(variant: &Variant, fate: &Fate<'_>) -> TokenStream {
    let name = &variant.ident;
    match fate {
        Fate::Contracts { payload, contracts } => {
            let emits = contracts.iter().map(|contract| {
                let span = contract.span();
                let (out, payload_var) = (local("out", span), local("payload", span));
                quote_spanned! {span=>
                    #out.emit(&<#contract as ::core::convert::From<&#payload>>::from(#payload_var))?;
                }
            });
            let payload_var = local("payload", Span::call_site());
            quote! {
                Self::#name(#payload_var) => {
                    #(#emits)*
                    ::core::result::Result::Ok(())
                }
            }
        }
        Fate::Map { function, newtype } => {
            let span = function.span();
            let out = local("out", span);
            if *newtype {
                let payload_var = local("payload", span);
                let call = quote_spanned!(span=> #function(#payload_var, #out));
                quote!(Self::#name(#payload_var) => #call,)
            } else {
                let call = quote_spanned!(span=> #function(self, #out));
                quote!(Self::#name { .. } => #call,)
            }
        }
        Fate::Local => quote!(Self::#name { .. } => ::core::result::Result::Ok(()),),
    }
}

fn generate(input: &DeriveInput, runtime: &Runtime, fates: &[(&Variant, Fate<'_>)]) -> TokenStream {
    let krate = &runtime.krate;
    let ident = &input.ident;
    let generics = shape::bounded(&input.generics);
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    // Only local variants (or none): the sink is not used.
    let out = if fates.iter().all(|(_, fate)| matches!(fate, Fate::Local)) {
        quote!(_)
    } else {
        local("out", Span::call_site()).into_token_stream()
    };

    let (map_contracts, event_name) = if fates.is_empty() {
        (quote!(match *self {}), quote!(match *self {}))
    } else {
        let arms = fates.iter().map(|(variant, fate)| map_arm(variant, fate));
        let names = fates.iter().map(|(variant, _)| {
            let (name, text) = (&variant.ident, variant.ident.unraw().to_string());
            quote!(Self::#name { .. } => #text,)
        });
        (
            quote!(match self { #(#arms)* }),
            quote!(match self { #(#names)* }),
        )
    };
    let locals: Vec<TokenStream> = fates
        .iter()
        .filter(|(_, fate)| matches!(fate, Fate::Local))
        .map(|(variant, _)| {
            let name = &variant.ident;
            quote!(Self::#name { .. })
        })
        .collect();
    let is_local = if locals.is_empty() {
        quote!(false)
    } else {
        quote!(::core::matches!(self, #(#locals)|*))
    };

    quote! {
        #[automatically_derived]
        impl #impl_generics #krate::mapping::DomainEvent for #ident #ty_generics #where_clause {
            fn map_contracts(
                &self,
                #out: &mut #krate::mapping::ContractSink<'_>,
            ) -> ::core::result::Result<(), #krate::mapping::MapError> {
                #map_contracts
            }
            fn event_name(&self) -> &'static str {
                #event_name
            }
            fn is_local(&self) -> bool {
                #is_local
            }
        }
    }
}

#[cfg(test)]
mod tests;
