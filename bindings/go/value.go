package y3

import (
	"math"
	"math/bits"
	"unicode/utf8"
)

// Primitive value codecs.
//
//	int32/int64    golang, draft02: PVarInt       nvarint: minimal two's complement
//	uint32/uint64  the signed integer with the same bits (uint32 128 -> int32 128 -> 81 00,
//	               MaxUint32 -> int32 -1 -> 7f, MaxUint64 -> int64 -1 -> 7f)
//	float32/64     VarFloat: big-endian IEEE-754 bits, trailing zero bytes dropped, at least
//	               one byte kept (1.5f32 -> 3f c0, 0.0 -> 00, -0.0 -> 80)
//	bool           the integer 0 or 1
//	string         UTF-8 bytes;  bytes: raw

func decodeInt32(d Dialect, value []byte) (int32, error) {
	v, err := readInt(d, value, 32)
	return int32(v), err
}

func decodeInt64(d Dialect, value []byte) (int64, error) {
	return readInt(d, value, 64)
}

// decodeUint32 reads the int32 with the same bits, or a non-negative integer that fits in 32
// bits (nvarint writers may send MaxUint32 as 00 ff ff ff ff).
func decodeUint32(d Dialect, value []byte) (uint32, error) {
	v, err := readInt(d, value, 64)
	if err != nil {
		return 0, err
	}
	if int64(int32(v)) == v {
		return uint32(int32(v)), nil
	}
	if v >= 0 && v <= math.MaxUint32 {
		return uint32(v), nil
	}
	return 0, errVarintOverflow(len(value), 32)
}

func decodeUint64(d Dialect, value []byte) (uint64, error) {
	v, err := readInt(d, value, 64)
	return uint64(v), err
}

// decodeBool reads the integer 0 or 1; any other integer is invalid_bool (the reference
// reads them as false).
func decodeBool(d Dialect, value []byte) (bool, error) {
	v, err := readInt(d, value, 64)
	if err != nil {
		return false, err
	}
	switch v {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, &Error{Kind: KindInvalidBool, Value: v}
}

// varfloatLen is the number of bytes VarFloat keeps of the left-aligned IEEE bits of a
// width-byte float.
func varfloatLen(leftAligned uint64, width int) int {
	zero := bits.TrailingZeros64(leftAligned) / 8
	if zero > 7 {
		zero = 7
	}
	return min(8-zero, width)
}

func float32Len(v float32) int { return varfloatLen(uint64(math.Float32bits(v))<<32, 4) }

func float64Len(v float64) int { return varfloatLen(math.Float64bits(v), 8) }

func appendFloat32Value(dst []byte, v float32) []byte {
	b := math.Float32bits(v)
	for i := range float32Len(v) {
		dst = append(dst, byte(b>>(24-8*uint(i))))
	}
	return dst
}

func appendFloat64Value(dst []byte, v float64) []byte {
	b := math.Float64bits(v)
	for i := range float64Len(v) {
		dst = append(dst, byte(b>>(56-8*uint(i))))
	}
	return dst
}

// decodeFloat32 reads a 1..4-byte VarFloat, padding zeros on the right.
func decodeFloat32(value []byte) (float32, error) {
	if len(value) == 0 || len(value) > 4 {
		return 0, errInvalidLength(len(value), 1, 4)
	}
	var b uint32
	for i, c := range value {
		b |= uint32(c) << (24 - 8*uint(i))
	}
	return math.Float32frombits(b), nil
}

// decodeFloat64 reads a 1..8-byte VarFloat, padding zeros on the right.
func decodeFloat64(value []byte) (float64, error) {
	if len(value) == 0 || len(value) > 8 {
		return 0, errInvalidLength(len(value), 1, 8)
	}
	var b uint64
	for i, c := range value {
		b |= uint64(c) << (56 - 8*uint(i))
	}
	return math.Float64frombits(b), nil
}

// checkUTF8 returns invalid_utf8 with the length of the valid prefix.
func checkUTF8(value []byte) error {
	if utf8.Valid(value) {
		return nil
	}
	n := 0
	for n < len(value) {
		r, size := utf8.DecodeRune(value[n:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		n += size
	}
	return &Error{Kind: KindInvalidUTF8, ValidUpTo: uint64(n)}
}
