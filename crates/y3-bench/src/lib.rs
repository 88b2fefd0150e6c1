//! The y3 benchmark lab (work in progress).
