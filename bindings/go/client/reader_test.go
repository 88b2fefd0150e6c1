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

// testFrames is one frame of every type, as the decoder returns them.
func testFrames() []client.Frame {
	md := map[string]string{client.MetaSourceID: "s", client.MetaTID: "t"}
	return []client.Frame{
		client.HandshakeAck{},
		client.Data{Tag: 0x10, Metadata: map[string]string{}, Payload: bytes.Repeat([]byte{0xab}, 300)},
		client.Handshake{Name: "n", ID: "i-0", ClientType: client.ClientStreamFunction, Observed: []uint32{1, 0xe001},
			AuthName: "token", AuthPayload: "p", Version: client.Version, WantedTarget: "w", ExtensionLevel: 1},
		client.Data{Tag: 0x11, Metadata: md, RawMetadata: client.EncodeMetadata(md), Payload: []byte{}, Hops: 3},
		client.Rejected{Message: "no", Code: client.CodeUnauthorized, HasCode: true},
		client.ConnectTo{Endpoint: "127.0.0.1:9001"},
		client.Goaway{Code: client.CodeShuttingDown, HasCode: true, Message: "router shutting down"},
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
			if d.RawMetadata != nil {
				d.RawMetadata = append([]byte{}, d.RawMetadata...)
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
		frames = append(frames, client.Data{Tag: uint32(i), Payload: []byte("0123456789")})
	}
	wire := encodeAll(t, frames)
	cr := &countingReader{r: bytes.NewReader(wire)}
	got, err := readAll(client.NewFrameReader(cr, 0))
	if err != io.EOF || len(got) != 500 {
		t.Fatal(err, len(got))
	}
	// 500 frames of about 20 bytes fit the 64 KiB buffer: one read for the data, one for
	// EOF.
	if cr.calls > 2 {
		t.Fatalf("%d reads", cr.calls)
	}
}

func TestReaderLargeFrames(t *testing.T) {
	big := client.Data{Tag: 1, Metadata: map[string]string{}, Payload: bytes.Repeat([]byte{7}, client.DefaultMaxFrameLen-20)}
	frames := []client.Frame{client.HandshakeAck{}, big, client.Goaway{Message: "m"}, big}
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

// Garbage fails on the first bytes, before anything else is read.
func TestReaderGarbageFailsOnTheFirstBytes(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		kind string
	}{
		{[]byte("GET / HTTP/1.1\r\n"), "invalid_tag"},
		{unhex(t, "1001"), "unknown_frame"},
		{unhex(t, "a0ff"), "unknown_frame"},
		{unhex(t, "ff00"), "unknown_frame"},
		{unhex(t, "b000"), "unknown_frame"},
		{unhex(t, "aa03"), "unknown_frame"},
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
	wire := encodeAll(t, []client.Frame{client.ConnectTo{Endpoint: "x:1"}})
	r := client.NewFrameReader(io.MultiReader(bytes.NewReader(wire), iotest.ErrReader(boom)), 0)
	if f, err := r.Next(); err != nil || f != (client.ConnectTo{Endpoint: "x:1"}) {
		t.Fatal(f, err)
	}
	if _, err := r.Next(); err != boom {
		t.Fatal(err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add(encodeAll(f, testFrames()), uint16(3))
	f.Add(unhex(f, "b1804b010c70726f62652d736f75726365031756315374475852385f5a356a64486936422d6d79542d3002015f06000405746f6b656e0506736563726574070a323032342d30312d303309000800"), uint16(1))
	f.Add(unhex(f, "bf1f010133031381a8796f6d6f2d746964a87469642d30303031020568656c6c6f"), uint16(7))
	f.Add(unhex(f, "bf12 300101 020178 20013f ba020000 0300 010102"), uint16(2))
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
