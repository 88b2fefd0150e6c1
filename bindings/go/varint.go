package y3

import (
	"math"
	"math/bits"
)

// The three integer encodings.
//
// PVarInt: big-endian 7-bit groups, continuation bit 0x80 on every byte but the last; the
// first group is sign-padded, so bit 0x40 of the first byte is the sign.
//
//	  63 -> 3f         64 -> 80 40      -1 -> 7f       -65 -> ff 3f
//	 128 -> 81 00    8192 -> 80 c0 00   MaxInt32 -> 87 ff ff ff 7f
//
// NVarInt: minimal big-endian two's complement, no continuation bits.
//
//	  -1 -> ff        128 -> 00 80      8191 -> 1f ff
//
// UVarInt (draft-02 tags only): unsigned big-endian 7-bit groups, continuation bit 0x80.

const (
	// maxLenBytes is the longest a PVarInt32 length may be (35 bits hold any int32).
	maxLenBytes = 5
	// maxLen32 is the largest length a signed 32-bit length field carries.
	maxLen32 = math.MaxInt32
	// draft02TagBytes is the longest a draft-02 tag may be.
	draft02TagBytes = 4
	// maxHeaderLen is the longest header of any dialect: a 4-byte tag and a 5-byte length.
	maxHeaderLen = draft02TagBytes + maxLenBytes
	// maxScalarLen is the longest encoded scalar (a 10-byte PVarInt64).
	maxScalarLen = 10
)

// signedBits is the number of significant bits of v in two's complement, sign included.
func signedBits(v int64) int {
	if v < 0 {
		return 65 - bits.LeadingZeros64(^uint64(v))
	}
	return 65 - bits.LeadingZeros64(uint64(v))
}

// pvarintLen is the number of bytes PVarInt uses for v (1..10).
func pvarintLen(v int64) int { return (signedBits(v) + 6) / 7 }

// appendPVarint appends v as PVarInt.
func appendPVarint(dst []byte, v int64) []byte {
	n := pvarintLen(v)
	for i := n - 1; i > 0; i-- {
		dst = append(dst, byte(v>>(7*uint(i)))&0x7f|0x80)
	}
	return append(dst, byte(v)&0x7f)
}

// readPVarint reads a value that consists of exactly one PVarInt that must fit in bitSize
// (32 or 64) bits. Redundant sign groups are accepted when the value fits.
func readPVarint(value []byte, bitSize uint32) (int64, error) {
	if len(value) == 0 {
		return 0, errInvalidLength(0, 1, math.MaxUint32)
	}
	first := value[0]
	v := int64(first&0x7f) << 57 >> 57 // sign-extend the first group
	more := first&0x80 != 0
	for i := 1; i < len(value); i++ {
		if !more {
			return 0, errTrailingBytes(len(value) - i)
		}
		if v<<7>>7 != v {
			return 0, errVarintOverflow(len(value), bitSize)
		}
		b := value[i]
		v = v<<7 | int64(b&0x7f)
		more = b&0x80 != 0
	}
	if more {
		return 0, errVarintUnterminated(len(value))
	}
	if bitSize == 32 && int64(int32(v)) != v {
		return 0, errVarintOverflow(len(value), bitSize)
	}
	return v, nil
}

// nvarintLen is the number of bytes NVarInt uses for v (1..8).
func nvarintLen(v int64) int { return (signedBits(v) + 7) / 8 }

// appendNVarint appends v as NVarInt.
func appendNVarint(dst []byte, v int64) []byte {
	for i := nvarintLen(v) - 1; i >= 0; i-- {
		dst = append(dst, byte(v>>(8*uint(i))))
	}
	return dst
}

// readNVarint reads a value that consists of exactly one NVarInt that must fit in bitSize
// bits. Redundant sign bytes are accepted when the value fits.
func readNVarint(value []byte, bitSize uint32) (int64, error) {
	if len(value) == 0 {
		return 0, errInvalidLength(0, 1, math.MaxUint32)
	}
	v := int64(int8(value[0]))
	for _, b := range value[1:] {
		if v<<8>>8 != v {
			return 0, errVarintOverflow(len(value), bitSize)
		}
		v = v<<8 | int64(b)
	}
	if bitSize == 32 && int64(int32(v)) != v {
		return 0, errVarintOverflow(len(value), bitSize)
	}
	return v, nil
}

// uvarintLen is the number of bytes the unsigned 7-bit-group varint uses for v.
func uvarintLen(v uint32) int {
	n := 32 - bits.LeadingZeros32(v)
	if n == 0 {
		return 1
	}
	return (n + 6) / 7
}

// appendUVarint appends v as an unsigned big-endian 7-bit-group varint.
func appendUVarint(dst []byte, v uint32) []byte {
	n := uvarintLen(v)
	for i := n - 1; i > 0; i-- {
		dst = append(dst, byte(v>>(7*uint(i)))&0x7f|0x80)
	}
	return append(dst, byte(v)&0x7f)
}

// readUVarint reads an unsigned 7-bit-group varint of at most maxBytes bytes. n == 0 (with a
// nil error) means b ends first.
func readUVarint(b []byte, maxBytes int) (v uint32, n int, err error) {
	for i := 0; i < maxBytes; i++ {
		if i >= len(b) {
			return 0, 0, nil
		}
		c := b[i]
		v = v<<7 | uint32(c&0x7f)
		if c&0x80 == 0 {
			return v, i + 1, nil
		}
	}
	return 0, 0, errVarintOverflow(maxBytes+1, uint32(7*maxBytes))
}

// intLen is the number of bytes the integer v takes in dialect d.
func intLen(d Dialect, v int64) int {
	if d == NVarInt {
		return nvarintLen(v)
	}
	return pvarintLen(v)
}

// appendInt appends the integer v in dialect d.
func appendInt(dst []byte, d Dialect, v int64) []byte {
	if d == NVarInt {
		return appendNVarint(dst, v)
	}
	return appendPVarint(dst, v)
}

// readInt reads an integer value in dialect d that must fit in bitSize bits.
func readInt(d Dialect, value []byte, bitSize uint32) (int64, error) {
	if d == NVarInt {
		return readNVarint(value, bitSize)
	}
	return readPVarint(value, bitSize)
}
