//! The typed records of the four cases, for the typed peers: one struct per case with a
//! field per key (`k1..kN`), in two shapes.
//!
//! - `Borrowed<'a>` (serde): strings borrowed from the input, as zero-copy serde decoders
//!   (serde_json, rmp-serde, postcard) allow. Field names are the JSON keys.
//! - `Owned` (prost + rkyv): protobuf field numbers are the keys; signed integers are
//!   `sint32`/`sint64` (zigzag, like Y3's signed varints), floats `float`/`double`.
//!
//! A tt-muncher turns each `kN = N: Kind` line into the right field type and attributes.

#![allow(missing_docs)]

use super::peers::{Field, ToScalar};
use crate::data::Scalar;

macro_rules! borrowed_struct {
    ([$($out:tt)*]) => {
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        pub struct Borrowed<'a> { $($out)* }
    };
    ([$($out:tt)*] $f:ident = $t:tt: Str, $($rest:tt)*) => {
        borrowed_struct!([$($out)* #[serde(borrow)] pub $f: &'a str,] $($rest)*);
    };
    ([$($out:tt)*] $f:ident = $t:tt: I32, $($rest:tt)*) => {
        borrowed_struct!([$($out)* pub $f: i32,] $($rest)*);
    };
    ([$($out:tt)*] $f:ident = $t:tt: U32, $($rest:tt)*) => {
        borrowed_struct!([$($out)* pub $f: u32,] $($rest)*);
    };
    ([$($out:tt)*] $f:ident = $t:tt: I64, $($rest:tt)*) => {
        borrowed_struct!([$($out)* pub $f: i64,] $($rest)*);
    };
    ([$($out:tt)*] $f:ident = $t:tt: U64, $($rest:tt)*) => {
        borrowed_struct!([$($out)* pub $f: u64,] $($rest)*);
    };
    ([$($out:tt)*] $f:ident = $t:tt: F32, $($rest:tt)*) => {
        borrowed_struct!([$($out)* pub $f: f32,] $($rest)*);
    };
    ([$($out:tt)*] $f:ident = $t:tt: F64, $($rest:tt)*) => {
        borrowed_struct!([$($out)* pub $f: f64,] $($rest)*);
    };
}

macro_rules! owned_struct {
    ([$($out:tt)*]) => {
        #[derive(Clone, PartialEq, prost::Message, rkyv::Archive, rkyv::Serialize)]
        pub struct Owned { $($out)* }
    };
    ([$($out:tt)*] $f:ident = $t:tt: Str, $($rest:tt)*) => {
        owned_struct!([$($out)* #[prost(string, tag = $t)] pub $f: String,] $($rest)*);
    };
    ([$($out:tt)*] $f:ident = $t:tt: I32, $($rest:tt)*) => {
        owned_struct!([$($out)* #[prost(sint32, tag = $t)] pub $f: i32,] $($rest)*);
    };
    ([$($out:tt)*] $f:ident = $t:tt: U32, $($rest:tt)*) => {
        owned_struct!([$($out)* #[prost(uint32, tag = $t)] pub $f: u32,] $($rest)*);
    };
    ([$($out:tt)*] $f:ident = $t:tt: I64, $($rest:tt)*) => {
        owned_struct!([$($out)* #[prost(sint64, tag = $t)] pub $f: i64,] $($rest)*);
    };
    ([$($out:tt)*] $f:ident = $t:tt: U64, $($rest:tt)*) => {
        owned_struct!([$($out)* #[prost(uint64, tag = $t)] pub $f: u64,] $($rest)*);
    };
    ([$($out:tt)*] $f:ident = $t:tt: F32, $($rest:tt)*) => {
        owned_struct!([$($out)* #[prost(float, tag = $t)] pub $f: f32,] $($rest)*);
    };
    ([$($out:tt)*] $f:ident = $t:tt: F64, $($rest:tt)*) => {
        owned_struct!([$($out)* #[prost(double, tag = $t)] pub $f: f64,] $($rest)*);
    };
}

/// One case: `case!(c63; k1 = 1: Str, ...)`.
macro_rules! case {
    ($module:ident; $($f:ident = $t:tt: $kind:ident),* $(,)?) => {
        pub mod $module {
            use super::*;

            borrowed_struct!([] $($f = $t: $kind,)*);
            owned_struct!([] $($f = $t: $kind,)*);

            impl Field for Borrowed<'_> {
                #[inline]
                fn field(&self, k: u32) -> Scalar {
                    match k {
                        $($t => self.$f.to_scalar(),)*
                        _ => Scalar::Missing,
                    }
                }
            }

            impl Field for Owned {
                #[inline]
                fn field(&self, k: u32) -> Scalar {
                    match k {
                        $($t => self.$f.to_scalar(),)*
                        _ => Scalar::Missing,
                    }
                }
            }

            impl Field for ArchivedOwned {
                #[inline]
                fn field(&self, k: u32) -> Scalar {
                    match k {
                        $($t => self.$f.to_scalar(),)*
                        _ => Scalar::Missing,
                    }
                }
            }

            impl Owned {
                /// The record of the data sets: every field from `value_for`.
                pub fn sample() -> Owned {
                    let mut o = Owned::default();
                    $(super::super::peers::FromScalar::set(&mut o.$f, crate::data::value_for($t));)*
                    o
                }

                /// The same record with strings borrowed from `self`.
                pub fn borrowed(&self) -> Borrowed<'_> {
                    Borrowed { $($f: super::super::peers::Lend::lend(&self.$f),)* }
                }
            }

            /// rkyv bytes of the record.
            pub fn rkyv_bytes(o: &Owned) -> anyhow::Result<rkyv::util::AlignedVec> {
                Ok(rkyv::to_bytes::<rkyv::rancor::Error>(o)?)
            }

            /// Checked access, then the field.
            #[inline]
            pub fn rkyv_field(bytes: &[u8], k: u32) -> Scalar {
                match rkyv::access::<ArchivedOwned, rkyv::rancor::Error>(bytes) {
                    Ok(a) => a.field(k),
                    Err(_) => Scalar::Missing,
                }
            }
        }
    };
}

case!(c03;
    k1 = 1: Str, k2 = 2: I32, k3 = 3: U32,
);

case!(c16;
    k1 = 1: Str, k2 = 2: I32, k3 = 3: U32, k4 = 4: I64, k5 = 5: U64, k6 = 6: F32, k7 = 7: F64,
    k8 = 8: Str, k9 = 9: I32, k10 = 10: U32, k11 = 11: I64, k12 = 12: U64, k13 = 13: F32,
    k14 = 14: F64, k15 = 15: Str, k16 = 16: I32,
);

case!(c32;
    k1 = 1: Str, k2 = 2: I32, k3 = 3: U32, k4 = 4: I64, k5 = 5: U64, k6 = 6: F32, k7 = 7: F64,
    k8 = 8: Str, k9 = 9: I32, k10 = 10: U32, k11 = 11: I64, k12 = 12: U64, k13 = 13: F32,
    k14 = 14: F64, k15 = 15: Str, k16 = 16: I32, k17 = 17: U32, k18 = 18: I64, k19 = 19: U64,
    k20 = 20: F32, k21 = 21: F64, k22 = 22: Str, k23 = 23: I32, k24 = 24: U32, k25 = 25: I64,
    k26 = 26: U64, k27 = 27: F32, k28 = 28: F64, k29 = 29: Str, k30 = 30: I32, k31 = 31: U32,
    k32 = 32: I64,
);

case!(c63;
    k1 = 1: Str, k2 = 2: I32, k3 = 3: U32, k4 = 4: I64, k5 = 5: U64, k6 = 6: F32, k7 = 7: F64,
    k8 = 8: Str, k9 = 9: I32, k10 = 10: U32, k11 = 11: I64, k12 = 12: U64, k13 = 13: F32,
    k14 = 14: F64, k15 = 15: Str, k16 = 16: I32, k17 = 17: U32, k18 = 18: I64, k19 = 19: U64,
    k20 = 20: F32, k21 = 21: F64, k22 = 22: Str, k23 = 23: I32, k24 = 24: U32, k25 = 25: I64,
    k26 = 26: U64, k27 = 27: F32, k28 = 28: F64, k29 = 29: Str, k30 = 30: I32, k31 = 31: U32,
    k32 = 32: I64, k33 = 33: U64, k34 = 34: F32, k35 = 35: F64, k36 = 36: Str, k37 = 37: I32,
    k38 = 38: U32, k39 = 39: I64, k40 = 40: U64, k41 = 41: F32, k42 = 42: F64, k43 = 43: Str,
    k44 = 44: I32, k45 = 45: U32, k46 = 46: I64, k47 = 47: U64, k48 = 48: F32, k49 = 49: F64,
    k50 = 50: Str, k51 = 51: I32, k52 = 52: U32, k53 = 53: I64, k54 = 54: U64, k55 = 55: F32,
    k56 = 56: F64, k57 = 57: Str, k58 = 58: I32, k59 = 59: U32, k60 = 60: I64, k61 = 61: U64,
    k62 = 62: F32, k63 = 63: F64,
);
