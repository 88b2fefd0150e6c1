package client_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	y3 "github.com/y3-dev/y3/bindings/go"
	"github.com/y3-dev/y3/bindings/go/client"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// normalized is f as the decoder returns it: a data frame's metadata as a map (empty, not
// nil) with RawMetadata its encoding, an empty payload as []byte{}, a handshake's empty
// observed list and function definition as nil.
func normalized(t testing.TB, f client.Frame) client.Frame {
	switch f := f.(type) {
	case *client.Data:
		return normalized(t, *f)
	case client.Data:
		if f.RawMetadata == nil {
			f.RawMetadata = client.EncodeMetadata(f.Metadata)
		}
		if len(f.RawMetadata) == 0 {
			f.RawMetadata = nil
		}
		m, err := client.DecodeMetadata(f.RawMetadata)
		if err != nil {
			t.Fatal(err)
		}
		f.Metadata = m
		if f.Payload == nil {
			f.Payload = []byte{}
		}
		return f
	case client.Rejected:
		f.HasCode = f.HasCode || f.Code != 0
		return f
	case client.Goaway:
		f.HasCode = f.HasCode || f.Code != 0
		return f
	case client.Handshake:
		if len(f.Observed) == 0 {
			f.Observed = nil
		}
		if len(f.FunctionDefinition) == 0 {
			f.FunctionDefinition = nil
		}
		return f
	}
	return f
}

// roundtrip encodes f, checks EncodedLen, decodes it back and checks that the frame is a
// well-formed NVarInt Y3 packet; it returns the bytes.
func roundtrip(t *testing.T, f client.Frame) []byte {
	t.Helper()
	b, err := client.EncodeFrame(f, 1<<20)
	if err != nil {
		t.Fatalf("%#v: %v", f, err)
	}
	if len(b) != client.EncodedLen(f) {
		t.Fatalf("%#v: EncodedLen %d, wrote %d", f, client.EncodedLen(f), len(b))
	}
	back, err := client.DecodeFrame(b, 1<<20)
	if err != nil {
		t.Fatalf("%#v: decode %x: %v", f, b, err)
	}
	if want := normalized(t, f); !reflect.DeepEqual(back, want) {
		t.Fatalf("roundtrip %x:\n got %#v\nwant %#v", b, back, want)
	}
	if _, err := y3.ConfigFor(y3.NVarInt).Decode(b); err != nil {
		t.Fatalf("%x is not a Y3 packet: %v", b, err)
	}
	again, err := client.EncodeFrame(back, 1<<20)
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("re-encoding the decoded frame: %x, want %x (%v)", again, b, err)
	}
	return b
}

// The byte layouts of spec/frames.md: YoMo's fields in YoMo's order, every one written,
// then y3's fields (30) when not zero.
func TestFrameLayouts(t *testing.T) {
	cases := []struct {
		name  string
		frame client.Frame
		hex   string
	}{
		{"handshake ack", client.HandshakeAck{}, "a900"},
		{"data: tag 0x33, one key, hello (spec example, codec-04)", client.Data{Tag: 0x33,
			Metadata: map[string]string{"yomo-tid": "tid-0001"}, Payload: []byte("hello")},
			"bf1f 010133 0313 81 a8 796f6d6f2d746964 a8 7469642d30303031 0205 68656c6c6f"},
		{"data: hops", client.Data{Tag: 0x10, Payload: []byte{1}, Hops: 2}, "bf0b 010110 0300 020101 300102"},
		{"data: tag 0x80 is 00 80", client.Data{Tag: 0x80, Payload: []byte{}}, "bf08 01020080 0300 0200"},
		{"data: tag 0xffffffff is ff", client.Data{Tag: math.MaxUint32, Payload: []byte{}}, "bf07 0101ff 0300 0200"},
		{"data: tag 0xffffff80 is 80", client.Data{Tag: 0xffffff80, Payload: []byte{}}, "bf07 010180 0300 0200"},
		{"data: tag 0x7fffffff", client.Data{Tag: math.MaxInt32, Payload: []byte{}}, "bf0a 01047fffffff 0300 0200"},
		{"data: tag 0x80000000", client.Data{Tag: 0x80000000, Payload: []byte{}}, "bf0a 010480000000 0300 0200"},
		{"data: hops max", client.Data{Tag: 1, Payload: []byte{}, Hops: math.MaxUint32}, "bf0a 010101 0300 0200 3001ff"},
		{"data: raw metadata written as given", client.Data{Tag: 1, RawMetadata: unhex(t, "81a161a162"),
			Payload: []byte("x")}, "bf0d 010101 030581a161a162 020178"},
		{"data: two keys, sorted", client.Data{Tag: 1, Metadata: map[string]string{"b": "2", "a": "1"},
			Payload: []byte{}}, "bf10 010101 0309 82 a161 a131 a162 a132 0200"},
		{"handshake: y3 source (extension level 1)", client.Handshake{Name: "s", ID: "abc-0",
			ClientType: client.ClientSource, AuthName: "token", AuthPayload: "x", Version: client.Version,
			ExtensionLevel: client.ExtensionLevel},
			"b12c 010173 0305 6162632d30 02015f 0600 0405746f6b656e 050178 070a 323032342d30312d3033 0900 0800 300101"},
		{"handshake: function, observed LE, target, definition", client.Handshake{Name: "f", ID: "i",
			ClientType: client.ClientStreamFunction, Observed: []uint32{0x33, 0xe001},
			Version: "v", FunctionDefinition: []byte("{}"), WantedTarget: "t"},
			"b121 010166 030169 02015d 0608 33000000 01e00000 0400 0500 070176 09027b7d 080174"},
		{"handshake: y3 filters (field 31: tag LE, length LE, text)", client.Handshake{Name: "f", ID: "i",
			ClientType: client.ClientStreamFunction, Observed: []uint32{0x33}, Version: "v",
			ExtensionLevel: client.ExtensionLevel, Filters: []client.Filter{{Tag: 0x33, Text: "0x01 > 5"}}},
			"b12f 010166 030169 02015d 0604 33000000 0400 0500 070176 0900 0800 300101 3110 33000000 08000000 30783031203e2035"},
		{"handshake: y3 durable source (field 32: wants stored acknowledgements)", client.Handshake{Name: "s",
			ID: "abc-0", ClientType: client.ClientSource, AuthName: "token", AuthPayload: "x",
			Version: client.Version, ExtensionLevel: client.ExtensionLevel, WantsAcks: true},
			"b12f 010173 0305 6162632d30 02015f 0600 0405746f6b656e 050178 070a 323032342d30312d3033 0900 0800 300101 320101"},
		{"stored 300 (spec example)", client.Stored{Count: 300}, "b304 3002012c"},
		{"stored 0: the count is always written", client.Stored{}, "b303 300100"},
		{"stored 3, frame 1 refused as too long (spec example, shared with the Rust SDK)", client.Stored{Count: 3,
			Refused: []client.RefusedRun{{First: 1, Frames: 1, Reason: client.RefusedTooLong}}},
			"b30e 300103 3109 01000000 01000000 01"},
		{"stored 400, two runs, an unknown reason kept as its number", client.Stored{Count: 400,
			Refused: []client.RefusedRun{{First: 0xffffffff, Frames: 2, Reason: client.RefusedHopLimit},
				{First: 7, Frames: 300, Reason: 200}}},
			"b318 30020190 3112 ffffffff 02000000 02 07000000 2c010000 c8"},
		{"rejected with a y3 code (spec example)", client.Rejected{Message: "invalid token",
			Code: client.CodeUnauthorized}, "b912 010d 696e76616c696420746f6b656e 300102"},
		{"rejected, YoMo's (no code)", client.Rejected{Message: "no"}, "b904 01026e6f"},
		{"goaway shutting_down", client.Goaway{Message: "bye", Code: client.CodeShuttingDown}, "ae08 0103627965 300101"},
		{"goaway without a code", client.Goaway{}, "ae02 0100"},
		{"goaway normal: code 0 written", client.Goaway{HasCode: true}, "ae05 0100 300100"},
		{"goaway, code 200", client.Goaway{Code: 200}, "ae06 0100 300200c8"},
		{"connect to", client.ConnectTo{Endpoint: "127.0.0.1:9001"}, "be10 010e 3132372e302e302e313a39303031"},
	}
	for _, c := range cases {
		got := roundtrip(t, c.frame)
		if want := unhex(t, c.hex); !bytes.Equal(got, want) {
			t.Errorf("%s: got % x, want % x", c.name, got, want)
		}
	}
}

func TestFrameLargePayloadHeader(t *testing.T) {
	payload := bytes.Repeat([]byte{0xab}, 300)
	b := roundtrip(t, client.Data{Tag: 0x10, Payload: payload})
	// 3 + 2 + (1+2+300) = 308: PVarInt 82 34.
	if !bytes.Equal(b[:8], unhex(t, "bf8234 010110 0300")) {
		t.Fatalf("% x", b[:8])
	}
	if !bytes.Equal(b[8:11], unhex(t, "02822c")) {
		t.Fatalf("% x", b[8:11])
	}
}

func TestUnknownFieldsAreSkippedAndOrderIsFree(t *testing.T) {
	// data { hops 1, payload "x", 0x20 "?" unknown, 0x3a node (unknown, skipped),
	// metadata {}, tag 2 }
	f, err := client.DecodeFrame(unhex(t, "bf12 300101 020178 20013f ba020000 0300 010102"), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := client.Data{Tag: 2, Metadata: map[string]string{}, Payload: []byte("x"), Hops: 1}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("%#v", f)
	}
	// A repeated field keeps its last value; missing fields read as empty.
	f, err = client.DecodeFrame(unhex(t, "b909 010161 010162 300100"), 0)
	if err != nil || f != (client.Rejected{Message: "b", HasCode: true}) {
		t.Fatalf("%#v %v", f, err)
	}
	f, err = client.DecodeFrame(unhex(t, "ae00"), 0)
	if err != nil || f != (client.Goaway{}) {
		t.Fatalf("%#v %v", f, err)
	}
	// A data frame of no fields: tag 0, empty metadata and payload.
	f, err = client.DecodeFrame(unhex(t, "bf00"), 0)
	if err != nil || !reflect.DeepEqual(f, client.Data{Metadata: map[string]string{}, Payload: []byte{}}) {
		t.Fatalf("%#v %v", f, err)
	}
	// The ack's fields (none are defined) are skipped.
	f, err = client.DecodeFrame(unhex(t, "a903 010161"), 0)
	if err != nil || f != (client.HandshakeAck{}) {
		t.Fatalf("%#v %v", f, err)
	}
	// Handshake: fields in struct order, an unknown y3 field.
	f, err = client.DecodeFrame(unhex(t, "b115 01016e 02015f 030169 04016e 050170 07027631 3f00"), 0)
	want2 := client.Handshake{Name: "n", ID: "i", ClientType: client.ClientSource, AuthName: "n",
		AuthPayload: "p", Version: "v1"}
	if err != nil || !reflect.DeepEqual(f, want2) {
		t.Fatalf("%#v %v", f, err)
	}
}

func TestDataPayloadBorrowsTheBuffer(t *testing.T) {
	wire := unhex(t, "bf12 010110 0303 81a0a0 0503abcdef 0203abcdef")
	f, err := client.DecodeFrame(wire, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := f.(client.Data)
	if &d.Payload[0] != &wire[17] || &d.RawMetadata[0] != &wire[7] {
		t.Fatal("payload or metadata was copied")
	}
	if !reflect.DeepEqual(d.Metadata, map[string]string{"": ""}) {
		t.Fatalf("%#v", d.Metadata)
	}
}

func TestBadFrames(t *testing.T) {
	cases := []struct{ hex, kind string }{
		{"a000", "unknown_frame"},
		{"3f00", "unknown_frame"},
		{"ff00", "unknown_frame"}, // 0x80 | 0x7f: node and array flags
		{"b000", "unknown_frame"}, // y3's old goaway type
		{"aa00", "unknown_frame"}, // y3's old ping type
		{"bf03 0105 01", "child_overflow"},
		{"bf01", "unexpected_end"},
		{"bf02 8100", "wrong_type"},     // the tag field is a node
		{"bf02 0100", "invalid_length"}, // an empty tag (YoMo: "nothing to decode")
		{"bf0b 0109 010203040506070809", "varint_overflow"},
		{"bf03 010101 00", "trailing_bytes"},
		{"a900 00", "trailing_bytes"},
		{"bf02 4100", "invalid_tag"},
		{"b100", "invalid_field"},                              // no client type
		{"b102 0200", "invalid_field"},                         // an empty client type (crashes YoMo's zipper)
		{"b104 02025f5f", "invalid_field"},                     // two bytes
		{"b30d 300103 3108 0100000001000000", "invalid_field"}, // a refused run of 8 bytes
		{"bf04 0302 81a0", "bad_metadata"},                     // a key without a value
		{"bf05 0303 91a0a0", "bad_metadata"},                   // an array
		{"bf05 0303 81a001", "bad_metadata"},                   // an integer value
		{"bf05 0303 81a0c3", "bad_metadata"},                   // a bool value
		{"bf05 0303 81c401", "bad_metadata"},                   // a bin key past the field
		{"bf06 0304 80a0a0a0", "bad_metadata"},                 // bytes after the map
		{"bf07 0305 dfffffffff", "bad_metadata"},               // a map32 of 2^32-1 pairs in 0 bytes
		{"bf08 0306 81dbffffffff", "bad_metadata"},             // a str32 of 4 GiB in 0 bytes
	}
	for _, c := range cases {
		_, err := client.DecodeFrame(unhex(t, c.hex), 0)
		if got := client.KindOf(err); string(got) != c.kind {
			t.Errorf("%s: kind %q (%v), want %q", c.hex, got, err, c.kind)
		}
	}
	// Valid corners: a handshake with a client type alone, a fixmap of 0 pairs.
	// A tail of observed tags shorter than 4 bytes is ignored, as YoMo ignores it.
	for _, h := range []string{"b103 02015f", "bf03 030180", "bf07 0305 81a0da0000", "b106 02015f 060101"} {
		if _, err := client.DecodeFrame(unhex(t, h), 0); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	// Fields of the errors.
	_, err := client.DecodeFrame(unhex(t, "b102 0200"), 0)
	var e *client.Error
	if !errors.As(err, &e) || e.Frame != "handshake" || e.FieldName != "client_type" {
		t.Fatalf("%#v", err)
	}
	_, err = client.DecodeFrame(unhex(t, "bf03 0105 01"), 0)
	var ye *y3.Error
	if !errors.As(err, &ye) || ye.Kind != y3.KindChildOverflow {
		t.Fatalf("the codec error is not reachable: %#v", err)
	}
	if errors.Is(err, client.ErrBadMetadata) || !errors.Is(err, y3.ErrChildOverflow) {
		t.Fatal("errors.Is")
	}
	_, err = client.DecodeFrame(unhex(t, "bf06 0304 80a0a0a0"), 0)
	if !errors.As(err, &e) || e.Kind != client.KindBadMetadata || e.Offset != 1 || !errors.Is(err, client.ErrBadMetadata) {
		t.Fatalf("%#v", err)
	}
	// Strings are not checked for UTF-8, as YoMo does not check them.
	f, err := client.DecodeFrame(unhex(t, "b903 0101ff"), 0)
	if err != nil || f.(client.Rejected).Message != "\xff" {
		t.Fatalf("%#v %v", f, err)
	}
}

func TestEncodeTooLong(t *testing.T) {
	_, err := client.EncodeFrame(client.Goaway{Message: "x"}, 2)
	var e *client.Error
	if !errors.As(err, &e) || e.Kind != client.KindTooLong || e.Declared != 3 || e.Limit != 2 {
		t.Fatalf("%#v", err)
	}
	dst := []byte{1, 2}
	out, err := client.AppendFrame(dst, client.Data{Payload: make([]byte, 100)}, 50)
	if err == nil || len(out) != 2 {
		t.Fatalf("%v %x", err, out)
	}
}

func TestCodesAndTypes(t *testing.T) {
	want := []string{"normal", "shutting_down", "unauthorized", "protocol_error", "version_mismatch",
		"bad_handshake", "slow_consumer", "too_many_connections", "handshake_timeout", "reserved_tag", "forbidden",
		"bad_filter", "other"}
	retry := []bool{true, true, false, false, false, false, true, true, true, false, false, false, false}
	for code, name := range want {
		k := client.Code(code).Kind()
		if string(k) != name {
			t.Errorf("code %d: %s", code, k)
		}
		if (&client.Error{Kind: k}).Retryable() != retry[code] {
			t.Errorf("code %d: retryable", code)
		}
	}
	for c, name := range map[client.ClientType]string{0x5f: "source", 0x5d: "stream_function",
		0x5e: "upstream_zipper", 1: "unknown"} {
		if c.String() != name {
			t.Errorf("client type %x: %s", uint8(c), c)
		}
	}
	for ft, name := range map[client.FrameType]string{0x31: "handshake", 0x29: "handshake_ack", 0x39: "rejected",
		0x2e: "goaway", 0x3e: "connect_to", 0x3f: "data", 0x20: "unknown"} {
		if ft.String() != name {
			t.Errorf("type %x: %s", uint8(ft), ft)
		}
	}
}

func TestErrorsIsAndRetryable(t *testing.T) {
	e := &client.Error{Kind: client.KindUnauthorized, Code: client.CodeUnauthorized, Reason: "wrong token"}
	if !errors.Is(e, client.ErrUnauthorized) || errors.Is(e, client.ErrShuttingDown) {
		t.Fatal("Is")
	}
	if e.Retryable() || !(&client.Error{Kind: client.KindShuttingDown}).Retryable() {
		t.Fatal("Retryable")
	}
	if got := e.Error(); got != "y3 client: refused: unauthorized (wrong token)" {
		t.Fatal(got)
	}
	if (&client.Error{Kind: client.KindRejected}).Retryable() {
		t.Fatal("rejected is retried")
	}
	// A stream that ends inside a frame is a lost connection; a malformed frame is final.
	if !(&client.Error{Kind: client.KindTruncated, Buffered: 5}).Retryable() {
		t.Fatal("truncated is not retried")
	}
	for _, k := range []client.Kind{client.KindUnknownFrame, client.KindTooLong, client.KindInvalidField,
		client.KindBadMetadata, client.Kind(y3.KindChildOverflow)} {
		if (&client.Error{Kind: k}).Retryable() {
			t.Fatalf("%s is retried", k)
		}
	}
	g := &client.Error{Kind: client.KindGaveUp, Attempts: 3, Err: &client.Error{Kind: client.KindIO}}
	if !errors.Is(g, client.ErrGaveUp) || !errors.Is(g, client.ErrIO) || client.KindOf(g) != "gave_up" {
		t.Fatal(g)
	}
}

// A QUIC close: the kind comes from the reason's prefix, else from YoMo's rule for its
// code (0x13, or 0 without a reason: do not come back).
func TestCloseError(t *testing.T) {
	cases := []struct {
		code   uint64
		reason string
		kind   client.Kind
		c      client.Code
		retry  bool
	}{
		{0x13, "unauthorized: invalid token", client.KindUnauthorized, client.CodeUnauthorized, false},
		{0x13, "reserved_tag: 0xf000", client.KindReservedTag, client.CodeReservedTag, false},
		{0x13, "protocol_error", client.KindProtocolError, client.CodeProtocolError, false},
		{0x13, "[0xF000, 0xFFFF] is reserved; please do not write within this range", client.KindRejected, 0, false},
		{0x13, "invalid token: guess", client.KindRejected, 0, false},
		{0x13, "", client.KindRejected, 0, false},
		{0, "", client.KindRejected, 0, false},
		{0x01, "shutting_down: draining", client.KindShuttingDown, client.CodeShuttingDown, true},
		{0x13, "shutting_down: draining", client.KindShuttingDown, client.CodeShuttingDown, true},
		{0x01, "slow_consumer", client.KindSlowConsumer, client.CodeSlowConsumer, true},
		{0x01, "restarting", client.KindNormal, client.CodeNormal, true},
		{0, "restarting", client.KindNormal, client.CodeNormal, true},
	}
	for _, c := range cases {
		e := client.CloseError(c.code, c.reason, nil)
		if e == nil || e.Kind != c.kind || e.Code != c.c || e.Retryable() != c.retry || e.Reason != c.reason {
			t.Errorf("%#x %q: %#v", c.code, c.reason, e)
		}
	}
}

func TestMarshalPayload(t *testing.T) {
	type NoiseData struct {
		Noise float32 `y3:"0x11"`
		Time  int64   `y3:"0x12"`
		From  string  `y3:"0x13"`
	}
	b, err := client.MarshalPayload(0x10, NoiseData{Noise: 40, Time: 1600000000000, From: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	// YoMo's example bytes, as the Rust demo's to_packet writes them.
	if hex.EncodeToString(b) != "9017110242201206aec8bbba800013093132372e302e302e31" {
		t.Fatalf("%x", b)
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := client.NewID()
		if len(id) != client.IDLen || strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
			t.Fatalf("%q", id)
		}
		if seen[id] {
			t.Fatalf("%q twice", id)
		}
		seen[id] = true
	}
}

func BenchmarkAppendData(b *testing.B) {
	d := client.Data{Tag: 0x10, RawMetadata: client.EncodeMetadata(map[string]string{
		client.MetaSourceID: client.NewID(), client.MetaTID: client.NewID()}), Payload: bytes.Repeat([]byte{1}, 100)}
	buf := make([]byte, 0, 256)
	b.SetBytes(int64(client.EncodedLen(d)))
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = client.AppendData(buf[:0], &d, 0)
	}
}

// cycle repeats its bytes forever, in reads of at most 64 KiB.
type cycle struct {
	wire []byte
	off  int
}

func (c *cycle) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := copy(p[n:], c.wire[c.off:])
		n += k
		c.off = (c.off + k) % len(c.wire)
	}
	return n, nil
}

func BenchmarkFrameReaderData(b *testing.B) {
	var frames []client.Frame
	md := map[string]string{client.MetaSourceID: client.NewID()}
	for range 1000 {
		md[client.MetaTID] = client.NewID()
		frames = append(frames, client.Data{Tag: 0x10, RawMetadata: client.EncodeMetadata(md),
			Payload: bytes.Repeat([]byte{1}, 100)})
	}
	wire := encodeAll(b, frames)
	r := client.NewFrameReader(&cycle{wire: wire}, 0)
	b.SetBytes(int64(len(wire) / len(frames)))
	b.ReportAllocs()
	var d client.Data
	for b.Loop() {
		if f, err := r.NextData(&d); f != nil || err != nil || len(d.Payload) != 100 {
			b.Fatal(f, err)
		}
	}
}
