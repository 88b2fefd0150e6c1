package y3

import (
	"fmt"
	"math"
)

// Tags and packet headers: the one header decision of this package. Every reader (the
// observer's walk and its scan, the fast path, the skip run, ChildIter) reads tag and length
// bytes through this file: parseHeader for any header of any dialect, and the leaf rules
// below it for the short headers of the one-byte dialects that the hot loops read inline
// (shortAt, byteInvalid, byteKey, byteNode, stopSet, skipShort). No other file
// reads a tag or length byte, nor writes one: appendHeader / appendHeaderUnchecked write a
// header (the tag, then appendLength), NodeMark.End patches a node's length through
// appendLength.
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
//
//	the short headers of the one-byte dialects (every hot loop's common case):
//
//	  tag       length                   value length   header
//	+--------+ +----------+              0..63          2 bytes
//	| N A id | | 00xxxxxx |
//	+--------+ +----------+----------+
//	| N A id | | 10xxxxxx | 0yyyyyyy |   64..8191       3 bytes (x << 7 | y)
//	+--------+ +----------+----------+
//	  N A = 0 1 (array flag alone) is refused: invalid_tag

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
		if byteInvalid(t) {
			return h, false, errInvalidTagByte(uint32(t))
		}
		h.tag = byteTag(t)
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

// byteInvalid reports whether a one-byte-dialect tag byte is refused: the array flag
// without the node flag (0x40..0x7f, invalid_tag). The reference reads 0x51 as key 0x11 and
// loses the bit.
func byteInvalid(t byte) bool { return t&(flagNode|flagArray) == flagArray }

// byteKey is the key of a one-byte-dialect tag byte.
func byteKey(t byte) uint32 { return uint32(t & 0x3f) }

// byteTag is the Tag of a one-byte-dialect tag byte that is not invalid.
func byteTag(t byte) Tag { return mkTag(byteKey(t), t&(flagNode|flagArray)) }

// shortAt reads the short header at b[i:] for the whole-buffer walks (fastWalk, walk, the
// observer's header): its tag byte, the value length n and the header length hl, 2 for a
// one-group length (0..63), 3 for two groups (64..8191); ok is false for anything else
// (fewer than two bytes, a longer or negative length, b ending first), which the caller
// leaves to parseHeader. The tag byte (byteInvalid) and the limit are the caller's to
// check, so that this stays small enough to be inlined into the walks.
func shortAt(b []byte, i int) (tag byte, n, hl int, ok bool) {
	if i+1 >= len(b) {
		return 0, 0, 0, false
	}
	t, l := b[i], b[i+1]
	if l < 0x40 {
		return t, int(l), 2, true
	}
	if l&0xc0 == 0x80 && i+2 < len(b) && b[i+2] < 0x80 {
		return t, int(l&0x3f)<<7 | int(b[i+2]), 3, true
	}
	return 0, 0, 0, false
}

// byteNode reports whether a one-byte-dialect tag byte marks a node.
func byteNode(t byte) bool { return t&flagNode != 0 }

// stopSet is the set of tag bytes a skip run stops at (the header needs a decision), one
// bit per byte value in four words by the two flag bits:
//
//	word 0: primitives 0x00..0x3f   keys on an active path
//	word 1: 0x40..0x7f              all (invalid: the array flag alone)
//	word 2: nodes 0x80..0xbf        keys on an active path, or all when validating
//	word 3: arrays 0xc0..0xff       as word 2
type stopSet [4]uint64

// newStopSet stops at primitive keys keys, node keys nodes and every invalid tag byte.
func newStopSet(keys, nodes uint64) stopSet { return stopSet{keys, math.MaxUint64, nodes, nodes} }

// keyBit is the stop-set bit of key id (none for ids above 63).
func keyBit(id uint32) uint64 {
	if id < 64 {
		return 1 << id
	}
	return 0
}

// skipShort is the one skip run of this package: from b[i:], it steps over every complete
// packet whose tag byte stop does not hold and whose header is short, and returns where it
// stopped and how many it stepped over. Written as a loop with nothing but the load and one
// add on the loop-carried chain, in a function of its own so that its few variables stay in
// registers.
func skipShort(b []byte, i int, stop *stopSet) (int, uint64) {
	skipped := uint64(0)
	for i+1 < len(b) {
		t, l := b[i], b[i+1]
		if stop[t>>6]>>(t&63)&1 != 0 {
			break
		}
		if l < 0x40 {
			// The hot path: one-byte length.
			next := i + 2 + int(l)
			if next > len(b) {
				break
			}
			i = next
		} else if l&0xc0 == 0x80 && i+2 < len(b) && b[i+2] < 0x80 {
			next := i + 3 + (int(l&0x3f)<<7 | int(b[i+2]))
			if next > len(b) {
				break
			}
			i = next
		} else {
			break
		}
		skipped++
	}
	return i, skipped
}

// readLength reads a PVarInt32 length field at the start of b. n == 0 (with a nil error)
// means b ends before the terminating group: feed more.
func readLength(b []byte) (v uint64, n int, err error) {
	if len(b) == 0 {
		return 0, 0, nil
	}
	if first := b[0]; first < 0x40 {
		return uint64(first), 1, nil
	}
	return readLengthSlow(b)
}

func readLengthSlow(b []byte) (uint64, int, error) {
	first := b[0]
	v := int64(first&0x7f) << 57 >> 57
	more := first&0x80 != 0
	i := 1
	for more {
		if i == maxLenBytes {
			return 0, 0, errVarintOverflow(i+1, 32)
		}
		if i >= len(b) {
			return 0, 0, nil
		}
		c := b[i]
		v = v<<7 | int64(c&0x7f)
		more = c&0x80 != 0
		i++
	}
	if v < 0 {
		return 0, 0, errNegativeLength(v)
	}
	if v > maxLen32 {
		return 0, 0, errVarintOverflow(i, 32)
	}
	return uint64(v), i, nil
}

// headerLen is the number of bytes the header of tag and an n-byte value takes in d.
func headerLen(t Tag, n int, d Dialect) int {
	return t.EncodedLen(d) + lengthLen(n)
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
	return appendLength(dst, n)
}

// appendLength appends the length of an n-byte value (0 <= n <= maxLen32) as PVarInt32: one
// group 00xxxxxx for 0..63, the usual case, else appendPVarint. lengthLen(n) bytes.
func appendLength(dst []byte, n int) []byte {
	if n < 0x40 {
		return append(dst, byte(n))
	}
	return appendPVarint(dst, int64(n))
}

// lengthLen is the number of bytes appendLength appends for n.
func lengthLen(n int) int { return pvarintLen(int64(n)) }
