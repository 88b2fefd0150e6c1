package y3

import (
	"bytes"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
)

// heapDelta reports the bytes allocated while f runs.
func heapDelta(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestHugeDeclaredLengthIsRefusedBeforeAllocation(t *testing.T) {
	// int32::MAX declared, 16 MiB allowed.
	buf := mustHex(t, "11 87ffffff7f 00")
	e := wantKind(t, func() error { _, err := Decode(buf); return err }(), KindTooLong)
	if e.Declared != math.MaxInt32 || e.Limit != DefaultMaxPacketLen {
		t.Fatal(e)
	}
	_, _, err := Parse(buf)
	wantKind(t, err, KindTooLong)
	// The observer refuses it from the header alone, even when the path takes the value.
	var oerr error
	delta := heapDelta(func() {
		o, _ := NewObserver(DefaultConfig, Path{0x11})
		_, _, oerr = o.Feed(buf[:3])
		if oerr == nil {
			_, _, oerr = o.Feed(buf[3:])
		}
	})
	wantKind(t, oerr, KindTooLong)
	if delta > 16<<10 {
		t.Fatalf("allocated %d bytes", delta)
	}
	// Configured limits.
	small := Config{Limits: Limits{MaxPacketLen: 100}}
	_, err = small.Decode(mustHex(t, "118100"))
	e = wantKind(t, err, KindTooLong)
	if e.Declared != 128 || e.Limit != 100 {
		t.Fatal(e)
	}
	// A child inside a node too.
	_, err = small.Decode(mustHex(t, "9005 11 81 00 0000"))
	wantKind(t, err, KindTooLong)
}

func TestDeclaredButMissingValueIsNotReserved(t *testing.T) {
	// 16 MiB declared for a subscribed value, 10 bytes sent: the observer keeps what
	// arrived, never reserving from the wire length.
	head, err := AppendHeader(nil, Golang, PrimitiveTag(0x11), DefaultMaxPacketLen)
	must(t, err)
	var ferr error
	delta := heapDelta(func() {
		o, _ := NewObserver(DefaultConfig, Path{0x11})
		_, _, ferr = o.Feed(head)
		if ferr == nil {
			_, _, ferr = o.Feed(make([]byte, 10))
		}
		if ferr == nil {
			ferr = o.Finish()
		}
	})
	e := wantKind(t, ferr, KindUnexpectedEnd)
	if e.Needed != DefaultMaxPacketLen-10 {
		t.Fatal(e.Needed)
	}
	if delta > 64<<10 {
		t.Fatalf("allocated %d bytes", delta)
	}
}

// nested builds depth nested nodes 0x81 around an empty node, without recursion.
func nested(depth int) []byte {
	inner := []byte{0x81, 0x00}
	for i := 1; i < depth; i++ {
		h := appendHeaderUnchecked(nil, Golang, NodeTag(1), len(inner))
		inner = append(h, inner...)
	}
	return inner
}

func TestDeepNesting(t *testing.T) {
	buf := nested(10000)
	_, err := Decode(buf)
	e := wantKind(t, err, KindTooDeep)
	if e.Limit != DefaultMaxDepth {
		t.Fatal(e)
	}
	checkValidatorSplits(t, DefaultConfig, buf, KindTooDeep)
	// An observer walking down the path hits the same limit.
	path := make([]uint32, MaxPathDepth)
	for i := range path {
		path[i] = 1
	}
	_, _, err = Get(buf, path...)
	must(t, err) // 16 levels is within the limit; the path's last key takes a node
	// Raising the limit: walked iteratively, the level stack spills to the heap.
	deep := Config{Limits: Limits{MaxDepth: 20000}}
	p, err := deep.Decode(buf)
	must(t, err)
	// Walk to the bottom through the packet views (iteratively).
	depth := 1
	for {
		c, ok, err := p.Child(1)
		must(t, err)
		if !ok {
			break
		}
		p = c
		depth++
	}
	if depth != 10000 {
		t.Fatal(depth)
	}
	// At exactly the limit: a packet at depth MaxDepth cannot be entered.
	_, err = (Config{Limits: Limits{MaxDepth: 3}}).Decode(nested(3))
	wantKind(t, err, KindTooDeep)
	_, err = (Config{Limits: Limits{MaxDepth: 4}}).Decode(nested(3))
	must(t, err)
	q, _, err := (Config{Limits: Limits{MaxDepth: 2}}).Parse(mustHex(t, "810a82058303040105050178"))
	must(t, err)
	inner, ok, err := q.Child(2)
	must(t, err)
	if !ok {
		t.Fatal("child")
	}
	_, err = inner.ChildIter()
	wantKind(t, err, KindTooDeep)
	_, _, err = inner.Child(3)
	wantKind(t, err, KindTooDeep)
	for _, err := range inner.Children() {
		wantKind(t, err, KindTooDeep)
	}
}

func TestNegativeLengths(t *testing.T) {
	for _, h := range []string{"117f01", "114001", "11ff7f", "81 02 11 7f", "8102117f"} {
		_, err := Decode(mustHex(t, h))
		e := wantKind(t, err, KindNegativeLength)
		if e.Declared >= 0 {
			t.Fatal(e)
		}
	}
}

func TestOverlongVarints(t *testing.T) {
	// Lengths: a sixth byte, or more than int32::MAX.
	for _, h := range []string{"11 8080808080 01", "11 8880808000", "11 8080808080"} {
		_, err := Decode(mustHex(t, h))
		wantKind(t, err, KindVarintOverflow)
	}
	_, err := Decode(mustHex(t, "11 80808080 01"))
	wantKind(t, err, KindUnexpectedEnd) // 5-byte length 1 is fine; the value is missing
	p, err := Decode(mustHex(t, "11 8080808001 05"))
	must(t, err)
	if x, _ := p.Int32(); x != 5 {
		t.Fatal(x)
	}
	// Values.
	cases := []struct {
		hex  string
		kind Kind
		f    func(Packet) error
	}{
		{"1106818181818101", KindVarintOverflow, func(p Packet) error { _, err := p.Int32(); return err }},
		{"110b8180808080808080808000", KindVarintOverflow, func(p Packet) error { _, err := p.Int64(); return err }},
		{"110a81808080808080808000", KindVarintOverflow, func(p Packet) error { _, err := p.Int64(); return err }},
		{"110588ffffff7f", KindVarintOverflow, func(p Packet) error { _, err := p.Int32(); return err }},
		{"110180", KindVarintUnterminated, func(p Packet) error { _, err := p.Int64(); return err }},
		{"11020505", KindTrailingBytes, func(p Packet) error { _, err := p.Int32(); return err }},
		{"1100", KindInvalidLength, func(p Packet) error { _, err := p.Uint64(); return err }},
		{"110190", KindWrongType, func(p Packet) error { _, err := p.ChildIter(); return err }},
		{"900111", KindWrongType, func(p Packet) error { _, err := p.Int32(); return err }},
	}
	for _, c := range cases {
		p, _, err := Parse(mustHex(t, c.hex))
		must(t, err)
		wantKind(t, c.f(p), c.kind)
	}
	// Non-minimal but fitting.
	for _, h := range []string{"11028005", "1105ff80808000"} {
		p, err := Decode(mustHex(t, h))
		must(t, err)
		if _, err := p.Int32(); err != nil {
			t.Fatal(h, err)
		}
	}
	// uint32 accepts the int32 bits and 0..=MaxUint32 (nvarint writers send 00 ff ff ff ff).
	nv := ConfigFor(NVarInt)
	p, err = nv.Decode(mustHex(t, "110500ffffffff"))
	must(t, err)
	if x, err := p.Uint32(); err != nil || x != math.MaxUint32 {
		t.Fatal(x, err)
	}
	p, err = nv.Decode(mustHex(t, "11050100000000"))
	must(t, err)
	_, err = p.Uint32()
	wantKind(t, err, KindVarintOverflow)
	_, err = p.Int32()
	wantKind(t, err, KindVarintOverflow)
	p, err = nv.Decode(mustHex(t, "1102ffff"))
	must(t, err)
	if x, err := p.Int32(); err != nil || x != -1 {
		t.Fatal("redundant sign byte", x, err)
	}
	// Draft02 tags: at most four bytes.
	d2 := ConfigFor(Draft02)
	_, err = d2.Decode(mustHex(t, "8080808001 00"))
	wantKind(t, err, KindVarintOverflow)
	p, err = d2.Decode(mustHex(t, "822c 01 05"))
	must(t, err)
	if p.ID() != 300 {
		t.Fatal(p.ID())
	}
}

func TestBadUTF8(t *testing.T) {
	p, err := Decode(mustHex(t, "1103 61ff62"))
	must(t, err) // checked only on string access
	_, err = p.String()
	e := wantKind(t, err, KindInvalidUTF8)
	if e.ValidUpTo != 1 {
		t.Fatal(e)
	}
	_, err = p.StringBytes()
	wantKind(t, err, KindInvalidUTF8)
	b, err := p.Bytes()
	must(t, err)
	if !bytes.Equal(b, []byte{0x61, 0xff, 0x62}) {
		t.Fatal(b)
	}
	// A surrogate half, an overlong encoding, a cut multibyte sequence.
	for h, upTo := range map[string]uint64{"1103eda080": 0, "1104 41c0af41": 1, "1103 6162e4": 2} {
		p, err := Decode(mustHex(t, h))
		must(t, err)
		_, err = p.String()
		if e := wantKind(t, err, KindInvalidUTF8); e.ValidUpTo != upTo {
			t.Fatal(h, e.ValidUpTo)
		}
	}
	var s string
	wantKind(t, Unmarshal(mustHex(t, "8105 1003 61ff62"), 0x10, &s), KindInvalidUTF8)
}

func TestEncoderErrors(t *testing.T) {
	dst := []byte("keep")
	out, err := AppendInt32(dst, Golang, 0x40, 1)
	wantKind(t, err, KindInvalidTag)
	if string(out) != "keep" {
		t.Fatal("dst changed")
	}
	_, err = AppendString(nil, Draft02, draft02MaxID+1, "x")
	wantKind(t, err, KindInvalidTag)
	out, err = AppendString(nil, Draft02, draft02MaxID, "x")
	must(t, err)
	if !bytes.Equal(out, mustHex(t, "ffffff7f 01 78")) {
		t.Fatalf("%x", out)
	}
	_, err = AppendHeader(nil, Golang, PrimitiveTag(1), math.MaxInt32+1)
	e := wantKind(t, err, KindTooLong)
	if e.Op != OpEncode || e.Len != math.MaxInt32+1 {
		t.Fatal(e)
	}
	item := NewNode(0x10, Item{ID: 0x40, Value: Int32(1)})
	_, err = item.Encode(Golang)
	wantKind(t, err, KindInvalidTag)
	out, err = item.AppendTo(dst, Golang)
	if err == nil || string(out) != "keep" {
		t.Fatal("AppendTo wrote on error")
	}
	var small [3]byte
	_, err = (Item{ID: 1, Value: String("abcd")}).EncodeTo(small[:], Golang)
	e = wantKind(t, err, KindBufferTooSmall)
	if e.Required != 6 || e.Remaining != 3 {
		t.Fatal(e)
	}
	n, err := (Item{ID: 1, Value: String("a")}).EncodeTo(small[:], Golang)
	must(t, err)
	if n != 3 || !bytes.Equal(small[:], []byte{1, 1, 'a'}) {
		t.Fatal(small)
	}
	// An item without a value.
	var ue *UnsupportedTypeError
	if _, err := (Item{ID: 1}).Encode(Golang); !errors.As(err, &ue) {
		t.Fatal(err)
	}
	if _, err := NewNode(1, Item{ID: 2}).AppendTo(nil, Golang); !errors.As(err, &ue) {
		t.Fatal(err)
	}
	if (Item{ID: 1}).EncodedLen(Golang) != 2 {
		t.Fatal("nil EncodedLen")
	}
	// Draft02 writes no node flag.
	b, err := NewNode(0x01, Item{ID: 2, Value: Int32(-1)}, NewNode(3, Item{ID: 4, Value: String("C")})).Encode(Draft02)
	must(t, err)
	if !bytes.Equal(b, mustHex(t, "010802017f0303040143")) {
		t.Fatalf("%x", b)
	}
}

func TestNodeMarkLengths(t *testing.T) {
	// Values around the one-, two- and three-byte length boundaries.
	for _, n := range []int{0, 1, 63, 64, 127, 128, 8191, 8192, 16384, 70000} {
		payload := strings.Repeat("z", n)
		want, err := NewNode(0x10, NewNode(0x11, Item{ID: 0x12, Value: String(payload)})).Encode(Golang)
		must(t, err)
		got, m1, err := BeginNode([]byte("pre"), Golang, NodeTag(0x10))
		must(t, err)
		got, m2, err := BeginNode(got, Golang, NodeTag(0x11))
		must(t, err)
		got, err = AppendString(got, Golang, 0x12, payload)
		must(t, err)
		got, err = m2.End(got)
		must(t, err)
		got, err = m1.End(got)
		must(t, err)
		if string(got[:3]) != "pre" || !bytes.Equal(got[3:], want) {
			t.Fatalf("n=%d: %x", n, got[3:min(len(got), 20)])
		}
		p, err := Decode(got[3:])
		must(t, err)
		s, ok, err := p.Find(0x11, 0x12)
		must(t, err)
		if v, _ := s.String(); !ok || v != payload {
			t.Fatal("roundtrip")
		}
	}
}

func TestVarintTables(t *testing.T) {
	pv := map[int64]string{
		63: "3f", 64: "8040", 127: "807f", 128: "8100", 8191: "bf7f", 8192: "80c000",
		16384: "818000", -1: "7f", -65: "ff3f", math.MaxInt64: "80ffffffffffffffff7f",
		math.MinInt64: "ff808080808080808000",
	}
	for v, h := range pv {
		if got := appendPVarint(nil, v); !bytes.Equal(got, mustHex(t, h)) {
			t.Fatalf("pvarint %d = %x", v, got)
		}
		back, err := readPVarint(mustHex(t, h), 64)
		if err != nil || back != v {
			t.Fatal(v, back, err)
		}
	}
	nv := map[int64]string{-1: "ff", 128: "0080", 8191: "1fff", 0: "00", math.MinInt64: "8000000000000000"}
	for v, h := range nv {
		if got := appendNVarint(nil, v); !bytes.Equal(got, mustHex(t, h)) {
			t.Fatalf("nvarint %d = %x", v, got)
		}
	}
	for _, c := range []struct {
		h    string
		v    uint64
		n    int
		kind Kind
	}{
		{"3f", 63, 1, ""}, {"8040", 64, 2, ""}, {"80", 0, 0, ""}, {"", 0, 0, ""},
		{"7f", 0, 0, KindNegativeLength}, {"40", 0, 0, KindNegativeLength}, {"8001", 1, 2, ""},
		{"87ffffff7f", math.MaxInt32, 5, ""}, {"8880808000", 0, 0, KindVarintOverflow},
		{"808080808001", 0, 0, KindVarintOverflow},
	} {
		v, n, err := readLength(mustHex(t, c.h))
		if kindOf(err) != c.kind || v != c.v || n != c.n {
			t.Fatalf("length %s: %d %d %v", c.h, v, n, err)
		}
	}
	if got := appendUVarint(nil, 300); !bytes.Equal(got, mustHex(t, "822c")) {
		t.Fatalf("%x", got)
	}
	for _, f := range []struct {
		v    float32
		want string
	}{{1.5, "3fc0"}, {0, "00"}, {float32(math.Copysign(0, -1)), "80"}, {0.1, "3dcccccd"}} {
		if got := appendFloat32Value(nil, f.v); !bytes.Equal(got, mustHex(t, f.want)) {
			t.Fatalf("%v: %x", f.v, got)
		}
	}
	if float64Len(23) != 2 || float64Len(0) != 1 || float64Len(5e-324) != 8 {
		t.Fatal("float64Len")
	}
}

func TestDialectNames(t *testing.T) {
	for _, d := range []Dialect{Golang, NVarInt, Draft02} {
		back, ok := ParseDialect(d.String())
		if !ok || back != d {
			t.Fatal(d)
		}
	}
	if _, ok := ParseDialect("json"); ok {
		t.Fatal("json")
	}
	if Golang.MaxTag() != 0x3f || Draft02.MaxTag() != 1<<28-1 || Draft02.HasNodeFlag() {
		t.Fatal("dialect facts")
	}
	if ArrayTag(0x10).String() != "array 0x10" {
		t.Fatal(ArrayTag(0x10).String())
	}
	if b, ok := NodeTag(0x3f).Byte(); !ok || b != 0xbf {
		t.Fatal("byte")
	}
	if _, ok := NodeTag(0x40).Byte(); ok {
		t.Fatal("wide byte")
	}
}
