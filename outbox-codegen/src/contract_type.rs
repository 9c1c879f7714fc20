//! What makes typify's output a contract: the `IntegrationEvent` derive on the contract type,
//! and `Display` on string newtypes (the key is rendered with `ToString`).

use proc_macro2::Span;
use syn::{Attribute, Fields, Ident, Item, parse_quote};

use crate::config::CodegenConfig;
use outbox_core::schema::IndexEntry;

/// Adds `#[derive(<kernel>::IntegrationEvent)]` and its attribute (the producer's event type,
/// key and aggregate type, `consumed`) to the item named `title`, **after** typify's own
/// attributes: a derive helper may not come before the derive that introduces it. Returns
/// whether the item was found.
pub(crate) fn attach(
    file: &mut syn::File,
    title: &str,
    entry: &IndexEntry,
    config: &CodegenConfig,
) -> bool {
    let kernel: syn::Path = match syn::parse_str(config.kernel_path.trim_start_matches("::")) {
        Ok(path) => path,
        Err(_) => return false,
    };
    let kernel_text = config.kernel_path.trim_start_matches("::");
    let (name, aggregate) = (&entry.event_type, &entry.aggregate_type);
    let key = Ident::new(&entry.key_field, Span::call_site());
    let derive: Attribute = parse_quote!(#[derive(#kernel::IntegrationEvent)]);
    let contract: Attribute = parse_quote!(#[integration_event(
        name = #name, key = #key, aggregate = #aggregate, consumed, crate = #kernel_text
    )]);
    for item in &mut file.items {
        let attrs = match item {
            Item::Struct(item) if item.ident == title => &mut item.attrs,
            Item::Enum(item) if item.ident == title => &mut item.attrs,
            _ => continue,
        };
        attrs.push(derive);
        attrs.push(contract);
        return true;
    }
    false
}

/// `Display` for every tuple struct of one `String` (typify's constrained strings) that has
/// none, so that such a type can be a contract's key.
pub(crate) fn display_string_newtypes(file: &mut syn::File) {
    let has_display = |name: &Ident, items: &[Item]| {
        items.iter().any(|item| match item {
            Item::Impl(imp) => {
                let is_display = imp.trait_.as_ref().is_some_and(|(path, _)| {
                    path.segments.last().is_some_and(|s| s.ident == "Display")
                });
                let for_name = matches!(&*imp.self_ty, syn::Type::Path(p)
                    if p.path.segments.last().is_some_and(|s| &s.ident == name));
                is_display && for_name
            }
            _ => false,
        })
    };
    let mut added = Vec::new();
    for item in &file.items {
        let Item::Struct(item) = item else { continue };
        let Fields::Unnamed(fields) = &item.fields else {
            continue;
        };
        let is_string = fields.unnamed.len() == 1
            && fields.unnamed.iter().all(|f| {
                matches!(&f.ty, syn::Type::Path(p)
                    if p.path.segments.last().is_some_and(|s| s.ident == "String"))
            });
        if is_string && !has_display(&item.ident, &file.items) {
            let name = &item.ident;
            added.push(parse_quote! {
                impl ::std::fmt::Display for #name {
                    fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        ::std::fmt::Display::fmt(&self.0, f)
                    }
                }
            });
        }
    }
    file.items.extend(added);
}

/// `///Text` → `/// Text`: doc comments the way rustfmt users write them.
pub(crate) fn spaced_doc_comments(file: &mut syn::File) {
    struct Spacer;
    impl syn::visit_mut::VisitMut for Spacer {
        fn visit_attribute_mut(&mut self, attr: &mut Attribute) {
            if !attr.path().is_ident("doc") {
                return;
            }
            if let syn::Meta::NameValue(meta) = &mut attr.meta
                && let syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(text),
                    ..
                }) = &mut meta.value
            {
                let value = text.value();
                if !value.is_empty() && !value.starts_with([' ', '\n']) {
                    *text = syn::LitStr::new(&format!(" {value}"), text.span());
                }
            }
        }
    }
    syn::visit_mut::VisitMut::visit_file_mut(&mut Spacer, file);
}
