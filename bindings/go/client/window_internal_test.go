package client

import (
	"slices"
	"testing"
)

func windowOf(n int) *window {
	w := &window{}
	for i := range n {
		w.keep(Data{Tag: uint32(i), Payload: []byte{1}})
	}
	return w
}

// writeAll writes every frame not yet written on this connection; their tags.
func writeAll(w *window) []uint32 {
	var tags []uint32
	for {
		d, ok := w.peekUnwritten()
		if !ok {
			return tags
		}
		w.wrote()
		tags = append(tags, d.Tag)
	}
}

func TestWindowDrainsOnStoredAndResendsInOrder(t *testing.T) {
	w := windowOf(5)
	if got := writeAll(w); !slices.Equal(got, []uint32{0, 1, 2, 3, 4}) {
		t.Fatal(got)
	}
	w.ack(2)
	w.ack(2) // the same count again moves nothing
	if w.len() != 3 {
		t.Fatal(w.len())
	}
	w.reconnected()
	if w.resent != 3 {
		t.Fatal(w.resent)
	}
	w.keep(Data{Tag: 5})
	if got := writeAll(w); !slices.Equal(got, []uint32{2, 3, 4, 5}) {
		t.Fatal(got)
	}
	w.ack(3) // the new connection counts from 0
	if w.len() != 1 {
		t.Fatal(w.len())
	}
	w.ack(4)
	if w.len() != 0 {
		t.Fatal(w.len())
	}
}

func TestWindowForgetsNoMoreThanWrittenAndWraps(t *testing.T) {
	w := windowOf(4)
	w.peekUnwritten()
	w.wrote()
	w.ack(1000)
	if got := writeAll(w); w.len() != 3 || !slices.Equal(got, []uint32{1, 2, 3}) {
		t.Fatal(w.len(), got)
	}
	w = windowOf(3)
	w.stored = ^uint32(0)
	writeAll(w)
	w.ack(1) // 2^32 - 1 + 2
	if w.len() != 1 {
		t.Fatal(w.len())
	}
}

func TestWindowKeepsCopies(t *testing.T) {
	w := &window{}
	payload, md := []byte("abc"), AppendMetadata(nil, map[string]string{MetaTID: "t"})
	w.keep(Data{Tag: 1, RawMetadata: md, Payload: payload})
	payload[0], md[1] = 'x', 'x'
	d, _ := w.peekUnwritten()
	if string(d.Payload) != "abc" || d.RawMetadata[1] == 'x' {
		t.Fatalf("%q %x", d.Payload, d.RawMetadata)
	}
}
