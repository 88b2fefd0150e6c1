package y3

import (
	"math/rand"
	"testing"
)

// The complete-buffer fast path (fast.go) against the general machine: Get against
// getGeneral, and a one-path observer against the same observer with the fast path off, on
// whole inputs (where the fast path answers or gives up), field for field.

// fastAgrees fails t when the fast path and the general machine differ on data.
func fastAgrees(t *testing.T, c Config, path Path, data []byte) {
	t.Helper()
	c = c.norm()
	g, ok, err := c.Get(data, path...)
	rg, rok, rerr := c.getGeneral(data, path)
	if !sameError(err, rerr) || ok != rok {
		t.Fatalf("Get(%v) = %v, %v; general %v, %v (data % x)", path, ok, err, rok, rerr, data)
	}
	if ok && (string(g.Value()) != string(rg.Value()) || g.Tag() != rg.Tag() ||
		g.Depth() != rg.Depth() || g.EncodedLen() != rg.EncodedLen()) {
		t.Fatalf("Get(%v) packet differs (data % x)", path, data)
	}
	run := func(general bool) ([]seen, error, uint64, uint64) {
		o, err := NewObserver(c, path)
		if err != nil {
			t.Fatal(err)
		}
		o.general = general
		var out []seen
		err = o.FeedAll(data, func(v *Observed) error {
			out = append(out, seen{v.Sub, v.Tag(), v.Depth(), string(v.Value())})
			return nil
		})
		if err == nil {
			err = o.Finish()
		}
		return out, err, o.Position(), o.Packets()
	}
	fs, ferr, fpos, fpk := run(false)
	gs, gerr, gpos, gpk := run(true)
	if !sameError(ferr, gerr) || !equalSeen(fs, gs) || (ferr == nil && (fpos != gpos || fpk != gpk)) {
		t.Fatalf("observer %v: fast %v %v (%d, %d), general %v %v (%d, %d) (data % x)",
			path, fs, ferr, fpos, fpk, gs, gerr, gpos, gpk, data)
	}
}

// genTree appends a random small tree over keys 0..3 (so that paths and siblings collide),
// with values up to 80 bytes (one- and two-byte lengths).
func genTree(r *rand.Rand, out []byte, depth int) []byte {
	key := byte(r.Intn(4))
	if depth > 0 && r.Intn(2) == 0 {
		var kids []byte
		for n := r.Intn(5); n > 0; n-- {
			kids = genTree(r, kids, depth-1)
		}
		return appendPacket(out, 0x80|key, kids)
	}
	v := make([]byte, r.Intn(80))
	r.Read(v)
	return appendPacket(out, key, v)
}

func appendPacket(out []byte, tag byte, v []byte) []byte {
	out = append(out, tag)
	if n := len(v); n < 0x40 {
		out = append(out, byte(n))
	} else {
		out = append(out, 0x80|byte(n>>7), byte(n&0x7f))
	}
	return append(out, v...)
}

func TestFastPathAgrees(t *testing.T) {
	r := rand.New(rand.NewSource(14))
	for i := 0; i < 20000; i++ {
		var data []byte
		for n := 1 + r.Intn(3); n > 0; n-- {
			data = genTree(r, data, 4)
		}
		for e := r.Intn(3); e > 0; e-- {
			data[r.Intn(len(data))] = byte(r.Intn(256))
		}
		if r.Intn(2) == 0 {
			data = data[:r.Intn(len(data)+1)]
		}
		path := make(Path, 1+r.Intn(3))
		for j := range path {
			path[j] = uint32(r.Intn(4))
		}
		c := Config{Dialect: Dialect(r.Intn(2)), Limits: Limits{MaxDepth: uint32(1 + r.Intn(6))}}
		fastAgrees(t, c, path, data)
	}
}

// FuzzFastPath: the same comparison on any input.
func FuzzFastPath(f *testing.F) {
	seedCorpus(f, func(b []byte) {
		f.Add(b, byte(0x10), byte(0x11), byte(2), byte(0))
		f.Add(b, byte(0x00), byte(0x20), byte(2), byte(1))
	})
	f.Fuzz(func(t *testing.T, data []byte, k1, k2, n, d byte) {
		path := Path{uint32(k1 & 0x3f), uint32(k2 & 0x3f)}[:1+int(n)%2]
		c := Config{Dialect: Dialect(d % 2), Limits: Limits{MaxDepth: uint32(1 + d%8)}}
		fastAgrees(t, c, path, data)
	})
}
