package client

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
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
	w.ack(Stored{Count: 2}, nil)
	w.ack(Stored{Count: 2}, nil) // the same count again moves nothing
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
	w.ack(Stored{Count: 3}, nil) // the new connection counts from 0
	if w.len() != 1 {
		t.Fatal(w.len())
	}
	w.ack(Stored{Count: 4}, nil)
	if w.len() != 0 {
		t.Fatal(w.len())
	}
}

func TestWindowForgetsNoMoreThanWrittenAndWraps(t *testing.T) {
	w := windowOf(4)
	w.peekUnwritten()
	w.wrote()
	w.ack(Stored{Count: 1000}, nil)
	if got := writeAll(w); w.len() != 3 || !slices.Equal(got, []uint32{1, 2, 3}) {
		t.Fatal(w.len(), got)
	}
	w = windowOf(3)
	w.stored = ^uint32(0)
	writeAll(w)
	w.ack(Stored{Count: 1}, nil) // 2^32 - 1 + 2
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

// Refused runs: the frames they cover leave the window, are recorded with their reason
// and tid, and are never written again; a run outside what the count covers is ignored.
func TestWindowRecordsRefusedFrames(t *testing.T) {
	var w window
	for i := range 6 {
		md := appendMetadataPairs(nil, MetaTID, fmt.Sprintf("t%d", i))
		w.keep(Data{Tag: uint32(i), RawMetadata: md, Payload: []byte("x")})
	}
	for range 6 {
		w.wrote()
	}
	w.ack(Stored{Count: 4, Refused: []RefusedRun{
		{First: 1, Frames: 1, Reason: RefusedTooLong},
		{First: 3, Frames: 5, Reason: RefusedHopLimit}, // only frame 3 is covered
		{First: 100, Frames: 1, Reason: RefusedLoop},
	}}, nil)
	want := []Refused{{Tag: 1, TID: "t1", Reason: RefusedTooLong}, {Tag: 3, TID: "t3", Reason: RefusedHopLimit}}
	if !reflect.DeepEqual(w.refused.kept, want) || w.refused.count != 2 || w.len() != 2 {
		t.Fatalf("%+v (count %d, len %d)", w.refused.kept, w.refused.count, w.len())
	}
	w.reconnected()
	if d, _ := w.peekUnwritten(); d.Tag != 4 {
		t.Fatalf("next %d, want 4", d.Tag)
	}
}

// Frames the router answered no_subscriber are kept, deferred, and written again once
// their backoff passed (doubling per retry), ahead of newer frames; a reconnect keeps them.
func TestWindowDefersFramesNobodyTook(t *testing.T) {
	w := windowOf(4)
	writeAll(w)
	t0 := time.Now()
	none := func(count, first, frames uint32) Stored {
		return Stored{Count: count, Refused: []RefusedRun{{First: first, Frames: frames, Reason: RefusedNoSubscriber}}}
	}
	w.ackAt(none(4, 1, 2), nil, t0)
	if w.len() != 2 || w.retried != 2 || w.refused.count != 0 {
		t.Fatalf("len %d retried %d refused %d", w.len(), w.retried, w.refused.count)
	}
	if !w.nextDue().Equal(t0.Add(RetryFirst)) {
		t.Fatal(w.nextDue())
	}
	w.promoteDue(t0)
	w.keep(Data{Tag: 9, Payload: []byte{1}})
	if got := writeAll(w); !slices.Equal(got, []uint32{9}) {
		t.Fatal("not due yet, newer frames go:", got)
	}
	w.promoteDue(t0.Add(RetryFirst))
	if got := writeAll(w); !slices.Equal(got, []uint32{1, 2}) {
		t.Fatal(got)
	}
	// Written on this connection: 0..4, then 9, 1, 2 as 4, 5, 6; frame 1 refused again.
	w.ackAt(none(7, 5, 1), nil, t0.Add(RetryFirst))
	if w.len() != 1 || !w.nextDue().Equal(t0.Add(3*RetryFirst)) {
		t.Fatalf("len %d due %v", w.len(), w.nextDue().Sub(t0))
	}
	w.reconnected()
	w.promoteDue(t0.Add(3 * RetryFirst))
	if got := writeAll(w); !slices.Equal(got, []uint32{1}) {
		t.Fatal(got)
	}
	w.ack(Stored{Count: 1}, nil)
	if w.len() != 0 {
		t.Fatal(w.len())
	}
}

// A frame the router answered not_stored (JetStream did not store it) is kept and retried
// as one nobody took; the reasons' names are the router's.
func TestWindowKeepsFramesNotStored(t *testing.T) {
	w := windowOf(4)
	writeAll(w)
	t0 := time.Now()
	w.ackAt(Stored{Count: 4, Refused: []RefusedRun{{First: 2, Frames: 1, Reason: RefusedNotStored}}}, nil, t0)
	if w.len() != 1 || w.retried != 1 || w.refused.count != 0 {
		t.Fatalf("len %d retried %d refused %d", w.len(), w.retried, w.refused.count)
	}
	if !RefusedNotStored.Retried() || RefusedTooLong.Retried() || RefusedNotStored.String() != "not_stored" {
		t.Fatal(RefusedNotStored.Retried(), RefusedTooLong.Retried(), RefusedNotStored.String())
	}
}
