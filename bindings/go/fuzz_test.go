package y3

import (
	"bytes"
	"testing"
)

// seedCorpus adds every vector and malformed input as a seed (the long-string vectors
// only up to 4 KiB: large seeds slow every mutation and minimization down).
func seedCorpus(f *testing.F, add func(b []byte)) {
	for _, v := range loadVectors(f) {
		if v.Hex != "" && len(v.Hex) <= 8192 {
			add(v.bytes(f))
		}
	}
	for _, m := range loadMalformed(f) {
		add(mustHex(f, m.InputHex))
	}
	add(nested(100))
}

// walkAll reads every packet of a decoded tree with every accessor, iteratively.
func walkAll(t *testing.T, p Packet) {
	stack := []Packet{p}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		_, _ = p.Int32()
		_, _ = p.Int64()
		_, _ = p.Uint32()
		_, _ = p.Uint64()
		_, _ = p.Float32()
		_, _ = p.Float64()
		_, _ = p.Bool()
		_, _ = p.String()
		_, _ = p.Bytes()
		it, err := p.ChildIter()
		if err != nil {
			if p.IsNode() && p.Config().Dialect != Draft02 && KindOf(err) != KindTooDeep {
				t.Fatalf("validated node: %v", err)
			}
			continue
		}
		for it.Next() {
			stack = append(stack, it.Packet())
		}
		if err := it.Err(); err != nil && p.IsNode() {
			// Decode validated every node of the one-byte dialects.
			t.Fatalf("child of a validated node: %v", err)
		}
	}
}

// FuzzDecode: Decode never panics; what it accepts is a tree whose every node iterates
// cleanly, re-encodes to the same bytes through the packet views, and agrees with Parse +
// Validate.
func FuzzDecode(f *testing.F) {
	seedCorpus(f, func(b []byte) {
		for d := range byte(3) {
			f.Add(b, d)
		}
	})
	f.Fuzz(func(t *testing.T, data []byte, d byte) {
		c := Config{Dialect: Dialect(d % 3), Limits: Limits{MaxDepth: 32}}
		p, err := c.Decode(data)
		p2, rest, perr := c.Parse(data)
		if err != nil {
			if KindOf(err) == "" {
				t.Fatalf("untyped error %v", err)
			}
			if perr == nil && len(rest) == 0 && c.Validate(data) == nil {
				t.Fatalf("Decode failed (%v) but Parse and Validate pass", err)
			}
			return
		}
		if perr != nil || len(rest) != 0 || p.EncodedLen() != len(data) || !bytes.Equal(p2.Value(), p.Value()) {
			t.Fatal("Decode and Parse disagree")
		}
		// Re-encoding the header reproduces the bytes when the length is minimal.
		if hl := headerLen(p.Tag(), len(p.Value()), c.Dialect); hl == p.hl() {
			b, err := AppendHeader(nil, c.Dialect, p.Tag(), len(p.Value()))
			if err == nil && !bytes.Equal(append(b, p.Value()...), data) {
				t.Fatalf("re-encode %x != %x", b, data[:hl])
			}
		}
		walkAll(t, p)
	})
}

// observeAll runs an observer of paths over chunks and returns everything it saw, and the
// error (from Feed or Finish).
func observeAll(c Config, paths []Path, chunks [][]byte) ([]seen, error) {
	o, err := NewObserver(c, paths...)
	if err != nil {
		return nil, err
	}
	var out []seen
	for _, ch := range chunks {
		err := o.FeedAll(ch, func(v *Observed) error {
			out = append(out, seen{v.Sub, v.Tag(), v.Depth(), string(v.Value())})
			return nil
		})
		if err != nil {
			return out, err
		}
	}
	return out, o.Finish()
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	ea, oka := a.(*Error)
	eb, okb := b.(*Error)
	return oka && okb && *ea == *eb
}

// FuzzObserveSplit: an observer (and a validator) fed one chunk, two chunks split anywhere,
// or one byte at a time, sees the same values and ends in the same error, field for field.
func FuzzObserveSplit(f *testing.F) {
	seedCorpus(f, func(b []byte) {
		f.Add(b, uint16(len(b)/2), byte(0x10), byte(0x11), byte(0))
		f.Add(b, uint16(1), byte(0x01), byte(0x10), byte(1))
		f.Add(b, uint16(3), byte(0x00), byte(0x20), byte(2))
	})
	f.Fuzz(func(t *testing.T, data []byte, split uint16, k1, k2, d byte) {
		if len(data) > 4096 {
			return // each execution runs the observer a dozen times; keep inputs small
		}
		c := Config{Dialect: Dialect(d % 3), Limits: Limits{MaxDepth: 16, MaxPacketLen: 1 << 16}}
		at := int(split) % (len(data) + 1)
		var bytewise [][]byte
		for i := range data {
			bytewise = append(bytewise, data[i:i+1])
		}
		paths := []Path{{uint32(k1), uint32(k2)}, {uint32(k2)}}
		if k1 == k2 {
			paths = paths[:1]
		}
		whole, werr := observeAll(c, paths, [][]byte{data})
		if werr != nil && KindOf(werr) == "" {
			t.Fatalf("untyped error %v", werr)
		}
		for _, chunks := range [][][]byte{{data[:at], data[at:]}, bytewise} {
			got, err := observeAll(c, paths, chunks)
			if !sameError(err, werr) {
				t.Fatalf("split error %v, one-shot %v", err, werr)
			}
			if !equalSeen(got, whole) {
				t.Fatalf("split saw %v, one-shot %v", got, whole)
			}
		}
		// The validator, likewise, and it agrees with the packet walk of Decode.
		v := func(chunks [][]byte) error {
			o := NewValidator(c)
			for _, ch := range chunks {
				if err := o.FeedAll(ch, func(*Observed) error { return nil }); err != nil {
					return err
				}
			}
			return o.Finish()
		}
		verr := v([][]byte{data})
		for _, chunks := range [][][]byte{{data[:at], data[at:]}, bytewise} {
			if err := v(chunks); !sameError(err, verr) {
				t.Fatalf("validator split %v, one-shot %v", err, verr)
			}
		}
		if verr == nil {
			// A valid stream: Get agrees with the observer's first value of each path.
			for i, p := range paths {
				g, ok, err := c.Get(data, p...)
				if err != nil && werr == nil {
					t.Fatalf("Get: %v", err)
				}
				var first *seen
				for j := range whole {
					if whole[j].sub == i {
						first = &whole[j]
						break
					}
				}
				if werr == nil && ok != (first != nil) {
					t.Fatalf("Get(%v) ok=%v, observer %v", p, ok, first)
				}
				if ok && first != nil && string(g.Value()) != first.value {
					t.Fatalf("Get(%v) value differs", p)
				}
			}
		}
	})
}
