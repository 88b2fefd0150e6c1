package y3

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// seen is one observed value, copied.
type seen struct {
	sub   int
	tag   Tag
	depth int
	value string
}

func (s seen) String() string {
	return fmt.Sprintf("{sub %d %v depth %d %x}", s.sub, s.tag, s.depth, s.value)
}

// observeChunks feeds chunks to a fresh observer and returns what it saw and Finish's error.
func observeChunks(t testing.TB, c Config, paths []Path, chunks [][]byte) ([]seen, error) {
	t.Helper()
	o, err := NewObserver(c, paths...)
	if err != nil {
		t.Fatalf("NewObserver(%v): %v", paths, err)
	}
	var out []seen
	for _, ch := range chunks {
		for len(ch) > 0 {
			n, v, err := o.Feed(ch)
			if err != nil {
				return out, err
			}
			if n == 0 && v == nil {
				t.Fatal("no progress")
			}
			if v != nil {
				out = append(out, seen{v.Sub, v.Tag(), v.Depth(), string(v.Value())})
				if v.EncodedLen() != headerLen(v.Tag(), len(v.Value()), c.Dialect)+len(v.Value()) {
					t.Fatal("EncodedLen")
				}
			}
			ch = ch[n:]
		}
	}
	return out, o.Finish()
}

// leafPaths walks a decoded stream and returns the distinct key paths of its leaves
// (primitives and empty nodes) and what an observer of them must see, in stream order. A
// leaf path that is a prefix of another (an empty array beside a full one) is left out:
// subscriptions may not overlap.
func leafPaths(t testing.TB, c Config, buf []byte) ([]Path, []seen) {
	t.Helper()
	type leaf struct {
		path Path
		s    seen
	}
	var leaves []leaf
	var walk func(p Packet, prefix Path)
	walk = func(p Packet, prefix Path) {
		path := append(append(Path(nil), prefix...), p.ID())
		if p.IsNode() && len(p.Value()) > 0 {
			for c, err := range p.Children() {
				must(t, err)
				walk(c, path)
			}
			return
		}
		leaves = append(leaves, leaf{path, seen{-1, p.Tag(), p.Depth(), string(p.Value())}})
	}
	for rest := buf; len(rest) > 0; {
		p, r, err := c.Parse(rest)
		must(t, err)
		walk(p, nil)
		rest = r
	}
	var paths []Path
	index := map[string]int{}
	var want []seen
	for _, l := range leaves {
		shadowed := false
		for _, o := range leaves {
			if len(o.path) > len(l.path) && hasPrefix(o.path, l.path) {
				shadowed = true
			}
		}
		if shadowed {
			continue
		}
		key := l.path.String()
		i, ok := index[key]
		if !ok {
			i = len(paths)
			index[key] = i
			paths = append(paths, l.path)
		}
		l.s.sub = i
		want = append(want, l.s)
	}
	return paths, want
}

// boundaries are the offsets where top-level packets end.
func boundaries(t testing.TB, c Config, buf []byte) map[int]bool {
	t.Helper()
	out := map[int]bool{0: true}
	for off := 0; off < len(buf); {
		p, _, err := c.Parse(buf[off:])
		must(t, err)
		off += p.EncodedLen()
		out[off] = true
	}
	return out
}

func equalSeen(a, b []seen) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestObserverVectors feeds every decodable vector through an observer of all its leaf
// paths: one-shot, split at every point, and one byte at a time must all see what the
// packet walk sees; every proper prefix must end in unexpected_end at Finish.
func TestObserverVectors(t *testing.T) {
	n := 0
	for _, v := range loadVectors(t) {
		if v.Hex == "" {
			continue
		}
		t.Run(v.file[:6]+"/"+v.Name, func(t *testing.T) {
			c := ConfigFor(v.dialect)
			buf := v.bytes(t)
			if err := c.Validate(buf); err != nil {
				// Only the refused tags (0x40, 0x41 primitives) get here.
				wantKind(t, err, KindInvalidTag)
				checkValidatorSplits(t, c, buf, KindInvalidTag)
				return
			}
			n++
			paths, want := leafPaths(t, c, buf)
			if len(paths) > MaxSubscriptions {
				t.Fatalf("%d paths", len(paths))
			}
			got, err := observeChunks(t, c, paths, [][]byte{buf})
			must(t, err)
			if !equalSeen(got, want) {
				t.Fatalf("one-shot:\n got %v\nwant %v", got, want)
			}
			// Get finds the first value of every path, borrowed from buf.
			for i, p := range paths {
				g, ok, err := c.Get(buf, p...)
				must(t, err)
				var first seen
				for _, w := range want {
					if w.sub == i {
						first = w
						break
					}
				}
				if !ok || string(g.Value()) != first.value || g.Tag() != first.tag || g.Depth() != first.depth {
					t.Fatalf("Get(%v) = %#v", p, g)
				}
			}
			step := 1
			if len(buf) > 2000 {
				step = 97 // the long strings: still hundreds of split points
			}
			complete := boundaries(t, c, buf)
			for i := 0; i <= len(buf); i += step {
				got, err := observeChunks(t, c, paths, [][]byte{buf[:i], buf[i:]})
				must(t, err)
				if !equalSeen(got, want) {
					t.Fatalf("split at %d:\n got %v\nwant %v", i, got, want)
				}
				// Every proper prefix is a truncated stream.
				if i < len(buf) {
					_, err := observeChunks(t, c, paths, [][]byte{buf[:i]})
					if complete[i] {
						must(t, err)
					} else {
						e := wantKind(t, err, KindUnexpectedEnd)
						if e.Needed == 0 || e.Needed > uint64(len(buf)-i) {
							t.Fatalf("prefix %d: needed %d", i, e.Needed)
						}
					}
				}
			}
			if len(buf) <= 4096 {
				var bytewise [][]byte
				for i := range buf {
					bytewise = append(bytewise, buf[i:i+1])
				}
				got, err = observeChunks(t, c, paths, bytewise)
				must(t, err)
				if !equalSeen(got, want) {
					t.Fatalf("bytewise:\n got %v\nwant %v", got, want)
				}
			}
			// Through an io.Reader that returns one byte per Read.
			var fromReader []seen
			must(t, c.ObserveReader(iotest.OneByteReader(bytes.NewReader(buf)), paths, func(v Observed) error {
				fromReader = append(fromReader, seen{v.Sub, v.Tag(), v.Depth(), string(v.Value())})
				return nil
			}))
			if !equalSeen(fromReader, want) {
				t.Fatalf("reader:\n got %v\nwant %v", fromReader, want)
			}
		})
	}
	if n < 200 {
		t.Fatalf("only %d vectors observed", n)
	}
}

func TestObserverNestedPathSplit(t *testing.T) {
	buf := mustHex(t, "810802017f8303040143")
	paths := []Path{{0x01, 0x03, 0x04}, {0x01, 0x02}}
	want := []seen{{1, PrimitiveTag(2), 2, "\x7f"}, {0, PrimitiveTag(4), 3, "C"}}
	for i := 0; i <= len(buf); i++ {
		got, err := observeChunks(t, DefaultConfig, paths, [][]byte{buf[:i], buf[i:]})
		must(t, err)
		if !equalSeen(got, want) {
			t.Fatalf("split %d: %v", i, got)
		}
	}
}

func TestObserverManyPacketsInARow(t *testing.T) {
	one := mustHex(t, "9006110101120161")
	stream := bytes.Repeat(one, 3)
	o, err := NewObserver(DefaultConfig, Path{0x10, 0x12})
	must(t, err)
	count := 0
	must(t, o.FeedAll(stream, func(v *Observed) error {
		count++
		if s, err := v.String(); err != nil || s != "a" {
			t.Fatal(s, err)
		}
		return nil
	}))
	must(t, o.Finish())
	if count != 3 || o.Packets() != 3 || o.Position() != uint64(len(stream)) {
		t.Fatalf("count %d packets %d pos %d", count, o.Packets(), o.Position())
	}
	// Reset serves another stream.
	o.Reset()
	_, v, err := o.Feed(one)
	must(t, err)
	if v == nil || v.Assembled {
		t.Fatal("after Reset")
	}
}

func TestObserverDoesNotMatchTagBytesInsideValues(t *testing.T) {
	// The reference's Subscribe(0x10) finds `10 01 07` inside the value of 0x02.
	buf := mustHex(t, "81 08 02 03 10 01 07 10 01 05")
	got, err := observeChunks(t, DefaultConfig, []Path{{0x01, 0x10}}, [][]byte{buf})
	must(t, err)
	if !equalSeen(got, []seen{{0, PrimitiveTag(0x10), 2, "\x05"}}) {
		t.Fatal(got)
	}
}

func TestObserverPrimitiveWithMatchingKeyIsNotEntered(t *testing.T) {
	// Path 0x10/0x11: the first 0x10 is a primitive (skipped), the second a node.
	buf := mustHex(t, "1003110105 9003110106")
	got, err := observeChunks(t, DefaultConfig, []Path{{0x10, 0x11}}, [][]byte{buf})
	must(t, err)
	if !equalSeen(got, []seen{{0, PrimitiveTag(0x11), 2, "\x06"}}) {
		t.Fatal(got)
	}
	// In draft02 the schema decides: both are entered.
	d := ConfigFor(Draft02)
	buf = mustHex(t, "1003110105 1003110106")
	got, err = observeChunks(t, d, []Path{{0x10, 0x11}}, [][]byte{buf})
	must(t, err)
	if len(got) != 2 {
		t.Fatal(got)
	}
}

func TestObserverTruncationOnlyAtFinish(t *testing.T) {
	buf := mustHex(t, "9006110101120161")
	o, err := NewObserver(DefaultConfig, Path{0x10, 0x12})
	must(t, err)
	n, v, err := o.Feed(buf[:5])
	if err != nil || n != 5 || v != nil {
		t.Fatal(n, v, err)
	}
	e := wantKind(t, o.Finish(), KindUnexpectedEnd)
	if e.Needed != 3 {
		t.Fatal(e.Needed)
	}
}

func TestObserverAssemblesStraddlingValues(t *testing.T) {
	buf, err := NewNode(0x10, Item{ID: 0x11, Value: String(strings.Repeat("x", 300))}).Encode(Golang)
	must(t, err)
	o, err := NewObserver(DefaultConfig, Path{0x10, 0x11})
	must(t, err)
	var got *Observed
	for i := 0; i < len(buf); i += 7 {
		end := min(i+7, len(buf))
		n, v, err := o.Feed(buf[i:end])
		must(t, err)
		if n != end-i {
			t.Fatal("consumed")
		}
		if v != nil {
			got = v
		}
	}
	if got == nil || !got.Assembled || len(got.Value()) != 300 {
		t.Fatalf("%#v", got)
	}
	s, err := got.String()
	must(t, err)
	if s != strings.Repeat("x", 300) {
		t.Fatal("value")
	}
	must(t, o.Finish())
	// In one chunk it is borrowed.
	o.Reset()
	_, v, err := o.Feed(buf)
	must(t, err)
	if v == nil || v.Assembled || &v.Value()[0] != &buf[len(buf)-300] {
		t.Fatal("not borrowed")
	}
}

func TestObserverErrors(t *testing.T) {
	feed := func(hexes ...string) error {
		o := NewValidator(DefaultConfig)
		for _, h := range hexes {
			if _, _, err := o.Feed(mustHex(t, h)); err != nil {
				// Sticky.
				if _, _, err2 := o.Feed([]byte{0}); err2 != err || o.Finish() != err {
					t.Fatal("error not sticky")
				}
				return err
			}
		}
		return o.Finish()
	}
	e := wantKind(t, feed("8103110501"), KindChildOverflow)
	if e.Declared != 5 || e.Available != 1 {
		t.Fatal(e)
	}
	e = wantKind(t, feed("810111"), KindTruncatedHeader)
	if e.Available != 1 {
		t.Fatal(e)
	}
	wantKind(t, feed("8101", "11"), KindTruncatedHeader)
	// A header error straddling the node end is reported as the node-bounded parse sees it.
	wantKind(t, feed("8102", "117f"), KindNegativeLength)
	wantKind(t, feed("8101", "117f"), KindTruncatedHeader)
	wantKind(t, feed("81", "01", "11"), KindTruncatedHeader)
	wantKind(t, feed("5101"), KindInvalidTag)
	wantKind(t, feed("11", "8080808080"), KindVarintOverflow)
}

func TestObserverPathErrors(t *testing.T) {
	_, err := NewObserver(DefaultConfig, Path{0x10}, Path{0x10, 0x11})
	e := wantKind(t, err, KindPathOverlap)
	if e.Shorter != 0 || e.Longer != 1 || e.Op != OpPath {
		t.Fatal(e)
	}
	_, err = NewObserver(DefaultConfig, Path{0x10, 0x11}, Path{0x10})
	e = wantKind(t, err, KindPathOverlap)
	if e.Shorter != 1 || e.Longer != 0 {
		t.Fatal(e)
	}
	_, err = NewObserver(DefaultConfig, Path{1}, Path{1})
	wantKind(t, err, KindPathOverlap)
	_, err = NewObserver(DefaultConfig)
	wantKind(t, err, KindPathCount)
	many := make([]Path, 65)
	for i := range many {
		many[i] = Path{uint32(i)}
	}
	_, err = NewObserver(DefaultConfig, many...)
	wantKind(t, err, KindPathCount)
	_, err = NewObserver(DefaultConfig, many[:64]...)
	must(t, err)
	_, err = NewObserver(DefaultConfig, Path{})
	wantKind(t, err, KindEmptyPath)
	_, err = NewObserver(DefaultConfig, make(Path, 17))
	wantKind(t, err, KindPathTooDeep)

	p, err := ParsePath("0x10/0x11")
	must(t, err)
	if p.String() != "0x10/0x11" {
		t.Fatal(p)
	}
	p, err = ParsePath(" 16/17 ")
	must(t, err)
	if p.String() != "0x10/0x11" {
		t.Fatal(p)
	}
	e = wantKind(t, func() error { _, err := ParsePath("0x10//1"); return err }(), KindPathSyntax)
	if e.At != 5 {
		t.Fatal(e.At)
	}
	wantKind(t, func() error { _, err := ParsePath("0xg"); return err }(), KindPathSyntax)
	wantKind(t, func() error { _, err := ParsePath("-1"); return err }(), KindPathSyntax)
	wantKind(t, func() error { _, err := ParsePath(""); return err }(), KindEmptyPath)
	wantKind(t, func() error { _, err := ParsePath(strings.Repeat("1/", 16) + "1"); return err }(), KindPathTooDeep)
	// Get reports an overlong path as too_deep and an empty one as a miss.
	_, _, err = Get([]byte{0x11, 0x01, 0x05}, make([]uint32, 17)...)
	wantKind(t, err, KindTooDeep)
	_, ok, err := Get([]byte{0x11, 0x01, 0x05})
	if ok || err != nil {
		t.Fatal(ok, err)
	}
}

func TestObserveReaderErrors(t *testing.T) {
	buf := mustHex(t, "9006110101120161")
	stop := errors.New("stop")
	err := ObserveReader(bytes.NewReader(buf), []Path{{0x10, 0x11}}, func(Observed) error { return stop })
	if err != stop {
		t.Fatal(err)
	}
	err = ObserveReader(bytes.NewReader(buf[:6]), []Path{{0x10, 0x12}}, func(Observed) error { return nil })
	wantKind(t, err, KindUnexpectedEnd)
	rerr := errors.New("read failed")
	err = ObserveReader(iotest.ErrReader(rerr), []Path{{0x10}}, func(Observed) error { return nil })
	if err != rerr {
		t.Fatal(err)
	}
	err = ObserveReader(io.MultiReader(), nil, nil)
	wantKind(t, err, KindPathCount)
}

func TestObserverLendsAValueWhoseHeaderEndedThePreviousChunk(t *testing.T) {
	// Node 0x10 { 0x11 = "ab" }: the chunk ends with the header of 0x11, the value lies
	// whole in the next chunk, and is lent from it (as the Rust observer lends it).
	buf := mustHex(t, "90 04 11 02 61 62")
	o, err := NewObserver(DefaultConfig, Path{0x10, 0x11})
	must(t, err)
	n, v, err := o.Feed(buf[:4])
	must(t, err)
	if n != 4 || v != nil {
		t.Fatalf("first chunk: consumed %d, value %v", n, v)
	}
	next := buf[4:]
	n, v, err = o.Feed(next)
	must(t, err)
	if n != 2 || v == nil || v.Assembled || &v.Value()[0] != &next[0] || string(v.Value()) != "ab" {
		t.Fatalf("second chunk: consumed %d, value %+v", n, v)
	}
	if v.EncodedLen() != 4 || v.Depth() != 2 {
		t.Fatalf("encoded length %d depth %d", v.EncodedLen(), v.Depth())
	}
	must(t, o.Finish())
	// One byte of the value before the chunk's end: assembled.
	o.Reset()
	_, v, err = o.Feed(buf[:5])
	must(t, err)
	if v != nil {
		t.Fatal("value before its last byte")
	}
	_, v, err = o.Feed(buf[5:])
	must(t, err)
	if v == nil || !v.Assembled || string(v.Value()) != "ab" {
		t.Fatalf("assembled: %+v", v)
	}
}
