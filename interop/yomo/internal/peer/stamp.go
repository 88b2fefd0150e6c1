package peer

import (
	"encoding/binary"
	"time"
)

// StampLen is the size of the stamp at the start of every payload a [Source] writes.
//
//	+----------------------+-----------------------------+-----------+
//	| seq: u64 big-endian  | send time: i64 big-endian,  | padding   |
//	|                      | Unix nanoseconds            | (zeros)   |
//	+----------------------+-----------------------------+-----------+
//	  8 bytes                8 bytes                       size - 16
const StampLen = 16

// Stamp returns a new payload of max(size, StampLen) bytes that starts with seq and sent.
// A fresh slice every time: YoMo's Write hands the slice to another goroutine and returns
// before the bytes are on the wire, so a payload must never be reused.
func Stamp(seq uint64, sent time.Time, size int) []byte {
	if size < StampLen {
		size = StampLen
	}
	p := make([]byte, size)
	binary.BigEndian.PutUint64(p[0:8], seq)
	binary.BigEndian.PutUint64(p[8:16], uint64(sent.UnixNano()))
	return p
}

// Unstamp reads the sequence number and send time (Unix nanoseconds) of a payload written by
// [Stamp]; ok is false when the payload is too short to hold a stamp.
func Unstamp(p []byte) (seq uint64, sentNanos int64, ok bool) {
	if len(p) < StampLen {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(p[0:8]), int64(binary.BigEndian.Uint64(p[8:16])), true
}
