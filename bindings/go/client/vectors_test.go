package client_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/y3-dev/y3/bindings/go/client"
)

// vectorDir holds the frames YoMo v1.22.0 produced itself (testdata/yomo-v1.22/README.md):
// codec-* from its y3codec.Encode (deterministic), wire-* captured from real connections.
const vectorDir = "../../../testdata/yomo-v1.22"

type yomoVector struct {
	File        string         `json:"file"`
	Description string         `json:"description"`
	Hex         string         `json:"hex"`
	Decoded     map[string]any `json:"decoded"`
}

func loadYoMoVectors(t *testing.T, name string) []yomoVector {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(vectorDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var vs []yomoVector
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		// The .hex file and the JSON entry agree.
		file, err := os.ReadFile(filepath.Join(vectorDir, v.File))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(file)) != v.Hex {
			t.Fatalf("%s: the .hex file differs from %s", v.File, name)
		}
	}
	return vs
}

func (v yomoVector) str(t *testing.T, key string) string {
	t.Helper()
	s, ok := v.Decoded[key].(string)
	if !ok {
		t.Fatalf("%s: %s is not a string: %#v", v.File, key, v.Decoded[key])
	}
	return s
}

// num reads a number, or a "0x.." string (the wire vectors write tags and client types so).
func (v yomoVector) num(t *testing.T, key string) uint64 {
	t.Helper()
	switch x := v.Decoded[key].(type) {
	case float64:
		return uint64(x)
	case string:
		n, err := strconv.ParseUint(strings.TrimPrefix(x, "0x"), 16, 64)
		if err == nil {
			return n
		}
	}
	t.Fatalf("%s: %s is not a number: %#v", v.File, key, v.Decoded[key])
	return 0
}

func (v yomoVector) metadata(t *testing.T) map[string]string {
	t.Helper()
	m := map[string]string{}
	raw, ok := v.Decoded["metadata"].(map[string]any)
	if !ok {
		t.Fatalf("%s: metadata: %#v", v.File, v.Decoded["metadata"])
	}
	for k, x := range raw {
		m[k] = x.(string)
	}
	return m
}

func (v yomoVector) payload(t *testing.T) []byte {
	t.Helper()
	if s, ok := v.Decoded["payload"].(string); ok {
		return []byte(s)
	}
	if s, ok := v.Decoded["payload_hex"].(string); ok {
		return unhex(t, s)
	}
	b := unhex(t, v.str(t, "payload_byte"))
	return bytes.Repeat(b, int(v.num(t, "payload_len")))
}

// frame builds the frame the vector's decoded fields describe; kind is the frame type
// (the wire vectors' frame_type, or a word of the codec vectors' file names).
func (v yomoVector) frame(t *testing.T, kind string) client.Frame {
	t.Helper()
	switch kind {
	case "HandshakeFrame", "handshake":
		var observed []uint32
		for _, o := range v.Decoded["observe"].([]any) {
			observed = append(observed, uint32(o.(float64)))
		}
		var def []byte
		if s := v.str(t, "function_definition"); s != "" {
			def = []byte(s)
		}
		return client.Handshake{
			Name: v.str(t, "name"), ID: v.str(t, "id"), ClientType: client.ClientType(v.num(t, "client_type")),
			Observed: observed, AuthName: v.str(t, "auth_name"), AuthPayload: v.str(t, "auth_payload"),
			Version: v.str(t, "version"), FunctionDefinition: def, WantedTarget: v.str(t, "wanted_target"),
		}
	case "HandshakeAckFrame", "ack":
		return client.HandshakeAck{}
	case "DataFrame", "data":
		return client.Data{Tag: uint32(v.num(t, "tag")), Metadata: v.metadata(t), Payload: v.payload(t)}
	case "RejectedFrame", "rejected":
		return client.Rejected{Message: v.str(t, "message")}
	case "goaway":
		return client.Goaway{Message: v.str(t, "message")}
	case "ConnectToFrame":
		return client.ConnectTo{Endpoint: v.str(t, "message")}
	case "connectto":
		return client.ConnectTo{Endpoint: v.str(t, "endpoint")}
	}
	t.Fatalf("%s: frame type %q", v.File, kind)
	return nil
}

// codecKind is the frame type a codec vector's file name gives: codec-04-data-tag33-md.hex.
func codecKind(file string) string {
	for _, k := range []string{"handshake-ack", "handshake", "data", "rejected", "goaway", "connectto"} {
		if strings.Contains(file, "-"+k) {
			if k == "handshake-ack" {
				return "ack"
			}
			return k
		}
	}
	return ""
}

// sameFrame compares a decoded frame with the vector's, metadata as maps.
func sameFrame(t *testing.T, file string, got, want client.Frame) {
	t.Helper()
	want = normalized(t, want)
	if d, ok := got.(client.Data); ok {
		d.RawMetadata = nil
		got = d
		w := want.(client.Data)
		w.RawMetadata = nil
		want = w
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: decoded\n %.300#v\nwant\n %.300#v", file, got, want)
	}
}

// Every codec vector is re-encoded byte for byte from its decoded fields, and decodes to
// them.
func TestYoMoCodecVectors(t *testing.T) {
	vs := loadYoMoVectors(t, "codec-vectors.json")
	if len(vs) != 12 {
		t.Fatalf("%d codec vectors", len(vs))
	}
	for _, v := range vs {
		f := v.frame(t, codecKind(v.File))
		want := unhex(t, v.Hex)
		got, err := client.EncodeFrame(f, 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", v.File, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: encoded\n %x\nwant\n %x", v.File, got, want)
		}
		back, err := client.DecodeFrame(want, 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", v.File, err)
		}
		sameFrame(t, v.File, back, f)
	}
}

// Every wire vector decodes to its fields (metadata compared as a map: YoMo writes keys in
// random order), through DecodeFrame and through a FrameReader fed one byte at a time; its
// bytes re-encode identically from the decoded frame (which keeps the metadata's bytes).
func TestYoMoWireVectors(t *testing.T) {
	vs := loadYoMoVectors(t, "wire-vectors.json")
	if len(vs) != 10 {
		t.Fatalf("%d wire vectors", len(vs))
	}
	var stream []byte
	var frames []client.Frame
	for _, v := range vs {
		want := v.frame(t, v.str(t, "frame_type"))
		wire := unhex(t, v.Hex)
		got, err := client.DecodeFrame(wire, 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", v.File, err)
		}
		sameFrame(t, v.File, got, want)
		again, err := client.EncodeFrame(got, 1<<20)
		if err != nil || !bytes.Equal(again, wire) {
			t.Errorf("%s: re-encoded %x (%v)", v.File, again, err)
		}
		stream = append(stream, wire...)
		frames = append(frames, got)
	}
	read, err := readAll(client.NewFrameReader(&chunks{parts: splitEvery(stream, 1)}, 0))
	if err == nil || err.Error() != "EOF" || len(read) != len(frames) {
		t.Fatalf("%d frames, %v", len(read), err)
	}
	for i := range read {
		if !reflect.DeepEqual(read[i], frames[i]) {
			t.Errorf("%s through the reader: %#v", vs[i].File, read[i])
		}
	}
}

// All 22 vectors (and nothing else) are in the directory, each described by one entry.
func TestYoMoVectorFiles(t *testing.T) {
	entries, err := os.ReadDir(vectorDir)
	if err != nil {
		t.Fatal(err)
	}
	described := map[string]bool{}
	for _, name := range []string{"codec-vectors.json", "wire-vectors.json"} {
		for _, v := range loadYoMoVectors(t, name) {
			described[v.File] = true
		}
	}
	hexFiles := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".hex") {
			hexFiles++
			if !described[e.Name()] {
				t.Errorf("%s has no JSON entry", e.Name())
			}
			if _, err := hex.DecodeString(strings.TrimSpace(readFile(t, filepath.Join(vectorDir, e.Name())))); err != nil {
				t.Errorf("%s: %v", e.Name(), err)
			}
		}
	}
	if hexFiles != 22 || len(described) != 22 {
		t.Fatalf("%d hex files, %d described", hexFiles, len(described))
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func splitEvery(b []byte, n int) [][]byte {
	var parts [][]byte
	for i := 0; i < len(b); i += n {
		parts = append(parts, b[i:min(i+n, len(b))])
	}
	return parts
}
