//! `#[derive(IntegrationEvent)]`.
//!
//! [`expand`] validates the input and generates the `IntegrationEvent` impl plus the
//! `inventory` registration of the contract. Every problem is reported on the tokens that
//! cause it, and all problems are reported at once. When there are problems, [`derive()`] emits
//! them together with a stub impl (see [`fallback`]) so that one mistake in the attribute does
//! not cascade into "`IntegrationEvent` is not implemented" errors wherever the type is used.
//!
//! Generated code names everything by absolute path (`::outbox_kernel::...`, or the path given
//! with `crate = "…"`) and reaches `inventory` and `schemars` through outbox-kernel's versioned
//! support module (see [`crate::runtime`]), so contract crates need neither as a direct
//! dependency.

mod attr;
mod body;
mod docs;
mod naming;

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput};

use self::body::KeyAccess;
use crate::runtime::{Core, Runtime};
use crate::shared::Errors;

/// Expands the derive: the impl and registration, or the errors and a stub impl.
pub fn derive(input: &DeriveInput) -> TokenStream {
    expand(input).unwrap_or_else(|error| fallback(input, &error))
}

/// Validates `input` and generates the `IntegrationEvent` impl and the contract's
/// registration.
///
/// # Errors
/// Every problem found, each on its own span (combined into one [`syn::Error`]).
pub fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let ident = &input.ident;
    let mut errors = Errors::default();

    let attr = errors.handle(attr::parse(input));
    let options = attr.as_ref().map(|attr| &attr.options);
    if let Some(attr) = &attr {
        if attr.options.name.is_none() {
            errors.push(syn::Error::new_spanned(
                attr.first,
                "missing `name = \"...\"`: the versioned event type of the contract, e.g. \
                 `name = \"bookstore.ordering.order-placed.v1\"`",
            ));
        }
        if attr.options.key.is_none() {
            errors.push(syn::Error::new_spanned(
                attr.first,
                "missing `key = <field>`: the field that identifies the aggregate the event is \
                 about, e.g. `key = order_id`",
            ));
        }
    }
    let event_type = options
        .and_then(|o| o.name.as_ref())
        .and_then(|name| errors.handle(naming::event_type(&name.0)));
    let key = options.and_then(|o| o.key.as_ref()).map(|key| &key.0);
    let aggregate = match (options.and_then(|o| o.aggregate.as_ref()), key) {
        (Some(aggregate), _) => errors.handle(naming::aggregate_override(&aggregate.0)),
        (None, Some(key)) => errors.handle(naming::default_aggregate_checked(
            &key.unraw().to_string(),
            key.span(),
        )),
        (None, None) => None,
    };

    body::check_generics(ident, &input.generics, &mut errors);
    let body = body::body(input, &mut errors);
    let access = match (&body, key) {
        (Some(body), Some(key)) => errors.handle(body.key(ident, key)),
        _ => None,
    };
    errors.finish()?;

    match (event_type, key, aggregate, access) {
        (Some(event_type), Some(key), Some(aggregate), Some(access)) => Ok(generate(
            input,
            &Runtime::of(options.and_then(|o| o.krate.as_ref())),
            &Contract {
                event_type,
                aggregate,
                key_field: key.unraw().to_string(),
                access,
                description: docs::description(&input.attrs),
                registered: !options.is_some_and(|o| o.consumed.0),
            },
        )),
        // Each missing part was reported above; this arm is not reached.
        _ => Err(syn::Error::new_spanned(
            ident,
            "internal error of #[derive(IntegrationEvent)]: invalid input without a diagnostic",
        )),
    }
}

/// The output when [`expand`] fails: the errors, plus a stub `IntegrationEvent` impl (empty
/// names, version 0, empty aggregate id) so that code using the type still type-checks and
/// only the real mistakes are reported. The stub names outbox-kernel by the `crate = "…"`
/// override when one can be read.
///
/// No stub is emitted for unions and generic types: they can never be contracts, and a stub
/// for them would only add errors of its own (unmet supertraits, `T: 'static`, ...).
pub fn fallback(input: &DeriveInput, error: &syn::Error) -> TokenStream {
    let errors = error.to_compile_error();
    if matches!(input.data, Data::Union(_)) || !input.generics.params.is_empty() {
        return errors;
    }
    let ident = &input.ident;
    let where_clause = &input.generics.where_clause;
    let krate = Runtime::lenient::<Core>(&input.attrs, attr::ATTRIBUTE).krate;
    quote! {
        #errors
        #[automatically_derived]
        impl #krate::IntegrationEvent for #ident #where_clause {
            const EVENT_TYPE: &'static str = "";
            const NAME: &'static str = "";
            const VERSION: u32 = 0;
            const AGGREGATE_TYPE: &'static str = "";
            const KEY_FIELD: &'static str = "";
            fn aggregate_id(&self) -> ::std::string::String {
                ::std::string::String::new()
            }
        }
    }
}

/// A validated contract.
struct Contract<'a> {
    event_type: naming::EventTypeParts,
    aggregate: String,
    /// The key field's name, without `r#`.
    key_field: String,
    access: KeyAccess<'a>,
    description: docs::Description,
    /// Whether the contract is registered for export (`false` with `consumed`).
    registered: bool,
}

fn generate(input: &DeriveInput, runtime: &Runtime, contract: &Contract<'_>) -> TokenStream {
    let Runtime { krate, private } = runtime;
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let Contract {
        event_type,
        aggregate,
        key_field,
        access,
        description,
        registered,
    } = contract;
    let (full, name) = (&event_type.full, &event_type.name);
    let version = proc_macro2::Literal::u32_unsuffixed(event_type.version);
    let rust_type = ident.unraw().to_string();

    // `<KeyType as ToString>` carries the span of the key field's type: a key that is not
    // `Display` is reported on that type.
    let to_string =
        |ty: &syn::Type| quote_spanned!(ty.span()=> <#ty as ::std::string::ToString>::to_string);
    let aggregate_id = match access {
        KeyAccess::Struct { field, ty } => {
            let to_string = to_string(ty);
            quote!(#to_string(&self.#field))
        }
        KeyAccess::Enum { variants } if variants.is_empty() => quote!(match *self {}),
        KeyAccess::Enum { variants } => {
            let arms = variants.iter().map(|(variant, field, ty)| {
                let to_string = to_string(ty);
                quote!(Self::#variant { #field, .. } => #to_string(#field),)
            });
            quote!(match self { #(#arms)* })
        }
    };

    let registration = registered.then(|| {
        quote! {
            const REGISTRATION: #krate::ContractRegistration = #krate::ContractRegistration {
                event_type: #full,
                name: #name,
                version: #version,
                aggregate_type: #aggregate,
                key_field: #key_field,
                rust_type: ::core::concat!(::core::module_path!(), "::", #rust_type),
                description: #description,
                schema: #private::schema_for::<#ident #ty_generics>,
            };
            #private::inventory::submit!(REGISTRATION);
        }
    });

    quote! {
        const _: () = {
            #[automatically_derived]
            impl #impl_generics #krate::IntegrationEvent for #ident #ty_generics #where_clause {
                const EVENT_TYPE: &'static str = #full;
                const NAME: &'static str = #name;
                const VERSION: u32 = #version;
                const AGGREGATE_TYPE: &'static str = #aggregate;
                const KEY_FIELD: &'static str = #key_field;
                fn aggregate_id(&self) -> ::std::string::String {
                    #aggregate_id
                }
            }

            #registration
        };
    }
}

#[cfg(test)]
mod tests;
