package client_test

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"runtime"
	"testing"
	"testing/iotest"

	"github.com/y3-dev/y3/bindings/go/client"
)

func testFrames() []client.Frame {
	return []client.Frame{
		client.Ping{Nonce: 1},
		client.Data{Tag: 0x10, ID: 7, Payload: bytes.Repeat([]byte{0xab}, 300)},
		client.Pong{Nonce: 2},
		client.Data{Tag: 0x11, ID: 8, Payload: []byte{}, Metadata: []byte("meta")},
		client.Goaway{Code: client.CodeShuttingDown, Reason: "router shutting down"},
	}
}

func encodeAll(t testing.TB, frames []client.Frame) []byte {
	var wire []byte
	for _, f := range frames {
		var err error
		if wire, err = client.AppendFrame(wire, f, 0); err != nil {
			t.Fatal(err)
		}
	}
	return wire
}

// readAll reads every frame, copying payloads (they borrow the buffer until the next call).
func readAll(r *client.FrameReader) ([]client.Frame, error) {
	var out []client.Frame
	for {
		f, err := r.Next()
		if err != nil {
			return out, err
		}
		if d, ok := f.(client.Data); ok {
			d.Payload = append([]byte{}, d.Payload...)
			if d.Metadata != nil {
				d.Metadata = append([]byte{}, d.Metadata...)
			}
			f = d
		}
		out = append(out, f)
	}
}

// chunks is a reader returning its chunks one Read at a time.
type chunks struct{ parts [][]byte }

func (c *chunks) Read(p []byte) (int, error) {
	for len(c.parts) > 0 && len(c.parts[0]) == 0 {
		c.parts = c.parts[1:]
	}
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	c.parts[0] = c.parts[0][n:]
	return n, nil
}

func TestReaderEverySplitPoint(t *testing.T) {
	frames := testFrames()
	wire := encodeAll(t, frames)
	for split := 0; split <= len(wire); split++ {
		r := client.NewFrameReader(&chunks{parts: [][]byte{wire[:split], wire[split:]}}, 0)
		got, err := readAll(r)
		if err != io.EOF {
			t.Fatalf("split %d: %v", split, err)
		}
		if !reflect.DeepEqual(got, frames) {
			t.Fatalf("split %d: %#v", split, got)
		}
	}
	r := client.NewFrameReader(iotest.OneByteReader(bytes.NewReader(wire)), 0)
	got, err := readAll(r)
	if err != io.EOF || !reflect.DeepEqual(got, frames) {
		t.Fatalf("one byte at a time: %v %#v", err, got)
	}
}

// countingReader counts Read calls.
type countingReader struct {
	r     io.Reader
	calls int
}

func (c *countingReader) Read(p []byte) (int, error) { c.calls++; return c.r.Read(p) }

func TestReaderDecodesEveryBufferedFrameWithoutReading(t *testing.T) {
	var frames []client.Frame
	for i := range 500 {
		frames = append(frames, client.Data{Tag: 0x10, ID: uint64(i), Payload: []byte("0123456789")})
	}
	wire := encodeAll(t, frames)
	cr := &countingReader{r: bytes.NewReader(wire)}
	got, err := readAll(client.NewFrameReader(cr, 0))
	if err != io.EOF || len(got) != 500 {
		t.Fatal(err, len(got))
	}
	// 500 frames of 19 bytes fit the 64 KiB buffer: one read for the data, one for EOF.
	if cr.calls > 2 {
		t.Fatalf("%d reads", cr.calls)
	}
}

func TestReaderLargeFrames(t *testing.T) {
	big := client.Data{Tag: 1, ID: 1, Payload: bytes.Repeat([]byte{7}, client.DefaultMaxFrameLen-20)}
	frames := []client.Frame{client.Ping{Nonce: 1}, big, client.Pong{Nonce: 3}, big}
	wire := encodeAll(t, frames)
	for _, r := range []io.Reader{bytes.NewReader(wire), iotest.HalfReader(bytes.NewReader(wire))} {
		got, err := readAll(client.NewFrameReader(r, 0))
		if err != io.EOF || !reflect.DeepEqual(got, frames) {
			t.Fatalf("%v %d", err, len(got))
		}
	}
}

func TestReaderRefusesHugeDeclaredLengthFromTheHeader(t *testing.T) {
	// A data frame declaring 2^31-1 bytes: bf, then PVarInt 7fffffff = 87 ff ff ff 7f.
	r := client.NewFrameReader(bytes.NewReader(unhex(t, "bf 87ffffff7f")), 1024)
	_, err := r.Next()
	var e *client.Error
	if !errors.As(err, &e) || e.Kind != client.KindTooLong || e.Declared != 2147483647 || e.Limit != 1024 {
		t.Fatalf("%#v", err)
	}
	if _, again := r.Next(); again != err {
		t.Fatal("errors are sticky")
	}
	// Just under a large limit: accepted, waiting for a body that never comes.
	r = client.NewFrameReader(bytes.NewReader(unhex(t, "bf 84808000")), 16<<20)
	if _, err = r.Next(); client.KindOf(err) != client.KindTruncated {
		t.Fatalf("%v", err)
	}
}

type runtimeMem struct{ total uint64 }

func (m *runtimeMem) read() {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.total = s.TotalAlloc
}

func TestReaderBufferGrowsWithWhatArrives(t *testing.T) {
	// Declares 8 MiB and sends 10 bytes of it: the reader must not allocate 8 MiB.
	head := unhex(t, "bf 84808000")
	src := io.MultiReader(bytes.NewReader(head), bytes.NewReader(make([]byte, 10)))
	var before, after runtimeMem
	before.read()
	r := client.NewFrameReader(src, 16<<20)
	_, err := r.Next()
	after.read()
	if client.KindOf(err) != client.KindTruncated {
		t.Fatal(err)
	}
	if grew := after.total - before.total; grew > 1<<20 {
		t.Fatalf("allocated %d bytes for a 10-byte body", grew)
	}
}

// The kinds the Rust codec (codec.rs garbage_fails_on_the_first_bytes) reports.
func TestReaderGarbageFailsOnTheFirstBytes(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		kind string
	}{
		{[]byte("GET / HTTP/1.1\r\n"), "invalid_tag"},
		{unhex(t, "1001"), "unknown_frame"},
		{unhex(t, "a0ff"), "unknown_frame"},
		{unhex(t, "ff00"), "unknown_frame"},
		{unhex(t, "bf7f"), "negative_length"},
		{unhex(t, "bf8080808080"), "varint_overflow"},
		{unhex(t, "bf8fffffff7f"), "varint_overflow"},
	} {
		// Followed by a never-ending stream: the error must come from the first bytes.
		r := client.NewFrameReader(io.MultiReader(bytes.NewReader(c.in), neverEnding{}), 0)
		_, err := r.Next()
		if string(client.KindOf(err)) != c.kind {
			t.Errorf("% x: %v, want %s", c.in, err, c.kind)
		}
	}
}

type neverEnding struct{}

func (neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 0
	}
	return len(p), nil
}

func TestReaderTruncatedAtEOF(t *testing.T) {
	r := client.NewFrameReader(bytes.NewReader(unhex(t, "bf0b 010110")), 0)
	_, err := r.Next()
	var e *client.Error
	if !errors.As(err, &e) || e.Kind != client.KindTruncated || e.Buffered != 5 {
		t.Fatalf("%#v", err)
	}
	r = client.NewFrameReader(bytes.NewReader(nil), 0)
	if _, err := r.Next(); err != io.EOF {
		t.Fatal(err)
	}
}

func TestReaderPassesReadErrorsThrough(t *testing.T) {
	boom := errors.New("boom")
	wire := encodeAll(t, []client.Frame{client.Ping{Nonce: 5}})
	r := client.NewFrameReader(io.MultiReader(bytes.NewReader(wire), iotest.ErrReader(boom)), 0)
	if f, err := r.Next(); err != nil || f != (client.Ping{Nonce: 5}) {
		t.Fatal(f, err)
	}
	if _, err := r.Next(); err != boom {
		t.Fatal(err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add(encodeAll(f, testFrames()), uint16(3))
	f.Add(unhex(f, "b115 010101 020102 030166 040174 c507 000110 00028400"), uint16(1))
	f.Add(unhex(f, "bf0c 050178 20013f 020101 010102"), uint16(7))
	f.Fuzz(func(t *testing.T, wire []byte, step uint16) {
		// However the input is split, the reader sees the same frames and the same error.
		one, oneErr := readAll(client.NewFrameReader(bytes.NewReader(wire), 4096))
		var parts [][]byte
		n := int(step%64) + 1
		for i := 0; i < len(wire); i += n {
			parts = append(parts, wire[i:min(i+n, len(wire))])
		}
		split, splitErr := readAll(client.NewFrameReader(&chunks{parts: parts}, 4096))
		if !reflect.DeepEqual(one, split) {
			t.Fatalf("frames differ: %#v vs %#v", one, split)
		}
		if client.KindOf(oneErr) != client.KindOf(splitErr) || (oneErr == io.EOF) != (splitErr == io.EOF) {
			t.Fatalf("errors differ: %v vs %v", oneErr, splitErr)
		}
		// Every frame read re-encodes to a frame that decodes to itself.
		for _, fr := range one {
			b, err := client.EncodeFrame(fr, 4096)
			if err != nil {
				t.Fatal(err)
			}
			back, err := client.DecodeFrame(b, 4096)
			if err != nil || !reflect.DeepEqual(back, fr) {
				t.Fatalf("%#v -> %x -> %#v %v", fr, b, back, err)
			}
		}
	})
}
