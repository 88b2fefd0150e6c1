//! Y3 frames over TCP and QUIC (work in progress).
