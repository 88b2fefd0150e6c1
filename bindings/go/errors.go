package y3

import (
	"fmt"
	"reflect"
)

// Kind is the stable snake_case name of an error. The same input produces the same Kind in
// the Rust core, this package and the Python binding; messages are for humans and may change.
type Kind string

// Decode error kinds: why bytes could not be read as Y3.
const (
	// KindUnexpectedEnd: the input ended inside a packet. Field: Needed.
	KindUnexpectedEnd Kind = "unexpected_end"
	// KindTooLong: a declared length exceeds Limits.MaxPacketLen (decode, fields Declared
	// and Limit) or a value is longer than a signed 32-bit length (encode, fields Len and Limit).
	KindTooLong Kind = "too_long"
	// KindTooDeep: nodes nested deeper than Limits.MaxDepth. Field: Limit.
	KindTooDeep Kind = "too_deep"
	// KindNegativeLength: a length field decoded to a negative number. Field: Declared.
	KindNegativeLength Kind = "negative_length"
	// KindVarintOverflow: a varint does not fit its type or is longer than allowed.
	// Fields: Len, Bits.
	KindVarintOverflow Kind = "varint_overflow"
	// KindVarintUnterminated: a PVarInt value ends with its continuation bit set. Field: Len.
	KindVarintUnterminated Kind = "varint_unterminated"
	// KindChildOverflow: a child declares more bytes than its node has left.
	// Fields: Declared, Available.
	KindChildOverflow Kind = "child_overflow"
	// KindTruncatedHeader: a child's header runs past the end of its node. Field: Available.
	KindTruncatedHeader Kind = "truncated_header"
	// KindInvalidTag: a tag the dialect cannot carry (decode: the raw tag byte in Tag;
	// encode: the id in Tag and the dialect's largest id in Max).
	KindInvalidTag Kind = "invalid_tag"
	// KindInvalidUTF8: a string value is not UTF-8. Field: ValidUpTo.
	KindInvalidUTF8 Kind = "invalid_utf8"
	// KindInvalidLength: a value length its type cannot have. Fields: Len, Min, Max.
	KindInvalidLength Kind = "invalid_length"
	// KindInvalidBool: a bool value other than 0 or 1. Field: Value.
	KindInvalidBool Kind = "invalid_bool"
	// KindWrongType: a node read as a scalar or the children of a primitive.
	// Fields: Expected ("node", "primitive"), Tag (the key).
	KindWrongType Kind = "wrong_type"
	// KindWrongCount: a fixed-size collection got another number of elements.
	// Fields: ExpectedCount, Found.
	KindWrongCount Kind = "wrong_count"
	// KindTrailingBytes: bytes follow the packet (or the varint in a value). Field: Count.
	KindTrailingBytes Kind = "trailing_bytes"
)

// Encode error kinds (KindInvalidTag and KindTooLong are shared with decoding).
const (
	// KindReservedTag: a Marshal key in 0x01..0x0f (reserved for signals). Field: Tag.
	KindReservedTag Kind = "reserved_tag"
	// KindBufferTooSmall: a fixed destination has no room. Fields: Required, Remaining.
	KindBufferTooSmall Kind = "buffer_too_small"
)

// Path error kinds: observer subscriptions that cannot be served.
const (
	// KindEmptyPath: a key path with no keys.
	KindEmptyPath Kind = "empty_path"
	// KindPathTooDeep: a path longer than MaxPathDepth. Fields: Len, Max.
	KindPathTooDeep Kind = "path_too_deep"
	// KindPathCount: no paths, or more than MaxSubscriptions. Fields: Count, Max.
	KindPathCount Kind = "path_count"
	// KindPathOverlap: one path is a prefix of (or equal to) another. Fields: Shorter, Longer.
	KindPathOverlap Kind = "path_overlap"
	// KindPathSyntax: a path string is not "0x10/0x11"-style keys. Field: At (byte offset).
	KindPathSyntax Kind = "path_syntax"
)

// Op says which side of the codec produced an Error.
type Op uint8

const (
	// OpDecode: reading bytes.
	OpDecode Op = iota
	// OpEncode: writing bytes.
	OpEncode
	// OpPath: configuring an observer.
	OpPath
)

func (o Op) String() string {
	switch o {
	case OpEncode:
		return "encode"
	case OpPath:
		return "path"
	default:
		return "decode"
	}
}

// Error is every error of this package that has a stable Kind. Only the numeric fields
// documented for its Kind are set; the rest are zero.
//
// Use errors.Is with the Err* sentinels to test for a kind, or errors.As to read the numbers:
//
//	var e *y3.Error
//	if errors.As(err, &e) && e.Kind == y3.KindTooLong { log.Print(e.Declared, e.Limit) }
type Error struct {
	Kind Kind
	Op   Op

	Needed        uint64 // unexpected_end
	Declared      int64  // too_long, negative_length, child_overflow
	Limit         uint64 // too_long, too_deep
	Available     uint64 // child_overflow, truncated_header
	Len           uint64 // varint_overflow, varint_unterminated, invalid_length, too_long (encode), path_too_deep
	Min, Max      uint64 // invalid_length; Max also for invalid_tag (encode), path_too_deep, path_count
	Bits          uint32 // varint_overflow
	Tag           uint32 // invalid_tag, reserved_tag, wrong_type
	ValidUpTo     uint64 // invalid_utf8
	Value         int64  // invalid_bool
	Expected      string // wrong_type: "node" or "primitive"
	ExpectedCount uint64 // wrong_count
	Found         uint64 // wrong_count
	Count         uint64 // trailing_bytes, path_count
	Required      uint64 // buffer_too_small
	Remaining     uint64 // buffer_too_small
	At            int    // path_syntax
	Shorter       int    // path_overlap
	Longer        int    // path_overlap
}

// Error implements error.
func (e *Error) Error() string {
	var msg string
	switch e.Kind {
	case KindUnexpectedEnd:
		msg = fmt.Sprintf("unexpected end of input: needed %d more bytes", e.Needed)
	case KindTooLong:
		if e.Op == OpEncode {
			msg = fmt.Sprintf("value length %d exceeds %d", e.Len, e.Limit)
		} else {
			msg = fmt.Sprintf("declared length %d exceeds limit %d", e.Declared, e.Limit)
		}
	case KindTooDeep:
		msg = fmt.Sprintf("nesting depth exceeds limit %d", e.Limit)
	case KindNegativeLength:
		msg = fmt.Sprintf("negative length %d", e.Declared)
	case KindVarintOverflow:
		msg = fmt.Sprintf("varint of %d bytes overflows %d bits", e.Len, e.Bits)
	case KindVarintUnterminated:
		msg = fmt.Sprintf("varint in a %d-byte value has no terminating byte", e.Len)
	case KindChildOverflow:
		msg = fmt.Sprintf("child length %d overflows its node (%d bytes left)", e.Declared, e.Available)
	case KindTruncatedHeader:
		msg = fmt.Sprintf("child header truncated by the end of its node (%d bytes left)", e.Available)
	case KindInvalidTag:
		if e.Op == OpEncode {
			msg = fmt.Sprintf("tag 0x%02x exceeds the dialect's maximum 0x%02x", e.Tag, e.Max)
		} else {
			msg = fmt.Sprintf("invalid tag 0x%02x", e.Tag)
		}
	case KindInvalidUTF8:
		msg = fmt.Sprintf("invalid utf-8 after %d bytes", e.ValidUpTo)
	case KindInvalidLength:
		msg = fmt.Sprintf("value length %d outside %d..=%d", e.Len, e.Min, e.Max)
	case KindInvalidBool:
		msg = fmt.Sprintf("bool value %d is neither 0 nor 1", e.Value)
	case KindWrongType:
		msg = fmt.Sprintf("expected %s, found tag 0x%02x", e.Expected, e.Tag)
	case KindWrongCount:
		msg = fmt.Sprintf("expected %d elements, found %d", e.ExpectedCount, e.Found)
	case KindTrailingBytes:
		msg = fmt.Sprintf("%d trailing bytes after the packet", e.Count)
	case KindReservedTag:
		msg = fmt.Sprintf("tag 0x%02x is reserved", e.Tag)
	case KindBufferTooSmall:
		msg = fmt.Sprintf("buffer too small: required %d, remaining %d", e.Required, e.Remaining)
	case KindEmptyPath:
		msg = "empty key path"
	case KindPathTooDeep:
		msg = fmt.Sprintf("key path of %d keys exceeds %d", e.Len, e.Max)
	case KindPathCount:
		msg = fmt.Sprintf("%d subscriptions, expected 1..=%d", e.Count, e.Max)
	case KindPathOverlap:
		msg = fmt.Sprintf("path %d is a prefix of path %d", e.Shorter, e.Longer)
	case KindPathSyntax:
		msg = fmt.Sprintf("invalid key in path at byte %d", e.At)
	default:
		msg = string(e.Kind)
	}
	return "y3: " + e.Op.String() + ": " + msg
}

// Is reports whether target is an *Error of the same Kind, so that errors.Is(err,
// y3.ErrTooLong) holds for every too_long error whatever its numbers.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind
}

// Sentinels, one per Kind, for errors.Is. They carry no numbers; never return them.
var (
	ErrUnexpectedEnd      = &Error{Kind: KindUnexpectedEnd}
	ErrTooLong            = &Error{Kind: KindTooLong}
	ErrTooDeep            = &Error{Kind: KindTooDeep}
	ErrNegativeLength     = &Error{Kind: KindNegativeLength}
	ErrVarintOverflow     = &Error{Kind: KindVarintOverflow}
	ErrVarintUnterminated = &Error{Kind: KindVarintUnterminated}
	ErrChildOverflow      = &Error{Kind: KindChildOverflow}
	ErrTruncatedHeader    = &Error{Kind: KindTruncatedHeader}
	ErrInvalidTag         = &Error{Kind: KindInvalidTag}
	ErrInvalidUTF8        = &Error{Kind: KindInvalidUTF8}
	ErrInvalidLength      = &Error{Kind: KindInvalidLength}
	ErrInvalidBool        = &Error{Kind: KindInvalidBool}
	ErrWrongType          = &Error{Kind: KindWrongType}
	ErrWrongCount         = &Error{Kind: KindWrongCount}
	ErrTrailingBytes      = &Error{Kind: KindTrailingBytes}
	ErrReservedTag        = &Error{Kind: KindReservedTag}
	ErrBufferTooSmall     = &Error{Kind: KindBufferTooSmall}
	ErrEmptyPath          = &Error{Kind: KindEmptyPath, Op: OpPath}
	ErrPathTooDeep        = &Error{Kind: KindPathTooDeep, Op: OpPath}
	ErrPathCount          = &Error{Kind: KindPathCount, Op: OpPath}
	ErrPathOverlap        = &Error{Kind: KindPathOverlap, Op: OpPath}
	ErrPathSyntax         = &Error{Kind: KindPathSyntax, Op: OpPath}
)

// KindOf returns the Kind of err if it is (or wraps) an *Error, else "".
func KindOf(err error) Kind {
	for err != nil {
		if e, ok := err.(*Error); ok {
			return e.Kind
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return ""
		}
		err = u.Unwrap()
	}
	return ""
}

// UnsupportedTypeError is returned by Marshal and Unmarshal for a Go type they cannot map to
// Y3 (maps, channels, functions, a bare top-level array as the reference refuses, a bad
// struct tag). It has no wire Kind: it is about the Go value, not the bytes.
type UnsupportedTypeError struct {
	Type   reflect.Type
	Reason string
}

func (e *UnsupportedTypeError) Error() string {
	if e.Reason != "" {
		return "y3: unsupported type " + typeName(e.Type) + ": " + e.Reason
	}
	return "y3: unsupported type " + typeName(e.Type)
}

func typeName(t reflect.Type) string {
	if t == nil {
		return "nil"
	}
	return t.String()
}

// Constructors used on the error paths only (each allocates).

func errUnexpectedEnd(needed uint64) error {
	return &Error{Kind: KindUnexpectedEnd, Needed: needed}
}

func errTooLong(declared, limit uint64) error {
	return &Error{Kind: KindTooLong, Declared: int64(declared), Limit: limit}
}

func errTooDeep(limit uint32) error {
	return &Error{Kind: KindTooDeep, Limit: uint64(limit)}
}

func errNegativeLength(declared int64) error {
	return &Error{Kind: KindNegativeLength, Declared: declared}
}

func errVarintOverflow(n int, bits uint32) error {
	return &Error{Kind: KindVarintOverflow, Len: uint64(n), Bits: bits}
}

func errVarintUnterminated(n int) error {
	return &Error{Kind: KindVarintUnterminated, Len: uint64(n)}
}

func errChildOverflow(declared, available uint64) error {
	return &Error{Kind: KindChildOverflow, Declared: int64(declared), Available: available}
}

func errTruncatedHeader(available uint64) error {
	return &Error{Kind: KindTruncatedHeader, Available: available}
}

func errInvalidTagByte(tag uint32) error {
	return &Error{Kind: KindInvalidTag, Tag: tag}
}

func errInvalidLength(n int, lo, hi uint64) error {
	return &Error{Kind: KindInvalidLength, Len: uint64(n), Min: lo, Max: hi}
}

func errWrongType(expected string, tag uint32) error {
	return &Error{Kind: KindWrongType, Expected: expected, Tag: tag}
}

func errWrongCount(expected, found int) error {
	return &Error{Kind: KindWrongCount, ExpectedCount: uint64(expected), Found: uint64(found)}
}

func errTrailingBytes(count int) error {
	return &Error{Kind: KindTrailingBytes, Count: uint64(count)}
}

func errEncodeInvalidTag(id, max uint32) error {
	return &Error{Kind: KindInvalidTag, Op: OpEncode, Tag: id, Max: uint64(max)}
}

func errEncodeTooLong(n int) error {
	return &Error{Kind: KindTooLong, Op: OpEncode, Len: uint64(n), Limit: maxLen32}
}

func errReservedTag(id uint32) error {
	return &Error{Kind: KindReservedTag, Op: OpEncode, Tag: id}
}
