//! Derive macros for typed Y3 structs (filled in by the typed-struct work).
