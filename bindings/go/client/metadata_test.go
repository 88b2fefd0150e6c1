package client_test

import (
	"bytes"
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/y3-dev/y3/bindings/go/client"
)

// The msgpack forms vmihailenco/msgpack v5 (YoMo's) writes, at every size boundary.
func TestMetadataEncoding(t *testing.T) {
	cases := []struct {
		m   map[string]string
		hex string
	}{
		{nil, ""},
		{map[string]string{}, ""},
		{map[string]string{"": ""}, "81 a0 a0"},
		{map[string]string{"yomo-tid": "tid-0001"}, "81 a8 796f6d6f2d746964 a8 7469642d30303031"},
		{map[string]string{"k": strings.Repeat("v", 31)}, "81 a16b bf" + strings.Repeat("76", 31)},
		{map[string]string{"k": strings.Repeat("v", 32)}, "81 a16b d920" + strings.Repeat("76", 32)},
		{map[string]string{"k": strings.Repeat("v", 255)}, "81 a16b d9ff" + strings.Repeat("76", 255)},
		{map[string]string{"k": strings.Repeat("v", 256)}, "81 a16b da0100" + strings.Repeat("76", 256)},
		{map[string]string{"k": strings.Repeat("v", 65536)}, "81 a16b db00010000" + strings.Repeat("76", 65536)},
	}
	for _, c := range cases {
		want := unhex(t, c.hex)
		got := client.EncodeMetadata(c.m)
		if !bytes.Equal(got, want) || client.MetadataLen(c.m) != len(want) {
			t.Errorf("%.40q: % .40x, want % .40x", c.m, got, want)
		}
		back, err := client.DecodeMetadata(got)
		if err != nil || len(back) != len(c.m) || (len(c.m) > 0 && !reflect.DeepEqual(back, c.m)) {
			t.Errorf("%.40q: back %.40q %v", c.m, back, err)
		}
	}
	// Map headers: fixmap up to 15 pairs, map16 from 16, map32 from 65536.
	for _, n := range []int{15, 16, 65535, 65536} {
		m := map[string]string{}
		for i := range n {
			m[string(rune('a'+i%26))+strings.Repeat("x", i/26)] = ""
		}
		// Distinct keys: the map has n entries.
		for len(m) < n {
			m[client.NewID()] = ""
		}
		b := client.EncodeMetadata(m)
		var head []byte
		switch {
		case n < 16:
			head = []byte{0x80 | byte(n)}
		case n < 65536:
			head = []byte{0xde, byte(n >> 8), byte(n)}
		default:
			head = []byte{0xdf, 0, byte(n >> 16), byte(n >> 8), byte(n)}
		}
		if !bytes.HasPrefix(b, head) || len(b) != client.MetadataLen(m) {
			t.Fatalf("%d pairs: % x", n, b[:5])
		}
		back, err := client.DecodeMetadata(b)
		if err != nil || !maps.Equal(back, m) {
			t.Fatalf("%d pairs: %v", n, err)
		}
	}
	// Sorted keys: the same map always gives the same bytes.
	m := map[string]string{"z": "1", "a": "2", "m": "3", "yomo-tid": "4"}
	if got := client.EncodeMetadata(m); !bytes.Equal(got, unhex(t, "84 a161a132 a16da133 a8796f6d6f2d746964a134 a17aa131")) {
		t.Fatalf("% x", got)
	}
}

// Forms YoMo never writes but msgpack allows are read too: str8 for short strings, map16
// for small maps; a repeated key keeps its last value.
func TestMetadataDecodingIsTolerant(t *testing.T) {
	cases := map[string]map[string]string{
		"80":                            {},
		"81 d90161 d9026262":            {"a": "bb"},
		"de0001 da000161 a0":            {"a": ""},
		"df00000001 db0000000161 a162":  {"a": "b"},
		"82 a161 a131 a161 a132":        {"a": "2"},
		"81 a3ffc328 a0":                {"\xff\xc3\x28": ""},       // not UTF-8: YoMo does not check either
		"82 a161 c402ff00 c0 c50001 62": {"a": "\xff\x00", "": "b"}, // bin and nil, as YoMo reads them
	}
	for h, want := range cases {
		got, err := client.DecodeMetadata(unhex(t, h))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %q %v", h, got, err)
		}
		if err := client.CheckMetadata(unhex(t, h)); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	if m, err := client.DecodeMetadata(nil); err != nil || m == nil || len(m) != 0 {
		t.Fatalf("empty: %#v %v", m, err)
	}
}

// Hostile metadata: every refusal is bad_metadata, with the offset of the problem, and
// nothing is allocated for lengths the bytes do not hold.
func TestMetadataHostile(t *testing.T) {
	cases := []struct {
		hex    string
		offset uint64
	}{
		{"c0", 0},                   // nil, not a map
		{"a0", 0},                   // a string, not a map
		{"91 a0", 0},                // an array
		{"81", 1},                   // a pair missing
		{"81 a0", 1},                // a value missing
		{"81 a1", 1},                // a key shorter than declared
		{"81 01 a0", 1},             // an integer key
		{"81 a0 c3", 2},             // a bool value
		{"81 a0 c6 00000002 61", 7}, // a bin value shorter than declared
		{"81 a0 81 a0 a0", 2},       // a nested map
		{"81 a0 a0 00", 3},          // a byte after the map
		{"80 80", 1},                // two maps
		{"de", 1},                   // map16 without its count
		{"de 00", 1},                // map16 with half a count
		{"df ffffffff", 5},          // 4 billion pairs in no bytes
		{"de ffff a0a0", 3},         // 65535 pairs in two bytes
		{"81 db ffffffff", 6},       // a 4 GiB key in no bytes
		{"81 da ffff 00", 4},        // a 64 KiB key in one byte
		{"81 d9", 1},                // str8 without its length
		{"81 a0 d9 05 6162", 4},     // a value shorter than declared
		{"8f a0a0 a0a0", 1},         // 15 pairs in four bytes
	}
	for _, c := range cases {
		raw := unhex(t, c.hex)
		_, err := client.DecodeMetadata(raw)
		var e *client.Error
		if !errors.As(err, &e) || e.Kind != client.KindBadMetadata || e.Offset != c.offset {
			t.Errorf("%s: %#v, want bad_metadata at %d", c.hex, err, c.offset)
		}
		if client.KindOf(client.CheckMetadata(raw)) != client.KindBadMetadata {
			t.Errorf("%s: CheckMetadata", c.hex)
		}
	}
	// A map32 declaring 2^32-1 pairs followed by 1 MiB of bytes: refused or read in the
	// bytes present, never sized from the declaration.
	raw := append(unhex(t, "df ffffffff"), bytes.Repeat([]byte{0xa0}, 1<<20)...)
	if _, err := client.DecodeMetadata(raw); client.KindOf(err) != client.KindBadMetadata {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(3, func() { _, _ = client.DecodeMetadata(raw) })
	if allocs > 1 { // the error
		t.Fatalf("%v allocations", allocs)
	}
	valid := unhex(t, "82 a161 a131 a162 a132")
	if allocs := testing.AllocsPerRun(10, func() {
		if err := client.CheckMetadata(valid); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("CheckMetadata allocates: %v", allocs)
	}
}

func FuzzMetadata(f *testing.F) {
	f.Add(unhex(f, "81 a8 796f6d6f2d746964 a8 7469642d30303031"))
	f.Add(unhex(f, "de0001 da000161 a0"))
	f.Add(unhex(f, "df ffffffff"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := client.DecodeMetadata(raw)
		if (err == nil) != (client.CheckMetadata(raw) == nil) {
			t.Fatal("DecodeMetadata and CheckMetadata disagree")
		}
		if err != nil {
			if client.KindOf(err) != client.KindBadMetadata {
				t.Fatal(err)
			}
			return
		}
		back, err := client.DecodeMetadata(client.EncodeMetadata(m))
		if err != nil || !maps.Equal(back, m) {
			t.Fatalf("%q: %q %v", m, back, err)
		}
	})
}
