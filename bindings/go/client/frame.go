package client

import (
	"encoding/binary"
	"math"

	y3 "github.com/y3-dev/y3/bindings/go"
)

// Frames: YoMo v1.22's wire protocol plus y3's extension fields, as spec/frames.md gives
// them. Each frame is one top-level Y3 packet of the NVarInt dialect: a node whose tag byte
// is 0x80 | type and whose children are primitive fields.
//
//	frame   = tag (1 B: 0x80 | type) | length (signed PVarInt32) | fields (length bytes)
//	field   = seq id (1 B, < 0x40) | length | value
//
//	type  byte  frame          fields, in the order written (y3's "30" only when not zero)
//	0x31  b1    handshake      01 name | 03 id | 02 client type (1 B) | 06 observed (4-byte LE
//	                           u32s) | 04 auth name | 05 auth payload | 07 version | 09 function
//	                           definition | 08 wanted target | 30 extension level u32 | 31
//	                           filters | 32 wants stored acknowledgements u32 (1)
//	0x29  a9    handshake ack  none: always a9 00
//	0x39  b9    rejected       01 message | 30 code u32 (when there is one, even zero)
//	0x2e  ae    goaway         01 message | 30 code u32 (when there is one, even zero)
//	0x3e  be    connect to     01 endpoint ("host:port")
//	0x3f  bf    data           01 tag (NVarInt u32) | 03 metadata (msgpack) | 02 payload
//	                           | 30 hops u32
//	0x33  b3    stored (y3)    30 count u32 (always written): the first count data frames of
//	                           this connection are handled (router → a client that set 32)
//	                           | 31 refused runs (only when any)
//
// The stored frame's refused runs (field 31): the frames of the count the router refused
// rather than delivered, 9 bytes per run:
//
//	run = first index u32 LE | frames u32 LE | reason u8 (1 too_long, 2 hop_limit, 3 loop,
//	                                                     4 metadata_too_large)
//
// Stored 3, frame 1 refused as too long: b3 0e 30 01 03 31 09 01 00 00 00 01 00 00 00 01.
//
// Integers are NVarInt: the shortest big-endian two's complement of the value read as an
// int32 (tag 0x80 is 00 80, tag 0xffffffff is ff). Every YoMo field is written, an empty one
// as "id 00", in YoMo's order, so that YoMo's own frames (testdata/yomo-v1.22/codec-*) are
// reproduced byte for byte. Decoders accept any order, skip unknown ids, keep the last of a
// repeated field and read a missing field as empty.

// Version is the protocol version this package speaks: YoMo's, compared for equality.
const Version = "2024-01-03"

// ExtensionLevel is the y3 extension level y3 clients announce in their handshake: the
// router then sends them goaway frames and y3 codes.
const ExtensionLevel uint32 = 1

// DefaultMaxFrameLen is the default largest frame body, as the router's
// (y3_transport::DEFAULT_MAX_FRAME_LEN): a 16 MiB payload plus 64 KiB for its tag, metadata
// and field headers.
const DefaultMaxFrameLen = 16<<20 + 64<<10

// maxDepth is the nesting a frame may have: the frame and its fields (a nested node inside
// a field is skipped, never entered).
const maxDepth = 2

// dialect is the Y3 dialect of every frame.
const dialect = y3.NVarInt

// FrameType is a frame's type: the low six bits of its tag byte.
type FrameType uint8

// Frame types.
const (
	TypeHandshake    FrameType = 0x31
	TypeHandshakeAck FrameType = 0x29
	TypeRejected     FrameType = 0x39
	TypeGoaway       FrameType = 0x2e
	TypeConnectTo    FrameType = 0x3e
	TypeData         FrameType = 0x3f
	TypeStored       FrameType = 0x33
)

func (t FrameType) known() bool {
	switch t {
	case TypeHandshake, TypeHandshakeAck, TypeRejected, TypeGoaway, TypeConnectTo, TypeData,
		TypeStored:
		return true
	}
	return false
}

// String is the frame type's snake_case name: "handshake", "handshake_ack", "rejected",
// "goaway", "connect_to", "data", "stored" ("unknown" otherwise).
func (t FrameType) String() string {
	switch t {
	case TypeHandshake:
		return "handshake"
	case TypeHandshakeAck:
		return "handshake_ack"
	case TypeRejected:
		return "rejected"
	case TypeGoaway:
		return "goaway"
	case TypeConnectTo:
		return "connect_to"
	case TypeData:
		return "data"
	case TypeStored:
		return "stored"
	}
	return "unknown"
}

// ClientType is what a client is to the router: the handshake's one-byte field 02.
type ClientType uint8

// Client types. A sink is a stream function that never writes.
const (
	ClientSource         ClientType = 0x5f // sends data frames; never receives
	ClientStreamFunction ClientType = 0x5d // observes tags, may write results
	ClientUpstreamZipper ClientType = 0x5e // a zipper of a mesh forwarding to this one
)

// String is the snake_case name: "source", "stream_function", "upstream_zipper" (else
// "unknown", which a router admits as a source).
func (c ClientType) String() string {
	switch c {
	case ClientSource:
		return "source"
	case ClientStreamFunction:
		return "stream_function"
	case ClientUpstreamZipper:
		return "upstream_zipper"
	}
	return "unknown"
}

// Code is the y3 code of a rejected or goaway frame (field 30): why the router refused or
// closed the connection. A frame may have no code (YoMo's zipper writes none): see
// Rejected.HasCode.
type Code uint32

// Codes; Kind gives each one's stable name, Retryable whether a client tries again.
const (
	CodeNormal             Code = 0  // the sender is done
	CodeShuttingDown       Code = 1  // the router is draining: stop sending
	CodeUnauthorized       Code = 2  // wrong token
	CodeProtocolError      Code = 3  // bytes that are not frames, or a misplaced frame
	CodeVersionMismatch    Code = 4  // protocol version not spoken
	CodeBadHandshake       Code = 5  // an empty client type, a handshake the router cannot take
	CodeSlowConsumer       Code = 6  // the subscriber did not read in time
	CodeTooManyConnections Code = 7  // the router is at its connection limit
	CodeHandshakeTimeout   Code = 8  // no handshake arrived in time
	CodeReservedTag        Code = 9  // a data frame under a reserved tag (0xf000..0xffff)
	CodeForbidden          Code = 10 // a tag the client's token may not publish or observe
	CodeBadFilter          Code = 11 // a content filter that does not compile or is over a limit
)

var codeKinds = [...]Kind{KindNormal, KindShuttingDown, KindUnauthorized, KindProtocolError,
	KindVersionMismatch, KindBadHandshake, KindSlowConsumer, KindTooManyConnections,
	KindHandshakeTimeout, KindReservedTag, KindForbidden, KindBadFilter}

// Kind is the code's stable snake_case name ("other" for codes this package does not know).
func (c Code) Kind() Kind {
	if int(c) < len(codeKinds) {
		return codeKinds[c]
	}
	return KindOther
}

// String is Kind as a string.
func (c Code) String() string { return string(c.Kind()) }

// codeOf is the code whose kind is k.
func codeOf(k Kind) (Code, bool) {
	for c, ck := range codeKinds {
		if ck == k {
			return Code(c), true
		}
	}
	return 0, false
}

// Stored is the router's acknowledgement (y3 only, spec/frames.md "Stored acknowledgements")
// to a client whose handshake set WantsAcks: the first Count data frames the client wrote
// on this connection are handled (counted modulo 2^32): stored, or, for those in Refused,
// refused. A refused frame is listed in the stored frame whose count first covers it.
type Stored struct {
	Count   uint32       // 30
	Refused []RefusedRun // 31, written only when not empty
}

// RefusedReason is why the router refused a data frame (delivered to no one). For every
// reason but RefusedNoSubscriber and RefusedNotStored the frame was handled for good; one
// refused as no_subscriber or not_stored was not stored, and durable clients keep it and
// send it again (Retried).
type RefusedReason uint8

// Refusal reasons; a router may send others, kept as their number.
const (
	RefusedTooLong  RefusedReason = 1 // over the router's limits.max_frame_len
	RefusedHopLimit RefusedReason = 2 // past the router's limits.max_hops
	RefusedLoop     RefusedReason = 3 // every recipient dropped it as a loop (limits.max_loop_returns)
	// RefusedMetadataTooLarge: metadata over limits.max_metadata_bytes or max_metadata_entries.
	RefusedMetadataTooLarge RefusedReason = 4
	// RefusedNoSubscriber: nobody took it (no subscriber to its tag yet): not stored;
	// durable clients keep it and send it again with backoff.
	RefusedNoSubscriber RefusedReason = 5
	// RefusedNotStored: on a durable tag of the federation, JetStream did not store it in
	// the router's attempts; durable clients keep it and send it again with backoff.
	RefusedNotStored RefusedReason = 6
)

// Retried is whether a durable client keeps a frame refused for r and sends it again
// later (no_subscriber: a subscriber may come; not_stored: JetStream may come back) rather
// than forgetting it.
func (r RefusedReason) Retried() bool { return r == RefusedNoSubscriber || r == RefusedNotStored }

// String is the reason's stable snake_case name: "too_long", "hop_limit", "loop",
// "metadata_too_large", "no_subscriber", "not_stored" ("other" otherwise).
func (r RefusedReason) String() string {
	switch r {
	case RefusedTooLong:
		return "too_long"
	case RefusedHopLimit:
		return "hop_limit"
	case RefusedLoop:
		return "loop"
	case RefusedMetadataTooLarge:
		return "metadata_too_large"
	case RefusedNoSubscriber:
		return "no_subscriber"
	case RefusedNotStored:
		return "not_stored"
	}
	return "other"
}

// RefusedRun is Frames consecutive data frames of a connection, from index First (counted
// as Stored.Count counts), that the router refused for Reason.
type RefusedRun struct {
	First  uint32
	Frames uint32
	Reason RefusedReason
}

// refusedRunLen is the bytes of one run on the wire.
const refusedRunLen = 9

// Frame is one of Handshake, HandshakeAck, Rejected, Goaway, ConnectTo, Data and Stored
// (values or pointers). DecodeFrame and FrameReader return values: switch on `case client.Data:`.
type Frame interface {
	// Type is the frame type.
	Type() FrameType
	bodyLen() int
	appendBody(dst []byte) []byte
}

// Handshake is the first frame a client sends: who it is and what it observes.
type Handshake struct {
	Name               string     // 01: the application's name
	ID                 string     // 03: the client id, "<21-char id>-<reconnect counter>"
	ClientType         ClientType // 02: exactly one byte on the wire
	Observed           []uint32   // 06: data tags to receive (stream functions)
	AuthName           string     // 04: "token" (empty: the router's default, token)
	AuthPayload        string     // 05: the secret
	Version            string     // 07: Version
	FunctionDefinition []byte     // 09: an LLM function-calling schema (JSON); nil: none
	WantedTarget       string     // 08: the yomo-target this function accepts
	ExtensionLevel     uint32     // 30 (y3): ExtensionLevel for y3 clients, 0 for YoMo's
	Filters            []Filter   // 31 (y3): content filters, at most one per observed tag
	WantsAcks          bool       // 32 (y3): ask for Stored acknowledgements (DurableSource, durable functions)
}

// Filter is a content filter on one observed tag (spec/filters.md): the router delivers a
// data frame on Tag only if its payload matches Text, e.g. "0x10/0x11:f32 > 60".
type Filter struct {
	Tag  uint32
	Text string
}

// HandshakeAck is the router's answer to a valid handshake. It has no fields.
type HandshakeAck struct{}

// Rejected refuses a handshake (or ends a connection, after the handshake).
//
// The code is written when HasCode is set or Code is not zero, and a decoder sets HasCode
// when the field is there: Rejected{Message: m} is YoMo's frame, without a code (its kind
// is rejected); Rejected{Code: CodeNormal, HasCode: true} writes code 0.
type Rejected struct {
	Message string // 01
	Code    Code   // 30 (y3)
	HasCode bool
}

// Goaway closes a connection. Its code works as Rejected's.
type Goaway struct {
	Message string // 01
	Code    Code   // 30 (y3)
	HasCode bool
}

// code is the code field to write, if any.
func code(c Code, has bool) (Code, bool) { return c, has || c != 0 }

// codeLen is the size of the code field.
func codeLen(c Code, has bool) int {
	if _, ok := code(c, has); ok {
		return u32Len(uint32(c))
	}
	return 0
}

func putCode(dst []byte, c Code, has bool) []byte {
	if _, ok := code(c, has); ok {
		return putU32(dst, fCode, uint32(c))
	}
	return dst
}

// ConnectTo redirects a client to another router during the handshake.
type ConnectTo struct {
	Endpoint string // 01: "host:port"
}

// Data is one message on a tag.
//
// Metadata is a msgpack map of string to string on the wire. A decoded frame carries both
// the map (Metadata) and its bytes (RawMetadata, borrowed from the buffer the frame was
// decoded from). An encoder writes RawMetadata when it is not nil, else the map, its keys
// in sorted order; an empty map is an empty field.
type Data struct {
	Tag         uint32            // 01: the data tag functions observe
	Metadata    map[string]string // 03: yomo-source-id, yomo-tid, yomo-target, ...
	RawMetadata []byte            // 03 as on the wire; see above
	Payload     []byte            // 02: usually itself a Y3 packet
	Hops        uint32            // 30 (y3): stream functions passed; not written when zero
}

// Type implements Frame.
func (Handshake) Type() FrameType { return TypeHandshake }

// Type implements Frame.
func (HandshakeAck) Type() FrameType { return TypeHandshakeAck }

// Type implements Frame.
func (Rejected) Type() FrameType { return TypeRejected }

// Type implements Frame.
func (Goaway) Type() FrameType { return TypeGoaway }

// Type implements Frame.
func (ConnectTo) Type() FrameType { return TypeConnectTo }

// Type implements Frame.
func (Data) Type() FrameType { return TypeData }

// Type implements Frame.
func (Stored) Type() FrameType { return TypeStored }

// Field sequence ids.
const (
	fName           = 0x01
	fID             = 0x03
	fClientType     = 0x02
	fObserved       = 0x06
	fAuthName       = 0x04
	fAuthPayload    = 0x05
	fVersion        = 0x07
	fFunctionDef    = 0x09
	fWantedTarget   = 0x08
	fExtensionLevel = 0x30
	fFilters        = 0x31
	fRefused        = 0x31
	fWantsAcks      = 0x32
	fCount          = 0x30
	fMessage        = 0x01
	fCode           = 0x30
	fEndpoint       = 0x01
	fTag            = 0x01
	fMetadata       = 0x03
	fPayload        = 0x02
	fHops           = 0x30
)

// Lengths are measured with the codec's own writers on a stack buffer, so that this
// package has no second varint.

// primLen is the size of a primitive field with an n-byte value.
func primLen(n int) int {
	var scratch [8]byte
	h, _ := y3.AppendHeader(scratch[:0], dialect, y3.PrimitiveTag(fName), n)
	return len(h) + n
}

// u32Len is the size of a primitive u32 field holding v.
func u32Len(v uint32) int {
	var scratch [16]byte
	b, _ := y3.AppendUint32(scratch[:0], dialect, fTag, v)
	return len(b)
}

// optU32Len is u32Len, or zero for zero (y3's fields are not written when zero).
func optU32Len(v uint32) int {
	if v == 0 {
		return 0
	}
	return u32Len(v)
}

// The appenders below cannot fail: every id is a constant below 0x40 and every length was
// checked against the frame limit (at most math.MaxInt32) by appendFrame.

func putU32(dst []byte, id uint32, v uint32) []byte {
	dst, _ = y3.AppendUint32(dst, dialect, id, v)
	return dst
}

func putOptU32(dst []byte, id uint32, v uint32) []byte {
	if v == 0 {
		return dst
	}
	return putU32(dst, id, v)
}

func putBytes(dst []byte, id uint32, b []byte) []byte {
	dst, _ = y3.AppendBytes(dst, dialect, id, b)
	return dst
}

func putStr(dst []byte, id uint32, s string) []byte {
	dst, _ = y3.AppendString(dst, dialect, id, s)
	return dst
}

func (h Handshake) bodyLen() int {
	return primLen(len(h.Name)) + primLen(len(h.ID)) + primLen(1) + primLen(4*len(h.Observed)) +
		primLen(len(h.AuthName)) + primLen(len(h.AuthPayload)) + primLen(len(h.Version)) +
		primLen(len(h.FunctionDefinition)) + primLen(len(h.WantedTarget)) + optU32Len(h.ExtensionLevel) +
		filtersLen(h.Filters) + optU32Len(boolU32(h.WantsAcks))
}

func boolU32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// filtersLen is the size of the filters field: tag u32 LE | length u32 LE | text, per
// filter; nothing when there are none.
func filtersLen(filters []Filter) int {
	if len(filters) == 0 {
		return 0
	}
	return primLen(filtersValueLen(filters))
}

func filtersValueLen(filters []Filter) int {
	n := 0
	for _, f := range filters {
		n += 8 + len(f.Text)
	}
	return n
}

func (h Handshake) appendBody(dst []byte) []byte {
	dst = putStr(dst, fName, h.Name)
	dst = putStr(dst, fID, h.ID)
	dst = putBytes(dst, fClientType, []byte{byte(h.ClientType)})
	dst, _ = y3.AppendHeader(dst, dialect, y3.PrimitiveTag(fObserved), 4*len(h.Observed))
	for _, t := range h.Observed {
		dst = binary.LittleEndian.AppendUint32(dst, t)
	}
	dst = putStr(dst, fAuthName, h.AuthName)
	dst = putStr(dst, fAuthPayload, h.AuthPayload)
	dst = putStr(dst, fVersion, h.Version)
	dst = putBytes(dst, fFunctionDef, h.FunctionDefinition)
	dst = putStr(dst, fWantedTarget, h.WantedTarget)
	dst = putOptU32(dst, fExtensionLevel, h.ExtensionLevel)
	if len(h.Filters) > 0 {
		dst, _ = y3.AppendHeader(dst, dialect, y3.PrimitiveTag(fFilters), filtersValueLen(h.Filters))
		for _, f := range h.Filters {
			dst = binary.LittleEndian.AppendUint32(dst, f.Tag)
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(f.Text)))
			dst = append(dst, f.Text...)
		}
	}
	return putOptU32(dst, fWantsAcks, boolU32(h.WantsAcks))
}

func (HandshakeAck) bodyLen() int                 { return 0 }
func (HandshakeAck) appendBody(dst []byte) []byte { return dst }

func (r Rejected) bodyLen() int { return primLen(len(r.Message)) + codeLen(r.Code, r.HasCode) }

func (r Rejected) appendBody(dst []byte) []byte {
	return putCode(putStr(dst, fMessage, r.Message), r.Code, r.HasCode)
}

func (g Goaway) bodyLen() int { return primLen(len(g.Message)) + codeLen(g.Code, g.HasCode) }

func (g Goaway) appendBody(dst []byte) []byte {
	return putCode(putStr(dst, fMessage, g.Message), g.Code, g.HasCode)
}

func (s Stored) bodyLen() int {
	n := u32Len(s.Count)
	if len(s.Refused) > 0 {
		n += primLen(refusedRunLen * len(s.Refused))
	}
	return n
}

func (s Stored) appendBody(dst []byte) []byte {
	dst = putU32(dst, fCount, s.Count)
	if len(s.Refused) > 0 {
		dst, _ = y3.AppendHeader(dst, dialect, y3.PrimitiveTag(fRefused), refusedRunLen*len(s.Refused))
		for _, r := range s.Refused {
			dst = binary.LittleEndian.AppendUint32(dst, r.First)
			dst = binary.LittleEndian.AppendUint32(dst, r.Frames)
			dst = append(dst, byte(r.Reason))
		}
	}
	return dst
}

func (c ConnectTo) bodyLen() int                 { return primLen(len(c.Endpoint)) }
func (c ConnectTo) appendBody(dst []byte) []byte { return putStr(dst, fEndpoint, c.Endpoint) }

// metadataLen is the size of the metadata value d writes.
func (d *Data) metadataLen() int {
	if d.RawMetadata != nil {
		return len(d.RawMetadata)
	}
	return MetadataLen(d.Metadata)
}

func (d Data) bodyLen() int {
	return u32Len(d.Tag) + primLen(d.metadataLen()) + primLen(len(d.Payload)) + optU32Len(d.Hops)
}

func (d Data) appendBody(dst []byte) []byte {
	dst = putU32(dst, fTag, d.Tag)
	if d.RawMetadata != nil {
		dst = putBytes(dst, fMetadata, d.RawMetadata)
	} else {
		dst, _ = y3.AppendHeader(dst, dialect, y3.PrimitiveTag(fMetadata), MetadataLen(d.Metadata))
		dst = AppendMetadata(dst, d.Metadata)
	}
	dst = putBytes(dst, fPayload, d.Payload)
	return putOptU32(dst, fHops, d.Hops)
}

// EncodedLen is the size of the whole frame, header included: exactly what AppendFrame
// writes.
func EncodedLen(f Frame) int {
	body := f.bodyLen()
	return primLen(body)
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
// (no allocation when dst has room and the metadata is raw).
func AppendData(dst []byte, d *Data, maxLen int) ([]byte, error) {
	return appendFrame(dst, *d, maxLen)
}

func appendFrame[F Frame](dst []byte, f F, maxLen int) ([]byte, error) {
	limit := frameLimit(maxLen)
	body := f.bodyLen()
	if body > limit {
		return dst, &Error{Kind: KindTooLong, Declared: uint64(body), Limit: uint64(limit)}
	}
	dst = growFor(dst, primLen(body))
	dst, _ = y3.AppendHeader(dst, dialect, y3.NodeTag(uint32(f.Type())), body)
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
