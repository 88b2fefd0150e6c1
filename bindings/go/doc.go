// Package y3 is a pure-Go codec for Y3, YoMo's tag-length-value wire format.
//
//	+-----------+----------------+----------------------+
//	| tag (1 B) | length PVarInt | value (length bytes) |
//	+-----------+----------------+----------------------+
//	  0x80 node flag, 0x40 array flag, low 6 bits: key
//
// It makes the same accept/reject decisions and reports the same error kinds as the Rust
// core of this project and its Python binding, and it is byte-exact with the reference Go
// libraries (github.com/yomorun/y3-codec-golang v1.7.3 for the Golang dialect,
// github.com/yomorun/y3 v1.0.5 for NVarInt) without depending on them.
//
//   - Packet is a zero-copy view of one packet with typed accessors; Parse reads a header,
//     Decode reads exactly one packet and validates every header below it, Get pulls one
//     key path out of a buffer. None of them allocates.
//   - Observer is a streaming state machine that pulls subscribed key paths out of packets
//     arriving in chunks of any size, skipping everything else without copying it. Decode
//     and Get are the same machine fed everything at once.
//   - AppendInt32 and friends, BeginNode / NodeMark.End and the Item tree encode; an Item's
//     EncodedLen is exact.
//   - Marshal and Unmarshal map Go values with y3:"0x11" struct tags, as the reference
//     NewCodec(key).Marshal does.
//   - Errors with a wire meaning are *Error values with a stable Kind ("too_long",
//     "child_overflow", ...), an errors.Is sentinel per kind, and the numbers that explain
//     them. Limits (Limits.MaxPacketLen, Limits.MaxDepth) are checked on the wire before
//     anything is allocated or entered.
//
// Three dialects are supported: Golang (the default and the zero value), NVarInt and the
// opt-in Draft02 varint tags. A Config carries the dialect and the limits; the package-level
// functions use DefaultConfig.
package y3
