//! `#[derive(Message)]` for typed Y3 structs; use it as `y3::Message` (feature `derive` of
//! the `y3` crate), which also re-exports the trait.
//!
//! The derive implements `y3::typed::Message`, `y3::typed::FieldValue` and
//! `y3::typed::Element` for a struct with named fields, so that it can be marshalled, be a
//! field of another message, and be an element of a `Vec`. Each field names its one-byte
//! key with `#[y3(tag = ...)]` (a hex or decimal integer literal, `0x00..=0x3f`); a field
//! marked `#[y3(skip)]` is neither written nor read and keeps its `Default`. The struct
//! must implement `Default`, which decoding starts from.
//!
//! ```text
//! struct NoiseData { noise: f32 @0x11, time: i64 @0x12, from: String @0x13 } under 0x10:
//!
//! 90 17 | 11 02 42 20 | 12 06 ae c8 bb ba 80 00 | 13 09 31 32 37 2e 30 2e 30 2e 31
//! node    fields in declaration order; empty strings and bytes are left out
//! ```
//!
//! Tags above `0x3f` are a compile error rather than a runtime one: the `golang` and
//! `nvarint` dialects have six bits for the key, and a typed struct is meant to encode in
//! every dialect. (Wide `draft02` keys remain available through `y3::Item`.)
//!
//! # Examples
//!
//! (Compiled and run as a doctest of `y3::typed`, where the `y3` crate is in scope; the
//! compile errors listed below are checked there too, as `compile_fail` doctests.)
//!
//! ```text
//! #[derive(Debug, Default, PartialEq, y3::Message)]
//! struct NoiseData {
//!     #[y3(tag = 0x11)]
//!     noise: f32,
//!     #[y3(tag = 0x12)]
//!     time: i64,
//!     #[y3(tag = 0x13)]
//!     from: String,
//!     #[y3(skip)]
//!     seen: bool,
//! }
//!
//! let from = "127.0.0.1".into();
//! let data = NoiseData { noise: 40.0, time: 1600000000000, from, seen: true };
//! let bytes = y3::marshal(0x10, &data)?;
//! assert_eq!(&bytes[..4], [0x81, 0x19, 0x90, 0x17]);
//! let back: NoiseData = y3::unmarshal(&bytes, 0x10)?.unwrap();
//! assert_eq!(back, NoiseData { seen: false, ..data });
//! ```
//!
//! # Compile errors
//!
//! With a span on the offending token, for: a field without `#[y3(tag = ...)]` or
//! `#[y3(skip)]`; two fields with the same tag; a tag above `0x3f`; a tag that is not an
//! integer literal; `tag` together with `skip`; an unknown `y3` option; `#[y3]` on the
//! struct itself; enums, unions, tuple and unit structs.
#![warn(missing_docs)]

use proc_macro::TokenStream;
use proc_macro2::{Literal, Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{parse_macro_input, Data, DeriveInput, Error, Fields, Ident, LitInt, Type};

/// Largest key of a one-byte tag (six bits).
const MAX_TAG: u32 = 0x3f;

/// Derives `y3::typed::Message`, `FieldValue` and `Element` for a struct with named fields.
///
/// Field attributes: `#[y3(tag = 0x11)]` (required, `0x00..=0x3f`, unique) or
/// `#[y3(skip)]`. See the crate docs for the wire layout and the errors.
#[proc_macro_derive(Message, attributes(y3))]
pub fn derive_message(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand(&input)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

/// A field that is written: its name, type and key.
struct Tagged<'a> {
    ident: &'a Ident,
    ty: &'a Type,
    tag: u32,
}

fn expand(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let fields = match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Named(named) => &named.named,
            Fields::Unnamed(_) | Fields::Unit => {
                return Err(Error::new(
                    input.ident.span(),
                    "y3::Message needs a struct with named fields (the tags go on the fields)",
                ))
            }
        },
        Data::Enum(data) => {
            return Err(Error::new(
                data.enum_token.span,
                "y3::Message cannot be derived for an enum: only structs with named fields",
            ))
        }
        Data::Union(data) => {
            return Err(Error::new(
                data.union_token.span,
                "y3::Message cannot be derived for a union: only structs with named fields",
            ))
        }
    };
    if let Some(attr) = input.attrs.iter().find(|a| a.path().is_ident("y3")) {
        return Err(Error::new_spanned(
            attr,
            "#[y3(...)] goes on the fields: `tag = 0x11` or `skip`",
        ));
    }

    // Collect every problem, not just the first, as rustc does.
    let mut errors: Option<Error> = None;
    let mut push = |e: Error| match &mut errors {
        Some(all) => all.combine(e),
        None => errors = Some(e),
    };
    let mut tagged: Vec<Tagged<'_>> = Vec::new();
    for field in fields {
        // Named fields always have an ident.
        let Some(ident) = field.ident.as_ref() else {
            continue;
        };
        match field_tag(field) {
            Ok(Some((tag, span))) => {
                if let Some(first) = tagged.iter().find(|t| t.tag == tag) {
                    push(Error::new(
                        span,
                        format!(
                            "duplicate tag {tag:#04x}: field `{}` already uses it",
                            first.ident
                        ),
                    ));
                }
                tagged.push(Tagged {
                    ident,
                    ty: &field.ty,
                    tag,
                });
            }
            Ok(None) => {}
            Err(e) => push(e),
        }
    }
    if let Some(errors) = errors {
        return Err(errors);
    }
    Ok(generate(input, &tagged))
}

/// The field's key, or `None` for `#[y3(skip)]`.
fn field_tag(field: &syn::Field) -> syn::Result<Option<(u32, Span)>> {
    let mut tag: Option<(u32, Span)> = None;
    let mut skip: Option<Span> = None;
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("y3")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("tag") {
                let lit: LitInt = meta.value()?.parse()?;
                let value: u32 = lit
                    .base10_parse()
                    .map_err(|_| Error::new(lit.span(), "tag must be an integer in 0x00..=0x3f"))?;
                if value > MAX_TAG {
                    return Err(Error::new(
                        lit.span(),
                        format!(
                            "tag {value:#04x} does not fit a one-byte Y3 tag: keys are \
                             0x00..=0x3f (the top two bits are the node and array flags)"
                        ),
                    ));
                }
                if tag.is_some() {
                    return Err(Error::new(lit.span(), "tag given twice"));
                }
                tag = Some((value, lit.span()));
                Ok(())
            } else if meta.path.is_ident("skip") {
                skip = Some(meta.path.span());
                Ok(())
            } else {
                Err(meta.error("unknown y3 attribute: expected `tag = <int>` or `skip`"))
            }
        })?;
    }
    match (tag, skip) {
        (Some(_), Some(span)) => Err(Error::new(span, "a skipped field takes no tag")),
        (Some(tag), None) => Ok(Some(tag)),
        (None, Some(_)) => Ok(None),
        (None, None) => Err(Error::new(
            field.span(),
            format!(
                "field `{}` needs #[y3(tag = 0x..)] (a key in 0x00..=0x3f) or #[y3(skip)]",
                field
                    .ident
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            ),
        )),
    }
}

fn generate(input: &DeriveInput, fields: &[Tagged<'_>]) -> TokenStream2 {
    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();

    // Generic structs need their field types to be values and themselves to be `Default`;
    // concrete ones get no bounds, so that recursive types (`Vec<Self>`) do not ask the
    // compiler to prove themselves.
    let mut where_clause = where_clause.cloned();
    if !input.generics.params.is_empty() {
        let clause = where_clause.get_or_insert_with(|| syn::WhereClause {
            where_token: Default::default(),
            predicates: Default::default(),
        });
        let name = &input.ident;
        clause
            .predicates
            .push(syn::parse_quote!(#name #ty_generics: ::core::default::Default));
        for f in fields {
            let ty = f.ty;
            clause
                .predicates
                .push(syn::parse_quote!(#ty: ::y3::typed::FieldValue));
        }
    }

    let len = fields.iter().map(|f| {
        let (ident, tag) = (f.ident, Literal::u32_suffixed(f.tag));
        quote_spanned!(f.ty.span()=> + ::y3::typed::field_len(#tag, &self.#ident, dialect))
    });
    let encode = fields.iter().map(|f| {
        let (ident, tag) = (f.ident, Literal::u32_suffixed(f.tag));
        quote_spanned!(f.ty.span()=> ::y3::typed::encode_field(#tag, &self.#ident, dialect, buf)?;)
    });
    let merge = fields.iter().map(|f| {
        let (ident, tag) = (f.ident, Literal::u32_suffixed(f.tag));
        quote_spanned!(f.ty.span()=> #tag => self.#ident = ::y3::typed::decode_field(field)?,)
    });

    quote! {
        #[automatically_derived]
        impl #impl_generics ::y3::typed::Message for #name #ty_generics #where_clause {
            #[inline]
            #[allow(unused_variables)]
            fn fields_len(&self, dialect: ::y3::Dialect) -> usize {
                0 #(#len)*
            }

            #[inline(always)]
            #[allow(unused_variables)]
            fn encode_fields(
                &self,
                dialect: ::y3::Dialect,
                buf: &mut impl ::y3::typed::__private::BufMut,
            ) -> ::core::result::Result<(), ::y3::EncodeError> {
                #(#encode)*
                ::core::result::Result::Ok(())
            }

            #[inline]
            #[allow(clippy::single_match)]
            fn merge_field(
                &mut self,
                field: &::y3::Packet<'_>,
            ) -> ::core::result::Result<(), ::y3::DecodeError> {
                match field.id() {
                    #(#merge)*
                    _ => {}
                }
                ::core::result::Result::Ok(())
            }
        }

        #[automatically_derived]
        impl #impl_generics ::y3::typed::FieldValue for #name #ty_generics #where_clause {
            const SHAPE: ::y3::typed::Shape = ::y3::typed::Shape::Node;

            #[inline]
            fn value_len(&self, dialect: ::y3::Dialect) -> usize {
                <Self as ::y3::typed::Message>::fields_len(self, dialect)
            }

            #[inline]
            fn encode_value(
                &self,
                dialect: ::y3::Dialect,
                buf: &mut impl ::y3::typed::__private::BufMut,
            ) -> ::core::result::Result<(), ::y3::EncodeError> {
                <Self as ::y3::typed::Message>::encode_fields(self, dialect, buf)
            }

            #[inline]
            fn decode_value(
                packet: &::y3::Packet<'_>,
            ) -> ::core::result::Result<Self, ::y3::DecodeError> {
                <Self as ::y3::typed::Message>::from_packet(packet)
            }
        }

        #[automatically_derived]
        impl #impl_generics ::y3::typed::Element for #name #ty_generics #where_clause {}
    }
}
