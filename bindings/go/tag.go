package y3

import "fmt"

// Tags and packet headers: the one header parser every reader of this package uses.
//
//	golang / nvarint tag, one byte:        draft02 tag, 1..4 bytes:
//
//	  7   6   5 4 3 2 1 0                    7   6 5 4 3 2 1 0
//	+---+---+-------------+                +---+-------------+
//	| N | A |   seq id    |                | C |  id bits    | ...
//	+---+---+-------------+                +---+-------------+
//	  N = 0x80 node, A = 0x40 array          C = continuation, big-endian groups
//
//	header = tag, then the value length as signed PVarInt32 (1..5 bytes)

const (
	flagNode  = 0x80
	flagArray = 0x40
)

// Tag is a packet's key and kind. In the one-byte dialects the kind travels in the tag byte
// (node flag 0x80, array flag 0x40). In Draft02 nothing on the wire says whether a value is
// a node: a Tag read from draft-02 bytes is always primitive, and the schema (a key path, a
// typed struct) decides whether to descend.
type Tag struct {
	v uint64 // id in the low 32 bits, the flags byte above (one register, not two)
}

func mkTag(id uint32, flags uint8) Tag { return Tag{v: uint64(id) | uint64(flags)<<32} }

func (t Tag) fl() uint8 { return uint8(t.v >> 32) }

// PrimitiveTag is a leaf tag with key id.
func PrimitiveTag(id uint32) Tag { return mkTag(id, 0) }

// NodeTag is a node tag with key id: its value is a sequence of packets.
func NodeTag(id uint32) Tag { return mkTag(id, flagNode) }

// ArrayTag is an array tag with key id: a node whose children are elements with key 0.
func ArrayTag(id uint32) Tag { return mkTag(id, flagNode|flagArray) }

// ID is the key (seq id).
func (t Tag) ID() uint32 { return uint32(t.v) }

// IsNode reports whether the value is a sequence of packets.
func (t Tag) IsNode() bool { return t.fl()&flagNode != 0 }

// IsArray reports whether the node is an array (slice) node.
func (t Tag) IsArray() bool { return t.fl()&flagArray != 0 }

// Byte is the tag byte of the one-byte dialects (flags | id); ok is false for ids above 0x3f.
func (t Tag) Byte() (b byte, ok bool) {
	if t.ID() > 0x3f {
		return 0, false
	}
	return t.fl() | byte(t.ID()), true
}

// EncodedLen is the number of bytes the tag takes in dialect d.
func (t Tag) EncodedLen(d Dialect) int {
	if d == Draft02 {
		return uvarintLen(t.ID())
	}
	return 1
}

// Check reports invalid_tag when dialect d cannot carry the tag's id.
func (t Tag) Check(d Dialect) error {
	if m := d.MaxTag(); t.ID() > m {
		return errEncodeInvalidTag(t.ID(), m)
	}
	return nil
}

// String renders the tag as "node 0x10", "array 0x10" or "primitive 0x11".
func (t Tag) String() string {
	kind := "primitive"
	switch {
	case t.IsArray():
		kind = "array"
	case t.IsNode():
		kind = "node"
	}
	return fmt.Sprintf("%s 0x%02x", kind, t.ID())
}

// header is a parsed packet header.
type header struct {
	tag     Tag
	len     uint64 // declared value length, already checked against the limit
	headLen int    // bytes the tag and length took
}

// parseHeader parses a header at the start of b. ok == false with a nil error means that b
// ends inside the header: not an error, the caller feeds more bytes. The declared length is
// checked against c.Limits.MaxPacketLen here, before any caller acts on it. c is normalized.
func parseHeader(b []byte, c *Config) (h header, ok bool, err error) {
	var tagLen int
	if c.Dialect != Draft02 {
		if len(b) == 0 {
			return h, false, nil
		}
		t := b[0]
		// An array flag without the node flag means nothing; the reference reads 0x51 as key
		// 0x11 and loses the bit. We refuse it.
		if t&(flagNode|flagArray) == flagArray {
			return h, false, errInvalidTagByte(uint32(t))
		}
		h.tag = mkTag(uint32(t&0x3f), t&(flagNode|flagArray))
		tagLen = 1
	} else {
		id, n, err := readUVarint(b, draft02TagBytes)
		if err != nil || n == 0 {
			return h, false, err
		}
		h.tag = mkTag(id, 0)
		tagLen = n
	}
	l, n, err := readLength(b[tagLen:])
	if err != nil || n == 0 {
		return h, false, err
	}
	if l > c.Limits.MaxPacketLen {
		return h, false, errTooLong(l, c.Limits.MaxPacketLen)
	}
	h.len = l
	h.headLen = tagLen + n
	return h, true, nil
}

// headerLen is the number of bytes the header of tag and an n-byte value takes in d.
func headerLen(t Tag, n int, d Dialect) int {
	return t.EncodedLen(d) + pvarintLen(int64(n))
}

// appendHeader appends the header of tag t and an n-byte value after checking both.
func appendHeader(dst []byte, d Dialect, t Tag, n int) ([]byte, error) {
	if err := t.Check(d); err != nil {
		return dst, err
	}
	if n < 0 || n > maxLen32 {
		return dst, errEncodeTooLong(n)
	}
	return appendHeaderUnchecked(dst, d, t, n), nil
}

func appendHeaderUnchecked(dst []byte, d Dialect, t Tag, n int) []byte {
	if d == Draft02 {
		dst = appendUVarint(dst, t.ID())
	} else {
		dst = append(dst, t.fl()|byte(t.ID()))
	}
	if n < 0x40 {
		return append(dst, byte(n))
	}
	return appendPVarint(dst, int64(n))
}
