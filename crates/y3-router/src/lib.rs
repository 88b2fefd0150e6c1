//! The y3 router (work in progress).
