// Package bench compares the y3 Go package with the reference codec
// github.com/yomorun/y3-codec-golang v1.7.3 and with github.com/tidwall/gjson on the
// published Y3-vs-JSON report's C63-K32 data: a node 0x80 with keys 0x01..0x3f ascending
// whose values cycle string "a", int32 -65, uint32 128, int64 -1, uint64 max, float32 0.25,
// float64 23 (the stress_C63_ascending vector), and key 0x20 (32, an int64 -1) is fetched.
//
// It is a module of its own so that the y3 package itself depends on nothing.
//
//	go test -bench . -benchmem -count 5
package bench

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/tidwall/gjson"
	y3 "github.com/y3-dev/y3/bindings/go"
	ref "github.com/yomorun/y3-codec-golang"
)

const key = 0x20

// c63Item is the data set as our item tree.
func c63Item() y3.Item {
	items := make([]y3.Item, 0, 63)
	for k := uint32(1); k <= 63; k++ {
		var v y3.Value
		switch (k - 1) % 7 {
		case 0:
			v = y3.String("a")
		case 1:
			v = y3.Int32(-65)
		case 2:
			v = y3.Uint32(128)
		case 3:
			v = y3.Int64(-1)
		case 4:
			v = y3.Uint64(math.MaxUint64)
		case 5:
			v = y3.Float32(0.25)
		case 6:
			v = y3.Float64(23)
		}
		items = append(items, y3.Item{ID: k, Value: v})
	}
	return y3.NewNode(0x00, items...)
}

// refC63 encodes the data set with the reference encoder.
func refC63() []byte {
	node := ref.NewNodePacketEncoder(0x00)
	for k := 1; k <= 63; k++ {
		p := ref.NewPrimitivePacketEncoder(k)
		switch (k - 1) % 7 {
		case 0:
			p.SetStringValue("a")
		case 1:
			p.SetInt32Value(-65)
		case 2:
			p.SetUInt32Value(128)
		case 3:
			p.SetInt64Value(-1)
		case 4:
			p.SetUInt64Value(math.MaxUint64)
		case 5:
			p.SetFloat32Value(0.25)
		case 6:
			p.SetFloat64Value(23)
		}
		node.AddPrimitivePacket(p)
	}
	return node.Encode()
}

// jsonC63 is the equivalent JSON document {"k1":"a","k2":-65,...,"k63":23}.
func jsonC63() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for k := 1; k <= 63; k++ {
		if k > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":`, k)
		switch (k - 1) % 7 {
		case 0:
			b.WriteString(`"a"`)
		case 1:
			b.WriteString("-65")
		case 2:
			b.WriteString("128")
		case 3:
			b.WriteString("-1")
		case 4:
			b.WriteString(strconv.FormatUint(math.MaxUint64, 10))
		case 5:
			b.WriteString("0.25")
		case 6:
			b.WriteString("23")
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

var (
	c63     = mustEncode(c63Item())
	c63JSON = jsonC63()
	sink    int64
)

func mustEncode(it y3.Item) []byte {
	b, err := it.Encode(y3.Golang)
	if err != nil {
		panic(err)
	}
	return b
}

// refGet is the reference's way: decode the whole node, then find the key.
func refGet(buf []byte) (int64, error) {
	node, _, err := ref.DecodeNodePacket(buf)
	if err != nil {
		return 0, err
	}
	for i := range node.PrimitivePackets {
		if node.PrimitivePackets[i].SeqID() == key {
			return node.PrimitivePackets[i].ToInt64()
		}
	}
	return 0, fmt.Errorf("key 0x%02x not found", key)
}

func TestSameDataSameAnswer(t *testing.T) {
	if !bytes.Equal(c63, refC63()) {
		t.Fatalf("our C63 bytes differ from the reference encoder's:\n%x\n%x", c63, refC63())
	}
	if len(c63) != 228 || c63[0] != 0x80 || c63[1] != 0x81 || c63[2] != 0x61 {
		t.Fatalf("C63 header %x, len %d", c63[:3], len(c63))
	}
	p, ok, err := y3.Get(c63, 0x00, key)
	if err != nil || !ok {
		t.Fatal(err)
	}
	ours, err := p.Int64()
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := refGet(c63)
	if err != nil {
		t.Fatal(err)
	}
	j := gjson.GetBytes(c63JSON, "k32").Int()
	if ours != -1 || theirs != -1 || j != -1 {
		t.Fatalf("ours %d, reference %d, gjson %d", ours, theirs, j)
	}
}

// BenchmarkC63K32/y3-get: one-shot Get over the buffer (the observer state machine on the
// stack), then the typed read.
// BenchmarkC63K32/y3-observer: a long-lived Observer, Reset and fed the buffer.
// BenchmarkC63K32/reference: y3-codec-golang v1.7.3 DecodeNodePacket, then find.
// BenchmarkC63K32/gjson: gjson.GetBytes(json, "k32").Int().
func BenchmarkC63K32(b *testing.B) {
	b.Run("y3-get", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, ok, err := y3.Get(c63, 0x00, key)
			if err != nil || !ok {
				b.Fatal(err)
			}
			v, err := p.Int64()
			if err != nil {
				b.Fatal(err)
			}
			sink += v
		}
	})
	b.Run("y3-observer", func(b *testing.B) {
		o, err := y3.NewObserver(y3.DefaultConfig, y3.Path{0x00, key})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			o.Reset()
			_, got, err := o.Feed(c63)
			if err != nil || got == nil {
				b.Fatal(err)
			}
			v, err := got.Int64()
			if err != nil {
				b.Fatal(err)
			}
			sink += v
		}
	})
	b.Run("reference", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, err := refGet(c63)
			if err != nil {
				b.Fatal(err)
			}
			sink += v
		}
	})
	b.Run("gjson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink += gjson.GetBytes(c63JSON, "k32").Int()
		}
	})
}
