package y3

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

// appendScalar encodes v with the Append* writer of its type.
func appendScalar(dst []byte, d Dialect, id uint32, v Value) ([]byte, error) {
	switch x := v.(type) {
	case Int32:
		return AppendInt32(dst, d, id, int32(x))
	case Int64:
		return AppendInt64(dst, d, id, int64(x))
	case Uint32:
		return AppendUint32(dst, d, id, uint32(x))
	case Uint64:
		return AppendUint64(dst, d, id, uint64(x))
	case Float32:
		return AppendFloat32(dst, d, id, float32(x))
	case Float64:
		return AppendFloat64(dst, d, id, float64(x))
	case Bool:
		return AppendBool(dst, d, id, bool(x))
	case String:
		return AppendString(dst, d, id, string(x))
	case Bytes:
		return AppendBytes(dst, d, id, x)
	}
	panic("not a scalar")
}

// TestVectors checks every vector of both reference files both ways: our encoder produces
// the reference bytes, our decoder reads the reference value back. Where the reference
// panicked or our decisions refuse the input, our documented error is asserted instead.
func TestVectors(t *testing.T) {
	seen := 0
	for _, v := range loadVectors(t) {
		t.Run(v.file[:6]+"/"+v.Name, func(t *testing.T) {
			seen++
			switch {
			case strings.HasPrefix(v.Name, "marshal_"):
				checkMarshalVector(t, v)
			case scalarTypes[v.Type]:
				checkScalarVector(t, v)
			case v.Type == "node" || strings.HasPrefix(v.Type, "slice<"):
				checkNodeVector(t, v)
			case v.Type == "stream":
				checkStreamVector(t, v)
			default:
				t.Fatalf("vector type %q not covered", v.Type)
			}
		})
	}
	if seen < 240 {
		t.Fatalf("only %d vectors", seen)
	}
}

func checkScalarVector(t *testing.T, v vector) {
	var bits string
	if len(v.Bits) > 0 {
		if err := json.Unmarshal(v.Bits, &bits); err != nil {
			t.Fatal(err)
		}
	}
	value := scalarValue(t, v.Type, parseOrdered(t, v.Value), bits, v.ValueRecipe)
	id := v.tag()
	if id > 0x3f {
		// The reference accepts 0x40..0x7f (colliding with the array flag) or panics; we
		// refuse to write it, and refuse to read a primitive tag with the array flag.
		_, err := appendScalar(nil, v.dialect, id, value)
		e := wantKind(t, err, KindInvalidTag)
		if e.Tag != id || e.Max != 0x3f || e.Op != OpEncode {
			t.Fatalf("encode error %+v", e)
		}
		_, err = (Item{ID: id, Value: value}).Encode(v.dialect)
		wantKind(t, err, KindInvalidTag)
		if v.Hex != "" {
			_, err := ConfigFor(v.dialect).Decode(v.bytes(t))
			e := wantKind(t, err, KindInvalidTag)
			if e.Tag != uint32(v.bytes(t)[0]) {
				t.Fatalf("decode error %+v", e)
			}
		} else if !strings.Contains(v.Decoded, "panic") {
			t.Fatalf("no hex but no panic: %q", v.Decoded)
		}
		return
	}
	want := v.bytes(t)
	got, err := appendScalar([]byte("prefix"), v.dialect, id, value)
	must(t, err)
	if !bytes.Equal(got[6:], want) || string(got[:6]) != "prefix" {
		t.Fatalf("encode: got %x want %x", got[6:], want)
	}
	item := Item{ID: id, Value: value}
	enc, err := item.Encode(v.dialect)
	must(t, err)
	if !bytes.Equal(enc, want) || item.EncodedLen(v.dialect) != len(want) {
		t.Fatalf("item encode: got %x (len %d) want %x", enc, item.EncodedLen(v.dialect), want)
	}
	p, err := ConfigFor(v.dialect).Decode(want)
	must(t, err)
	if p.ID() != id || p.IsNode() || p.EncodedLen() != len(want) || p.Depth() != 1 {
		t.Fatalf("packet %#v", p)
	}
	back, err := readScalar(p, value)
	must(t, err)
	if !valueEqual(back, value) {
		t.Fatalf("decode: got %#v want %#v", back, value)
	}
	if s, ok := value.(String); ok {
		sb, err := p.StringBytes()
		must(t, err)
		if string(sb) != string(s) {
			t.Fatal("StringBytes")
		}
	}
	// The nvarint file also records the golang-dialect bytes of the same call.
	if v.dialect == NVarInt && v.SameAsDraft02 != nil {
		golang, err := appendScalar(nil, Golang, id, value)
		must(t, err)
		other := v.Hex
		if !*v.SameAsDraft02 {
			other = v.Draft02Hex
		}
		if hex.EncodeToString(golang) != other {
			t.Fatalf("golang bytes %x, file says %s", golang, other)
		}
	}
}

func checkNodeVector(t *testing.T, v vector) {
	id := v.tag()
	c := ConfigFor(v.dialect)
	if id > 0x3f {
		// NewNodePacketEncoder(0x40) writes c0 (an empty array node 0x00) in the reference;
		// we refuse to write the id and read the bytes as what they say.
		_, err := (Item{ID: id, Value: Node{}}).Encode(v.dialect)
		wantKind(t, err, KindInvalidTag)
		_, _, err = BeginNode(nil, v.dialect, NodeTag(id))
		wantKind(t, err, KindInvalidTag)
		p, err := c.Decode(v.bytes(t))
		must(t, err)
		if p.ID() != id&0x3f || !p.IsArray() || !p.IsNode() || len(p.Value()) != 0 {
			t.Fatalf("packet %#v", p)
		}
		if !strings.Contains(v.Decoded, "IsSlice()=true") {
			t.Fatalf("reference says %q", v.Decoded)
		}
		return
	}
	var item Item
	switch {
	case v.ValueRecipe != "":
		if !strings.HasPrefix(v.Name, "stress_C63") {
			t.Fatalf("recipe %q", v.ValueRecipe)
		}
		item = NewNode(id, c63Items()...)
	case strings.HasPrefix(v.Type, "slice<"):
		item = NewArray(id, nodeSchema(t, parseOrdered(t, v.Value))...)
	default:
		item = NewNode(id, nodeSchema(t, parseOrdered(t, v.Value))...)
	}
	want := v.bytes(t)
	got, err := item.Encode(v.dialect)
	must(t, err)
	if !bytes.Equal(got, want) {
		t.Fatalf("encode:\n got %x\nwant %x", got, want)
	}
	if item.EncodedLen(v.dialect) != len(want) {
		t.Fatal("EncodedLen")
	}
	// The same bytes through the append-style builder.
	built := buildWithMarks(t, v.dialect, item)
	if !bytes.Equal(built, want) {
		t.Fatalf("builder:\n got %x\nwant %x", built, want)
	}
	p, err := c.Decode(want)
	must(t, err)
	back, err := ReadItem(p, item.Value)
	must(t, err)
	if back.ID != id || !valueEqual(back.Value, item.Value) {
		t.Fatalf("decode: got %+v want %+v", back, item)
	}
	if p.IsArray() != strings.HasPrefix(v.Type, "slice<") {
		t.Fatal("array flag")
	}
	if v.Name == "node_duplicate_child_keys" {
		// The reference's map keeps only the last; we keep all in order.
		n := 0
		for c, err := range p.Children() {
			must(t, err)
			x, err := c.Int32()
			must(t, err)
			n++
			if x != int32(n) {
				t.Fatalf("child %d = %d", n, x)
			}
		}
		if n != 3 {
			t.Fatalf("%d children", n)
		}
		first, ok, err := p.Child(0)
		must(t, err)
		if x, _ := first.Int32(); !ok || x != 1 {
			t.Fatal("Child returns the first")
		}
	}
	if v.dialect == NVarInt && v.SameAsDraft02 != nil {
		golang, err := item.Encode(Golang)
		must(t, err)
		other := v.Hex
		if !*v.SameAsDraft02 {
			other = v.Draft02Hex
		}
		if hex.EncodeToString(golang) != other {
			t.Fatalf("golang bytes %x, file says %s", golang, other)
		}
	}
}

// buildWithMarks writes an item tree with BeginNode / NodeMark.End and the Append* writers.
func buildWithMarks(t testing.TB, d Dialect, it Item) []byte {
	t.Helper()
	var out []byte
	var build func(it Item)
	build = func(it Item) {
		var err error
		switch v := it.Value.(type) {
		case Node, Array:
			var m NodeMark
			out, m, err = BeginNode(out, d, it.Tag())
			must(t, err)
			var children []Item
			if n, ok := v.(Node); ok {
				children = n
			} else {
				children = v.(Array)
			}
			for _, c := range children {
				build(c)
			}
			out, err = m.End(out)
			must(t, err)
		default:
			out, err = appendScalar(out, d, it.ID, v)
			must(t, err)
		}
	}
	build(it)
	return out
}

func checkStreamVector(t *testing.T, v vector) {
	if v.Name != "spec_tlv_example" {
		t.Fatalf("stream vector %q", v.Name)
	}
	// {"age": 5, "summary": {"create": "Y3", "name": "CELLA"}} as prim 0x01 and node 0x02
	// {0x03 name, 0x04 create}.
	obj := parseOrdered(t, v.Value).(object)
	if obj[0].key != "age" || obj[1].key != "summary" {
		t.Fatalf("value %v", obj)
	}
	age := Item{ID: 0x01, Value: Int32(5)}
	summary := NewNode(0x02, Item{ID: 0x03, Value: String("CELLA")}, Item{ID: 0x04, Value: String("Y3")})
	var got []byte
	got, err := age.AppendTo(got, v.dialect)
	must(t, err)
	got, err = summary.AppendTo(got, v.dialect)
	must(t, err)
	want := v.bytes(t)
	if !bytes.Equal(got, want) {
		t.Fatalf("encode %x want %x", got, want)
	}
	c := ConfigFor(v.dialect)
	_, err = c.Decode(want)
	e := wantKind(t, err, KindTrailingBytes)
	if e.Count != uint64(summary.EncodedLen(v.dialect)) {
		t.Fatalf("count %d", e.Count)
	}
	must(t, c.Validate(want))
	p, rest, err := c.Parse(want)
	must(t, err)
	if x, err := p.Int32(); err != nil || x != 5 {
		t.Fatal("age")
	}
	q, rest, err := c.Parse(rest)
	must(t, err)
	if len(rest) != 0 {
		t.Fatal("rest")
	}
	back, err := ReadItem(q, summary.Value)
	must(t, err)
	if !valueEqual(back.Value, summary.Value) {
		t.Fatal("summary")
	}
	name, ok, err := c.Get(want, 0x02, 0x03)
	must(t, err)
	if s, _ := name.String(); !ok || s != "CELLA" {
		t.Fatal("Get summary/name")
	}
}
