package peer

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestParseTag(t *testing.T) {
	for text, want := range map[string]uint32{"0x33": 0x33, "0X33": 0x33, "51": 51, "0xF001": 0xF001, "4294967295": 0xFFFFFFFF} {
		if got, err := ParseTag(text); err != nil || got != want {
			t.Errorf("ParseTag(%q) = %#x, %v; want %#x", text, got, err, want)
		}
	}
	for _, bad := range []string{"", "0x", "x33", "0x1FFFFFFFF", "-1", "0x3g"} {
		if _, err := ParseTag(bad); err == nil {
			t.Errorf("ParseTag(%q) succeeded", bad)
		}
	}
	if got := FormatTag(0x34); got != "0x34" {
		t.Errorf("FormatTag = %q", got)
	}
}

func TestStamp(t *testing.T) {
	at := time.Unix(1_700_000_000, 123)
	p := Stamp(42, at, 64)
	if len(p) != 64 {
		t.Fatalf("len %d", len(p))
	}
	seq, sent, ok := Unstamp(p)
	if !ok || seq != 42 || sent != at.UnixNano() {
		t.Errorf("Unstamp = %d, %d, %v", seq, sent, ok)
	}
	if len(Stamp(1, at, 3)) != StampLen {
		t.Error("a payload smaller than the stamp is not grown to StampLen")
	}
	if _, _, ok := Unstamp(p[:StampLen-1]); ok {
		t.Error("a short payload unstamped")
	}
}

func TestTrackerReport(t *testing.T) {
	tr := NewTracker()
	base := time.Unix(1_700_000_000, 0)
	// seqs 0..99 once, seq 5 again, seq 200 (outside the expected range), one short payload.
	for i := 0; i < 100; i++ {
		tr.Observe(Frame{Tag: 0x34, Payload: Stamp(uint64(i), base, 32), TID: "t" + string(rune('a'+i%26)), SourceID: "src", At: base.Add(time.Duration(i+1) * time.Microsecond)})
	}
	tr.Observe(Frame{Tag: 0x34, Payload: Stamp(5, base, 32), TID: "x", SourceID: "src", At: base.Add(time.Millisecond)})
	tr.Observe(Frame{Tag: 0x35, Payload: Stamp(200, base, 32), SourceID: "other", At: base.Add(time.Millisecond)})
	tr.Observe(Frame{Tag: 0x35, Payload: []byte{1}, TID: "y", SourceID: "src", At: base.Add(time.Millisecond)})

	r := tr.Report(0, 110)
	if r.Received != 103 || r.Unique != 101 || r.Duplicates != 1 || r.Missing != 10 || r.BadPayloads != 1 {
		t.Errorf("counts: %+v", r)
	}
	if r.TidOK || !r.SourceIDOK || len(r.SourceIDs) != 2 || r.Tags["0x34"] != 101 || r.Tags["0x35"] != 2 {
		t.Errorf("metadata: %+v", r)
	}
	// Latencies: 1..100 µs, then 1000 µs twice: nearest rank.
	if r.P50us != 51 || r.P99us != 1000 || r.MaxUs != 1000 {
		t.Errorf("percentiles: p50 %v p99 %v max %v", r.P50us, r.P99us, r.MaxUs)
	}
	if tr.MaxSeq() != 200 || tr.Missing(0, 100) != 0 || tr.SeqCount(5) != 2 {
		t.Errorf("MaxSeq %d Missing %d SeqCount(5) %d", tr.MaxSeq(), tr.Missing(0, 100), tr.SeqCount(5))
	}
}

func TestTrackerWaitUniqueOrIdle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := time.Now()
	tr := NewTracker()
	// Nothing yet: not idle, the context decides.
	short, stop := context.WithTimeout(ctx, 30*time.Millisecond)
	defer stop()
	if err := tr.WaitUniqueOrIdle(short, 2, time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("before any frame: %v, want the context's deadline", err)
	}
	tr.Observe(Frame{Tag: 0x33, Payload: Stamp(0, now, 16), At: now})
	if err := tr.WaitUniqueOrIdle(ctx, 2, 20*time.Millisecond); !errors.Is(err, ErrIdle) {
		t.Errorf("one of two, then silence: %v, want ErrIdle", err)
	}
	tr.Observe(Frame{Tag: 0x33, Payload: Stamp(1, now, 16), At: time.Now()})
	if err := tr.WaitUniqueOrIdle(ctx, 2, time.Hour); err != nil {
		t.Errorf("both: %v", err)
	}
}

func TestParseMesh(t *testing.T) {
	peers, err := ParseMesh("b=127.0.0.1:9001, c=127.0.0.1:9002", "token:x")
	if err != nil || len(peers) != 2 || peers[1] != (MeshPeer{Name: "c", Addr: "127.0.0.1:9002", Credential: "token:x"}) {
		t.Errorf("ParseMesh = %+v, %v", peers, err)
	}
	if _, err := ParseMesh("127.0.0.1:9001", ""); err == nil {
		t.Error("a peer without a name was accepted")
	}
	if peers, err := ParseMesh("", ""); err != nil || len(peers) != 0 {
		t.Errorf("empty mesh: %v, %v", peers, err)
	}
}
