package y3

import (
	"testing"
)

// c63 is the published report's C63 data set (node 0x80, keys 0x01..0x3f ascending), the
// bytes of the stress_C63_ascending vector.
var c63 = func() []byte {
	b, err := NewNode(0x00, c63Items()...).Encode(Golang)
	if err != nil {
		panic(err)
	}
	return b
}()

func TestZeroAllocReadPath(t *testing.T) {
	o, err := NewObserver(DefaultConfig, Path{0x00, 0x20})
	must(t, err)
	checks := map[string]func(){
		"Get": func() {
			p, ok, err := Get(c63, 0x00, 0x20)
			if err != nil || !ok {
				t.Fatal(err)
			}
			if v, err := p.Int64(); err != nil || v != -1 {
				t.Fatal(v, err)
			}
		},
		"Observer": func() {
			o.Reset()
			_, v, err := o.Feed(c63)
			if err != nil || v == nil {
				t.Fatal(err)
			}
			if x, err := v.Int64(); err != nil || x != -1 {
				t.Fatal(x, err)
			}
		},
		"Decode+Child": func() {
			p, err := Decode(c63)
			if err != nil {
				t.Fatal(err)
			}
			c, ok, err := p.Child(0x20)
			if err != nil || !ok {
				t.Fatal(err)
			}
			if _, err := c.Int64(); err != nil {
				t.Fatal(err)
			}
		},
		"Children+accessors": func() {
			p, _, _ := Parse(c63)
			for c, err := range p.Children() {
				if err != nil {
					t.Fatal(err)
				}
				switch (c.ID() - 1) % 7 {
				case 0:
					_, err = c.StringBytes()
				case 1:
					_, err = c.Int32()
				case 2:
					_, err = c.Uint32()
				case 3:
					_, err = c.Int64()
				case 4:
					_, err = c.Uint64()
				case 5:
					_, err = c.Float32()
				case 6:
					_, err = c.Float64()
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		},
		"Validate": func() {
			if err := DefaultConfig.Validate(c63); err != nil {
				t.Fatal(err)
			}
		},
		"AppendInt32": func() {
			var buf [16]byte
			if _, err := AppendInt32(buf[:0], Golang, 0x11, -65); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, f := range checks {
		if n := testing.AllocsPerRun(200, f); n != 0 {
			t.Errorf("%s: %v allocs/op", name, n)
		}
	}
}

func BenchmarkGetC63K32(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(c63)))
	for b.Loop() {
		p, ok, err := Get(c63, 0x00, 0x20)
		if err != nil || !ok {
			b.Fatal(err)
		}
		if v, err := p.Int64(); err != nil || v != -1 {
			b.Fatal(v, err)
		}
	}
}

func BenchmarkObserverC63K32(b *testing.B) {
	o, err := NewObserver(DefaultConfig, Path{0x00, 0x20})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(c63)))
	for b.Loop() {
		o.Reset()
		_, v, err := o.Feed(c63)
		if err != nil || v == nil {
			b.Fatal(err)
		}
		if x, err := v.Int64(); err != nil || x != -1 {
			b.Fatal(x, err)
		}
	}
}

func BenchmarkDecodeC63(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(c63)))
	for b.Loop() {
		if _, err := Decode(c63); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeC63(b *testing.B) {
	items := NewNode(0x00, c63Items()...)
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = items.AppendTo(buf[:0], Golang); err != nil {
			b.Fatal(err)
		}
	}
}

// c03 is the C03 data set (keys 0x01..0x03): the small message of the IoT case.
var c03 = func() []byte {
	b, err := NewNode(0x00, c63Items()[:3]...).Encode(Golang)
	if err != nil {
		panic(err)
	}
	return b
}()

func BenchmarkGetC03K02(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(c03)))
	for b.Loop() {
		p, ok, err := Get(c03, 0x00, 0x02)
		if err != nil || !ok {
			b.Fatal(err)
		}
		if v, err := p.Int32(); err != nil || v != -65 {
			b.Fatal(v, err)
		}
	}
}

func BenchmarkObserverC03K02(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(c03)))
	o, err := NewObserver(DefaultConfig, Path{0x00, 0x02})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		o.Reset()
		_, v, err := o.Feed(c03)
		if err != nil || v == nil {
			b.Fatal(err)
		}
		if x, err := v.Int32(); err != nil || x != -65 {
			b.Fatal(x, err)
		}
	}
}
