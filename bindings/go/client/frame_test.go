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

// roundtrip encodes f, checks EncodedLen, decodes it back and checks that the frame is a
// well-formed Y3 packet; it returns the bytes.
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
	want := f
	if p, ok := f.(*client.Data); ok {
		want = *p
	}
	if !reflect.DeepEqual(back, want) {
		t.Fatalf("roundtrip %x:\n got %#v\nwant %#v", b, back, want)
	}
	if _, err := y3.Decode(b); err != nil {
		t.Fatalf("%x is not a Y3 packet: %v", b, err)
	}
	return b
}

// The byte layouts below are the ones crates/y3-transport/src/frame.rs and
// spec/frames.md pin down; the integration test also compares with frames the real router
// writes.
func TestFrameLayouts(t *testing.T) {
	cases := []struct {
		name  string
		frame client.Frame
		hex   string
	}{
		{"data (spec example)", client.Data{Tag: 0x10, ID: 1, Payload: []byte{0xab, 0xcd, 0xef}},
			"bf0b 010110 020101 0503abcdef"},
		{"data, every field, extremes", client.Data{Tag: math.MaxUint32, ID: math.MaxUint64, Hops: 2,
			Metadata: []byte("m"), Payload: []byte{}}, "bf0e 01017f 02017f 030102 04016d 0500"},
		{"handshake (spec example)", client.Handshake{Version: 1, Role: client.RoleStreamFunction,
			Name: "f", Token: "t", Observed: []uint32{0x10, 0x200}},
			"b115 010101 020102 030166 040174 c507 000110 00028400"},
		{"handshake, bare source", client.Handshake{Version: 1, Role: client.RoleSource}, "b106 010101 020101"},
		{"goaway unauthorized", client.Goaway{Code: client.CodeUnauthorized}, "b003 010102"},
		{"goaway with reason", client.Goaway{Code: 99, Reason: "why"}, "b009 01028063 0203776879"},
		{"ping 7", client.Ping{Nonce: 7}, "aa03 010107"},
		{"pong max", client.Pong{Nonce: math.MaxUint64}, "ab03 01017f"},
		{"accepted", client.Accepted{Version: 1, Session: 42}, "a906 010101 02012a"},
		{"empty metadata is written", client.Data{Tag: 1, ID: 0, Metadata: []byte{}, Payload: []byte("x")},
			"bf0b 010101 020100 0400 050178"},
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
	b := roundtrip(t, client.Data{Tag: 0x10, ID: 7, Payload: payload})
	// 3+3+(1+2+300) = 309 = PVarInt 82 35.
	if !bytes.Equal(b[:6], unhex(t, "bf8235 010110")) {
		t.Fatalf("% x", b[:6])
	}
	if !bytes.Equal(b[9:12], unhex(t, "05822c")) {
		t.Fatalf("% x", b[9:12])
	}
}

func TestUnknownFieldsAreSkippedAndOrderIsFree(t *testing.T) {
	// data { payload "x", 0x20 "?" unknown, id 1, tag 2 }
	f, err := client.DecodeFrame(unhex(t, "bf0c 050178 20013f 020101 010102"), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := client.Data{Tag: 2, ID: 1, Payload: []byte("x")}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("%#v", f)
	}
	// A repeated field keeps its last value.
	f, err = client.DecodeFrame(unhex(t, "aa06 010101 010102"), 0)
	if err != nil || f != (client.Ping{Nonce: 2}) {
		t.Fatalf("%#v %v", f, err)
	}
}

func TestDataPayloadBorrowsTheBuffer(t *testing.T) {
	wire := unhex(t, "bf0b 010110 020101 0503abcdef")
	f, err := client.DecodeFrame(wire, 0)
	if err != nil {
		t.Fatal(err)
	}
	if &f.(client.Data).Payload[0] != &wire[10] {
		t.Fatal("payload was copied")
	}
}

// The kinds the Rust decoder (frame.rs tests bad_frames) reports for the same bytes.
func TestBadFrames(t *testing.T) {
	cases := []struct{ hex, kind string }{
		{"bf03 010110", "missing_field"},
		{"a000", "unknown_frame"},
		{"3f00", "unknown_frame"},
		{"b106 010101 020109", "invalid_field"},
		{"bf03 0105 01", "child_overflow"},
		{"bf01", "unexpected_end"},
		{"bf08 010110 020101 8500", "wrong_type"},
		{"aa03 010107 00", "trailing_bytes"},
		{"b005 010102 0205", "child_overflow"},
		{"b006 010102 0201ff", "invalid_utf8"},
		{"b103 020101", "missing_field"},
		{"a903 010101", "missing_field"},
		{"b008 010101 020101 4500", "invalid_tag"},
		{"b108 010101 020102 0500", "wrong_type"},
	}
	for _, c := range cases {
		_, err := client.DecodeFrame(unhex(t, c.hex), 0)
		if got := client.KindOf(err); string(got) != c.kind {
			t.Errorf("%s: kind %q (%v), want %q", c.hex, got, err, c.kind)
		}
	}
	// Fields of the errors.
	_, err := client.DecodeFrame(unhex(t, "bf03 010110"), 0)
	var e *client.Error
	if !errors.As(err, &e) || e.Frame != "data" || e.Field != 2 {
		t.Fatalf("%#v", err)
	}
	_, err = client.DecodeFrame(unhex(t, "bf03 0105 01"), 0)
	var ye *y3.Error
	if !errors.As(err, &ye) || ye.Kind != y3.KindChildOverflow {
		t.Fatalf("the codec error is not reachable: %#v", err)
	}
	if errors.Is(err, client.ErrMissingField) || !errors.Is(err, y3.ErrChildOverflow) {
		t.Fatal("errors.Is")
	}
}

func TestEncodeTooLong(t *testing.T) {
	_, err := client.EncodeFrame(client.Ping{Nonce: 1}, 2)
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

func TestCodesAndRoles(t *testing.T) {
	want := []string{"normal", "shutting_down", "unauthorized", "protocol_error", "version_mismatch",
		"bad_handshake", "slow_consumer", "too_many_connections", "handshake_timeout", "other"}
	for code, name := range want {
		if got := client.GoawayCode(code).Kind(); string(got) != name {
			t.Errorf("code %d: %s", code, got)
		}
	}
	for r, name := range map[client.Role]string{1: "source", 2: "stream_function", 3: "sink", 0: "unknown"} {
		if r.String() != name {
			t.Errorf("role %d: %s", r, r)
		}
	}
	for ft, name := range map[client.FrameType]string{0x31: "handshake", 0x29: "accepted", 0x3f: "data",
		0x30: "goaway", 0x2a: "ping", 0x2b: "pong", 0x20: "unknown"} {
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
	if got := e.Error(); got != "y3 client: goaway: unauthorized (wrong token)" {
		t.Fatal(got)
	}
	g := &client.Error{Kind: client.KindGaveUp, Attempts: 3, Err: &client.Error{Kind: client.KindIO}}
	if !errors.Is(g, client.ErrGaveUp) || !errors.Is(g, client.ErrIO) || client.KindOf(g) != "gave_up" {
		t.Fatal(g)
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

func BenchmarkAppendData(b *testing.B) {
	d := client.Data{Tag: 0x10, ID: 123456, Payload: bytes.Repeat([]byte{1}, 100)}
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
	for i := range 1000 {
		frames = append(frames, client.Data{Tag: 0x10, ID: uint64(i), Payload: bytes.Repeat([]byte{1}, 100)})
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
