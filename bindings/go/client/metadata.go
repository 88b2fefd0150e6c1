package client

import (
	"encoding/binary"
	"slices"
)

// Metadata: a data frame's field 03 is a msgpack map of string to string, as YoMo's
// metadata.M (vmihailenco/msgpack v5) writes it. Only the forms below are read; anything
// else (nil for the map, integers, nested maps, bytes after the map) is bad_metadata.
// A string is any bytes (UTF-8 or not), and, as YoMo's decoder reads one, bin is a
// string of its bytes and nil the empty string (spec/frames.md, Metadata).
//
//	map header   fixmap 0x80|n (n < 16)   map16 de nn nn   map32 df nn nn nn nn
//	string       fixstr 0xa0|n (n < 32)   str8 d9 nn   str16 da nn nn   str32 db nn nn nn nn
//	             bin8 c4 nn   bin16 c5 nn nn   bin32 c6 nn nn nn nn   nil c0 (empty)
//
// An empty map is an empty field (zero bytes); a field of zero bytes reads as the empty map.
// Key order carries no meaning: YoMo writes Go's random map order, this package sorted keys.

// Metadata keys y3 and YoMo know (spec/frames.md, Metadata).
const (
	// MetaSourceID is the source's client id without its "-N" reconnect suffix.
	MetaSourceID = "yomo-source-id"
	// MetaTID is the transaction id: fresh for every message a source writes, kept by
	// stream functions on their outputs.
	MetaTID = "yomo-tid"
	// MetaTarget routes a frame only to the functions whose wanted target equals it;
	// functions drop it before writing.
	MetaTarget = "yomo-target"
	// MetaWantedTarget is set by the router: the sending connection's wanted target.
	MetaWantedTarget = "yomo-wanted-target"
)

const (
	mpFixmap = 0x80
	mpMap16  = 0xde
	mpMap32  = 0xdf
	mpFixstr = 0xa0
	mpStr8   = 0xd9
	mpStr16  = 0xda
	mpStr32  = 0xdb
	mpNil    = 0xc0
	mpBin8   = 0xc4
	mpBin16  = 0xc5
	mpBin32  = 0xc6
)

func mpStrLen(n int) int {
	switch {
	case n < 32:
		return 1 + n
	case n < 1<<8:
		return 2 + n
	case n < 1<<16:
		return 3 + n
	}
	return 5 + n
}

func appendMpStr(dst []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		dst = append(dst, mpFixstr|byte(n))
	case n < 1<<8:
		dst = append(dst, mpStr8, byte(n))
	case n < 1<<16:
		dst = append(dst, mpStr16)
		dst = binary.BigEndian.AppendUint16(dst, uint16(n))
	default:
		dst = append(dst, mpStr32)
		dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	}
	return append(dst, s...)
}

func mpMapHeaderLen(n int) int {
	switch {
	case n < 16:
		return 1
	case n < 1<<16:
		return 3
	}
	return 5
}

func appendMpMapHeader(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, mpFixmap|byte(n))
	case n < 1<<16:
		dst = append(dst, mpMap16)
		return binary.BigEndian.AppendUint16(dst, uint16(n))
	}
	dst = append(dst, mpMap32)
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

// MetadataLen is the number of bytes AppendMetadata writes for m (0 for an empty map).
func MetadataLen(m map[string]string) int {
	if len(m) == 0 {
		return 0
	}
	n := mpMapHeaderLen(len(m))
	for k, v := range m {
		n += mpStrLen(len(k)) + mpStrLen(len(v))
	}
	return n
}

// AppendMetadata appends m as msgpack, keys in sorted order (nothing for an empty map).
func AppendMetadata(dst []byte, m map[string]string) []byte {
	if len(m) == 0 {
		return dst
	}
	dst = appendMpMapHeader(dst, len(m))
	if len(m) == 1 {
		for k, v := range m {
			return appendMpStr(appendMpStr(dst, k), v)
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst = appendMpStr(appendMpStr(dst, k), m[k])
	}
	return dst
}

// EncodeMetadata returns m as msgpack (see AppendMetadata; nil for an empty map).
func EncodeMetadata(m map[string]string) []byte {
	if len(m) == 0 {
		return nil
	}
	return AppendMetadata(make([]byte, 0, MetadataLen(m)), m)
}

// appendMetadataPairs appends the map of the given key/value pairs, in the order given
// (the caller gives distinct keys, sorted).
func appendMetadataPairs(dst []byte, kv ...string) []byte {
	dst = appendMpMapHeader(dst, len(kv)/2)
	for _, s := range kv {
		dst = appendMpStr(dst, s)
	}
	return dst
}

// mpReader walks metadata bytes. Every length is checked against the bytes present before
// it is used, so hostile lengths cost nothing. An error's Offset is where reading stopped:
// the byte that is not what it should be, or the start of what the bytes do not hold.
type mpReader struct {
	b   []byte
	off int
}

func (r *mpReader) fail() error {
	return &Error{Kind: KindBadMetadata, Offset: uint64(r.off)}
}

// take returns the next n bytes.
func (r *mpReader) take(n uint64) ([]byte, error) {
	if n > uint64(len(r.b)-r.off) {
		return nil, r.fail()
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s, nil
}

func (r *mpReader) uint(size int) (uint64, error) {
	b, err := r.take(uint64(size))
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v, nil
}

// mapLen reads a map header.
func (r *mpReader) mapLen() (uint64, error) {
	at := r.off
	b, err := r.take(1)
	if err != nil {
		return 0, err
	}
	switch c := b[0]; {
	case c&0xf0 == mpFixmap:
		return uint64(c & 0x0f), nil
	case c == mpMap16:
		return r.uint(2)
	case c == mpMap32:
		return r.uint(4)
	}
	r.off = at
	return 0, r.fail()
}

// str reads a string, borrowed.
func (r *mpReader) str() ([]byte, error) {
	at := r.off
	b, err := r.take(1)
	if err != nil {
		return nil, err
	}
	var n uint64
	switch c := b[0]; {
	case c&0xe0 == mpFixstr:
		n = uint64(c & 0x1f)
	case c == mpNil:
		n = 0
	case c == mpStr8 || c == mpBin8:
		n, err = r.uint(1)
	case c == mpStr16 || c == mpBin16:
		n, err = r.uint(2)
	case c == mpStr32 || c == mpBin32:
		n, err = r.uint(4)
	default:
		r.off = at
		return nil, r.fail()
	}
	if err != nil {
		return nil, err
	}
	return r.take(n)
}

// walkMetadata reads raw as a string map, calling each (when not nil) for every pair in
// order, values borrowed.
func walkMetadata(raw []byte, each func(k, v []byte)) (int, error) {
	if len(raw) == 0 {
		return 0, nil
	}
	r := mpReader{b: raw}
	n, err := r.mapLen()
	if err != nil {
		return 0, err
	}
	// Every pair takes at least two bytes: a count beyond that is a lie, refused before
	// anything is allocated for it.
	if n > uint64(len(raw)-r.off)/2 {
		return 0, r.fail()
	}
	for range n {
		k, err := r.str()
		if err != nil {
			return 0, err
		}
		v, err := r.str()
		if err != nil {
			return 0, err
		}
		if each != nil {
			each(k, v)
		}
	}
	if r.off != len(raw) {
		return 0, r.fail()
	}
	return int(n), nil
}

// CheckMetadata reports whether raw is a valid metadata field, without allocating.
//
// Errors: bad_metadata (field Offset).
func CheckMetadata(raw []byte) error {
	_, err := walkMetadata(raw, nil)
	return err
}

// DecodeMetadata reads raw (a data frame's field 03) as a map; a repeated key keeps its
// last value. Zero bytes are the empty map (not nil). Keys and values are copies.
//
// Errors: bad_metadata (field Offset), for anything but a msgpack map of strings to
// strings filling raw exactly.
func DecodeMetadata(raw []byte) (map[string]string, error) {
	n, err := walkMetadata(raw, nil)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, n)
	_, _ = walkMetadata(raw, func(k, v []byte) { m[string(k)] = string(v) })
	return m, nil
}
