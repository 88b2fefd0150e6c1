package client

import (
	"errors"
	"io"

	y3 "github.com/y3-dev/y3/bindings/go"
)

// ReadBuffer is the initial read buffer: one Read takes up to this many bytes of frames.
const ReadBuffer = 64 << 10

// maxReserve is the most bytes the buffer grows ahead of what has arrived while waiting
// for the rest of a large frame: a peer that declares 1 MiB and trickles it in makes the
// buffer grow with what actually arrives (as the Rust codec's MAX_RESERVE).
const maxReserve = 64 << 10

// FrameReader splits a byte stream into frames. Each Read takes as much as the stream has
// (up to the free buffer space), and every complete frame in the buffer is then decoded
// without another read.
//
// The declared length of every frame is checked against the limit as soon as its header
// (at most 6 bytes) has arrived, before any of the body is buffered: a 2 GiB declaration
// fails at once with too_long (YoMo itself buffers any length up to 2 GiB). A first byte
// that is not a known frame's tag fails at once too (invalid_tag for 0x40..0x7f, such as
// ASCII text; unknown_frame otherwise).
//
// Errors are sticky: after one, Next returns it again.
type FrameReader struct {
	r          io.Reader
	buf        []byte
	start, end int
	cfg        y3.Config
	limit      int
	readErr    error // from r, reported once the buffered frames are consumed
	err        error // sticky decode error
}

// NewFrameReader reads frames from r, refusing bodies above maxLen bytes (zero or less:
// DefaultMaxFrameLen).
func NewFrameReader(r io.Reader, maxLen int) *FrameReader {
	return &FrameReader{
		r:     r,
		buf:   make([]byte, ReadBuffer),
		cfg:   frameConfig(maxLen),
		limit: frameLimit(maxLen),
	}
}

// Buffered is the number of bytes read from the stream and not yet returned as frames.
func (fr *FrameReader) Buffered() int { return fr.end - fr.start }

// Next returns the next frame. The Payload and RawMetadata of a Data frame borrow the
// reader's buffer and are valid until the next call; copy them to keep them. Its Metadata
// map is its own.
//
// At the end of the stream Next returns io.EOF, or a truncated error when the stream
// stopped inside a frame; read errors are returned as they are.
func (fr *FrameReader) Next() (Frame, error) {
	var d Data
	f, err := fr.next(&d)
	if err == nil && f == nil {
		// Checked by the decoder: cannot fail.
		d.Metadata, _ = DecodeMetadata(d.RawMetadata)
		return d, nil
	}
	return f, err
}

// NextData is Next for the hot path: a data frame is decoded into *d (borrowing the
// buffer as Next does, its metadata checked but left undecoded: Metadata is nil, see
// DecodeMetadata) and reported with a nil Frame; any other frame is returned. It does not
// allocate.
func (fr *FrameReader) NextData(d *Data) (Frame, error) { return fr.next(d) }

func (fr *FrameReader) next(d *Data) (Frame, error) {
	if fr.err != nil {
		return nil, fr.err
	}
	for {
		avail := fr.buf[fr.start:fr.end]
		need := 1
		if len(avail) > 0 {
			total, err := fr.frameSize(avail)
			if err != nil {
				fr.err = err
				return nil, err
			}
			if total > 0 && len(avail) >= total {
				f, err := fr.decode(avail[:total:total], d)
				if err != nil {
					fr.err = err
					return nil, err
				}
				fr.start += total
				return f, nil
			}
			if total > 0 {
				need = total
			} else {
				need = len(avail) + 1
			}
		}
		if fr.readErr != nil {
			err := fr.readErr
			if errors.Is(err, io.EOF) && len(avail) > 0 {
				err = &Error{Kind: KindTruncated, Buffered: uint64(len(avail))}
			}
			fr.err = err
			return nil, err
		}
		fr.fill(need)
	}
}

func (fr *FrameReader) decode(buf []byte, d *Data) (Frame, error) {
	p, t, err := parseFrame(buf, &fr.cfg)
	if err != nil {
		return nil, err
	}
	if t == TypeData {
		return nil, decodeDataInto(p, d)
	}
	return decodePacket(p, t)
}

// frameSize returns the size of the frame that starts avail, or 0 when its header has not
// fully arrived. The first byte and the declared length are checked here.
func (fr *FrameReader) frameSize(avail []byte) (int, error) {
	first := avail[0]
	if first&0xc0 == 0x40 {
		return 0, codecError(&y3.Error{Kind: y3.KindInvalidTag, Tag: uint32(first)})
	}
	if first&0xc0 != 0x80 || !FrameType(first&0x3f).known() {
		return 0, &Error{Kind: KindUnknownFrame, Tag: uint32(first & 0x3f)}
	}
	// The length: PVarInt32, 1..5 bytes.
	if len(avail) < 2 {
		return 0, nil
	}
	var v int64
	n := 0
	if b := avail[1]; b < 0x40 {
		v, n = int64(b), 1
	} else {
		v = int64(b&0x7f) << 57 >> 57
		more := b&0x80 != 0
		n = 1
		for more {
			if n == 5 || 1+n >= len(avail) {
				if n == 5 {
					return 0, fr.headerError(avail)
				}
				return 0, nil // the header has not fully arrived
			}
			c := avail[1+n]
			v = v<<7 | int64(c&0x7f)
			more = c&0x80 != 0
			n++
		}
		if v < 0 || v > 0x7fffffff {
			return 0, fr.headerError(avail)
		}
	}
	if v > int64(fr.limit) {
		return 0, &Error{Kind: KindTooLong, Declared: uint64(v), Limit: uint64(fr.limit)}
	}
	return 1 + n + int(v), nil
}

// headerError asks the codec what is wrong with a header the scan above refused, so that
// the error is the codec's own (negative_length, varint_overflow).
func (fr *FrameReader) headerError(avail []byte) error {
	head := avail[:min(len(avail), 6)]
	if _, _, err := fr.cfg.Parse(head); err != nil && y3.KindOf(err) != y3.KindUnexpectedEnd {
		return codecError(err)
	}
	return codecError(&y3.Error{Kind: y3.KindVarintOverflow, Len: 6, Bits: 32})
}

// fill reads once, making sure that at least need bytes (from start) fit the buffer, but
// never growing more than maxReserve (or twice what has arrived) ahead of the data.
func (fr *FrameReader) fill(need int) {
	if fr.start == fr.end {
		fr.start, fr.end = 0, 0
		if len(fr.buf) > 4*ReadBuffer && need <= ReadBuffer {
			fr.buf = make([]byte, ReadBuffer) // give a large frame's buffer back
		}
	}
	if fr.start > 0 && (need > len(fr.buf)-fr.start || fr.end == len(fr.buf)) {
		n := copy(fr.buf, fr.buf[fr.start:fr.end])
		fr.start, fr.end = 0, n
	}
	if need > len(fr.buf) {
		have := fr.end
		size := min(need, max(have+maxReserve, 2*have, len(fr.buf)))
		if size > len(fr.buf) {
			grown := make([]byte, size)
			copy(grown, fr.buf[:fr.end])
			fr.buf = grown
		}
	}
	n, err := fr.r.Read(fr.buf[fr.end:])
	if n < 0 || n > len(fr.buf)-fr.end {
		n, err = 0, io.ErrShortBuffer // a broken reader
	}
	fr.end += n
	if err != nil {
		fr.readErr = err
	}
}
