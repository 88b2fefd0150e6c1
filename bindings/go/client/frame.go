package client

import (
	"math"

	y3 "github.com/y3-dev/y3/bindings/go"
)

// Frames: what a connection to the router carries, each one top-level Y3 packet in the
// Golang dialect, byte for byte as crates/y3-transport/src/frame.rs writes them (see
// spec/frames.md).
//
//	frame   = tag (1 B: 0x80 | type) | length (PVarInt32) | fields (length bytes)
//	field   = key (1 B) | length | value                   one Y3 packet per field
//
//	type  key   frame       fields ("?" = omitted when empty/zero)
//	0x31  b1    handshake   01 version u32 | 02 role u32 | 03 name str? | 04 token str?
//	                        | c5 observed: array of 00 u32 elements (omitted when none)
//	0x29  a9    accepted    01 version u32 | 02 session u64
//	0x3f  bf    data        01 tag u32 | 02 id u64 | 03 hops u32? | 04 metadata bytes?
//	                        | 05 payload bytes
//	0x30  b0    goaway      01 code u32 | 02 reason str?
//	0x2a  aa    ping        01 nonce u64
//	0x2b  ab    pong        01 nonce u64
//
// Unknown fields are skipped, field order is free and a repeated field keeps its last
// value. Unsigned integers travel as the signed integer with the same bits (math.MaxUint32
// is the one byte 7f).

// Version is the protocol version this package speaks.
const Version uint32 = 1

// DefaultMaxFrameLen is the default largest frame body: 1 MiB, as the router's.
const DefaultMaxFrameLen = 1 << 20

// maxDepth is the nesting a frame may have: the frame, its fields, the observed elements
// (and one more level, as the Rust codec allows).
const maxDepth = 4

// FrameType is a frame's type: the low six bits of its tag byte.
type FrameType uint8

// Frame types.
const (
	TypeHandshake FrameType = 0x31
	TypeAccepted  FrameType = 0x29
	TypeData      FrameType = 0x3f
	TypeGoaway    FrameType = 0x30
	TypePing      FrameType = 0x2a
	TypePong      FrameType = 0x2b
)

func (t FrameType) known() bool {
	switch t {
	case TypeHandshake, TypeAccepted, TypeData, TypeGoaway, TypePing, TypePong:
		return true
	}
	return false
}

// String is the frame type's name: "handshake", "data", ... ("unknown" otherwise).
func (t FrameType) String() string {
	switch t {
	case TypeHandshake:
		return "handshake"
	case TypeAccepted:
		return "accepted"
	case TypeData:
		return "data"
	case TypeGoaway:
		return "goaway"
	case TypePing:
		return "ping"
	case TypePong:
		return "pong"
	}
	return "unknown"
}

// Role is what a client is to the router.
type Role uint32

// Roles.
const (
	RoleSource         Role = 1 // sends data frames; observes nothing
	RoleStreamFunction Role = 2 // observes tags, may send results under other tags
	RoleSink           Role = 3 // observes tags; sends nothing
)

func (r Role) valid() bool { return r >= RoleSource && r <= RoleSink }

// String is the snake_case name: "source", "stream_function", "sink" ("unknown" otherwise).
func (r Role) String() string {
	switch r {
	case RoleSource:
		return "source"
	case RoleStreamFunction:
		return "stream_function"
	case RoleSink:
		return "sink"
	}
	return "unknown"
}

// GoawayCode says why a connection is closed.
type GoawayCode uint32

// Goaway codes; Kind gives each one's stable name.
const (
	CodeNormal             GoawayCode = 0 // the sender is done
	CodeShuttingDown       GoawayCode = 1 // the router is draining: stop sending
	CodeUnauthorized       GoawayCode = 2 // wrong token
	CodeProtocolError      GoawayCode = 3 // bytes that are not frames, or a misplaced frame
	CodeVersionMismatch    GoawayCode = 4 // protocol version not spoken
	CodeBadHandshake       GoawayCode = 5 // unknown role, too many observed tags, long name
	CodeSlowConsumer       GoawayCode = 6 // the subscriber did not read in time
	CodeTooManyConnections GoawayCode = 7 // the router is at its connection limit
	CodeHandshakeTimeout   GoawayCode = 8 // no handshake arrived in time
)

// Kind is the code's stable snake_case name ("other" for codes this package does not know).
func (c GoawayCode) Kind() Kind {
	switch c {
	case CodeNormal:
		return KindNormal
	case CodeShuttingDown:
		return KindShuttingDown
	case CodeUnauthorized:
		return KindUnauthorized
	case CodeProtocolError:
		return KindProtocolError
	case CodeVersionMismatch:
		return KindVersionMismatch
	case CodeBadHandshake:
		return KindBadHandshake
	case CodeSlowConsumer:
		return KindSlowConsumer
	case CodeTooManyConnections:
		return KindTooManyConnections
	case CodeHandshakeTimeout:
		return KindHandshakeTimeout
	}
	return KindOther
}

// String is Kind as a string.
func (c GoawayCode) String() string { return string(c.Kind()) }

// Frame is one of Handshake, Accepted, Data, Goaway, Ping and Pong (values or pointers).
// DecodeFrame and FrameReader return values: switch on `case client.Data:`.
type Frame interface {
	// Type is the frame type.
	Type() FrameType
	bodyLen() int
	appendBody(dst []byte) []byte
}

// Handshake is the first frame a client sends: who it is and what it observes.
type Handshake struct {
	Version  uint32   // Version
	Role     Role     // the client's role
	Name     string   // for the router's logs and metrics; omitted when empty
	Token    string   // the shared secret the router may require; omitted when empty
	Observed []uint32 // data tags to receive (functions and sinks); omitted when empty
}

// Accepted is the router's answer to a valid handshake.
type Accepted struct {
	Version uint32 // the version the router speaks
	Session uint64 // the router's id for this connection
}

// Data is one message on a tag.
//
// Metadata distinguishes nil (absent: the field is not written) from empty (written as an
// empty field), as the Rust side's Option<Bytes> does.
type Data struct {
	Tag      uint32 // the data tag subscribers observe
	ID       uint64 // chosen by the source; stream functions keep it on their outputs
	Hops     uint32 // stream functions passed; omitted when zero
	Metadata []byte // opaque, carried along unchanged; nil: absent
	Payload  []byte // usually itself a Y3 packet
}

// Goaway closes a connection, with a reason code.
type Goaway struct {
	Code   GoawayCode
	Reason string // omitted when empty
}

// Ping asks for a Pong with the same nonce.
type Ping struct{ Nonce uint64 }

// Pong answers a Ping.
type Pong struct{ Nonce uint64 }

// Type implements Frame.
func (Handshake) Type() FrameType { return TypeHandshake }

// Type implements Frame.
func (Accepted) Type() FrameType { return TypeAccepted }

// Type implements Frame.
func (Data) Type() FrameType { return TypeData }

// Type implements Frame.
func (Goaway) Type() FrameType { return TypeGoaway }

// Type implements Frame.
func (Ping) Type() FrameType { return TypePing }

// Type implements Frame.
func (Pong) Type() FrameType { return TypePong }

// Field keys.
const (
	fVersion  = 0x01
	fRole     = 0x02
	fName     = 0x03
	fToken    = 0x04
	fObserved = 0x05
	fSession  = 0x02
	fTag      = 0x01
	fID       = 0x02
	fHops     = 0x03
	fMetadata = 0x04
	fPayload  = 0x05
	fCode     = 0x01
	fReason   = 0x02
	fNonce    = 0x01
)

const g = y3.Golang

// pvarintLen is the number of bytes PVarInt takes for v.
func pvarintLen(v int64) int {
	n := 1
	for v < -64 || v > 63 {
		v >>= 7
		n++
	}
	return n
}

// primLen is the size of a primitive packet with an n-byte value.
func primLen(n int) int { return 1 + pvarintLen(int64(n)) + n }

func u32Len(v uint32) int { return primLen(pvarintLen(int64(int32(v)))) }
func u64Len(v uint64) int { return primLen(pvarintLen(int64(v))) }
func optStrLen(s string) int {
	if s == "" {
		return 0
	}
	return primLen(len(s))
}

// The appenders below cannot fail: every key is a constant below 0x40 and every length was
// checked against math.MaxInt32 by AppendFrame.

func putU32(dst []byte, key uint32, v uint32) []byte {
	dst, _ = y3.AppendUint32(dst, g, key, v)
	return dst
}

func putU64(dst []byte, key uint32, v uint64) []byte {
	dst, _ = y3.AppendUint64(dst, g, key, v)
	return dst
}

func putBytes(dst []byte, key uint32, b []byte) []byte {
	dst, _ = y3.AppendBytes(dst, g, key, b)
	return dst
}

func putOptStr(dst []byte, key uint32, s string) []byte {
	if s == "" {
		return dst
	}
	dst, _ = y3.AppendString(dst, g, key, s)
	return dst
}

func (h Handshake) observedLen() int {
	n := 0
	for _, t := range h.Observed {
		n += u32Len(t)
	}
	return n
}

func (h Handshake) bodyLen() int {
	n := u32Len(h.Version) + u32Len(uint32(h.Role)) + optStrLen(h.Name) + optStrLen(h.Token)
	if len(h.Observed) > 0 {
		o := h.observedLen()
		n += primLen(o)
	}
	return n
}

func (h Handshake) appendBody(dst []byte) []byte {
	dst = putU32(dst, fVersion, h.Version)
	dst = putU32(dst, fRole, uint32(h.Role))
	dst = putOptStr(dst, fName, h.Name)
	dst = putOptStr(dst, fToken, h.Token)
	if len(h.Observed) > 0 {
		dst, _ = y3.AppendHeader(dst, g, y3.ArrayTag(fObserved), h.observedLen())
		for _, t := range h.Observed {
			dst = putU32(dst, 0, t)
		}
	}
	return dst
}

func (a Accepted) bodyLen() int { return u32Len(a.Version) + u64Len(a.Session) }

func (a Accepted) appendBody(dst []byte) []byte {
	dst = putU32(dst, fVersion, a.Version)
	return putU64(dst, fSession, a.Session)
}

func (d Data) bodyLen() int {
	n := u32Len(d.Tag) + u64Len(d.ID) + primLen(len(d.Payload))
	if d.Hops != 0 {
		n += u32Len(d.Hops)
	}
	if d.Metadata != nil {
		n += primLen(len(d.Metadata))
	}
	return n
}

func (d Data) appendBody(dst []byte) []byte {
	dst = putU32(dst, fTag, d.Tag)
	dst = putU64(dst, fID, d.ID)
	if d.Hops != 0 {
		dst = putU32(dst, fHops, d.Hops)
	}
	if d.Metadata != nil {
		dst = putBytes(dst, fMetadata, d.Metadata)
	}
	return putBytes(dst, fPayload, d.Payload)
}

func (x Goaway) bodyLen() int { return u32Len(uint32(x.Code)) + optStrLen(x.Reason) }

func (x Goaway) appendBody(dst []byte) []byte {
	dst = putU32(dst, fCode, uint32(x.Code))
	return putOptStr(dst, fReason, x.Reason)
}

func (p Ping) bodyLen() int                 { return u64Len(p.Nonce) }
func (p Ping) appendBody(dst []byte) []byte { return putU64(dst, fNonce, p.Nonce) }
func (p Pong) bodyLen() int                 { return u64Len(p.Nonce) }
func (p Pong) appendBody(dst []byte) []byte { return putU64(dst, fNonce, p.Nonce) }

// EncodedLen is the size of the whole frame, header included: exactly what AppendFrame
// writes.
func EncodedLen(f Frame) int {
	body := f.bodyLen()
	return 1 + pvarintLen(int64(body)) + body
}

// AppendFrame appends f to dst. maxLen is the receiver's frame limit (at most
// math.MaxInt32; zero or less: DefaultMaxFrameLen).
//
// Errors: too_long (fields Declared, Limit) when the fields exceed maxLen; dst is returned
// unchanged then.
func AppendFrame(dst []byte, f Frame, maxLen int) ([]byte, error) {
	return appendFrame(dst, f, maxLen)
}

// AppendData is AppendFrame for a data frame, without boxing it in a Frame interface
// (no allocation when dst has room).
func AppendData(dst []byte, d *Data, maxLen int) ([]byte, error) {
	return appendFrame(dst, *d, maxLen)
}

func appendFrame[F Frame](dst []byte, f F, maxLen int) ([]byte, error) {
	limit := frameLimit(maxLen)
	body := f.bodyLen()
	if body > limit {
		return dst, &Error{Kind: KindTooLong, Declared: uint64(body), Limit: uint64(limit)}
	}
	dst = growFor(dst, 1+pvarintLen(int64(body))+body)
	dst, _ = y3.AppendHeader(dst, g, y3.NodeTag(uint32(f.Type())), body)
	return f.appendBody(dst), nil
}

// EncodeFrame returns f's bytes (see AppendFrame).
func EncodeFrame(f Frame, maxLen int) ([]byte, error) {
	return AppendFrame(make([]byte, 0, EncodedLen(f)), f, maxLen)
}

func frameLimit(maxLen int) int {
	if maxLen <= 0 {
		return DefaultMaxFrameLen
	}
	if maxLen > math.MaxInt32 {
		return math.MaxInt32
	}
	return maxLen
}

// growFor makes room for n more bytes at once.
func growFor(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	grown := make([]byte, len(dst), len(dst)+n+len(dst)/4)
	copy(grown, dst)
	return grown
}
