package interop_test

import (
	"slices"
	"testing"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// connz is the part of y3's /connz this test reads.
type connz struct {
	Total       int `json:"total"`
	Connections []struct {
		Name      string   `json:"name"`
		Kind      string   `json:"kind"`
		Protocol  string   `json:"protocol"`
		Transport string   `json:"transport"`
		Remote    string   `json:"remote"`
		Observed  []string `json:"observed"`
		Published []string `json:"published"`
		FramesIn  int      `json:"frames_in"`
		FramesOut int      `json:"frames_out"`
		Drops     int      `json:"drops"`
	} `json:"connections"`
}

// tagRow is one tag of y3's /tagz, the part this test reads.
type tagRow struct {
	Tag         string                  `json:"tag"`
	FramesIn    int                     `json:"frames_in"`
	Publishers  []struct{ Name string } `json:"publishers"`
	Subscribers []struct{ Name string } `json:"subscribers"`
}

// YoMo's own source and sink carry 500 frames through the router. YoMo's zipper (the
// control) delivers them; y3 delivers them too, and its /connz lists both YoMo clients as
// what they are (a yomo source and a yomo sink over QUIC) with exactly the frames each sent
// or received, and its /tagz names them as the tag's publisher and subscriber.
func TestStatusListsYoMoClients(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const n = 500
		r := harness.Start(t, kind, harness.Options{})
		sk := sink(t, r, "status-sink", tagIn)
		src := harness.Source(t, harness.Client(r, "status-source", ""))
		writeBatch(t, src, tagIn, 0, n, 64, "")
		waitRange(t, bounded(t, 15*time.Second), sk, 0, n)
		settle()
		if rep := sk.Tracker.Report(0, n); rep.Received != n || rep.Duplicates != 0 {
			t.Fatalf("want %d frames once each, got %+v", n, rep)
		}
		st, ok := r.(harness.Status)
		if !ok {
			return // YoMo's zipper has no status endpoints: the delivery above is the control.
		}
		var c connz
		if err := st.Status("/connz?sort=name", &c); err != nil {
			t.Fatal(err)
		}
		if c.Total != 2 || len(c.Connections) != 2 {
			t.Fatalf("want 2 connections, got %+v", c)
		}
		snk, srcc := c.Connections[0], c.Connections[1]
		tag := peer.FormatTag(tagIn)
		if snk.Name != "status-sink" || snk.Kind != "sink" || snk.Protocol != "yomo" ||
			snk.Transport != "quic" || snk.FramesOut != n || snk.Drops != 0 ||
			!slices.Equal(snk.Observed, []string{tag}) || snk.Remote == "" {
			t.Errorf("sink as listed: %+v", snk)
		}
		if srcc.Name != "status-source" || srcc.Kind != "source" || srcc.Protocol != "yomo" ||
			srcc.FramesIn != n || !slices.Equal(srcc.Published, []string{tag}) {
			t.Errorf("source as listed: %+v", srcc)
		}
		var tz struct {
			Tags []tagRow `json:"tags"`
		}
		if err := st.Status("/tagz", &tz); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(tz.Tags, func(g tagRow) bool { return g.Tag == tag })
		if i < 0 || tz.Tags[i].FramesIn != n || len(tz.Tags[i].Publishers) != 1 ||
			tz.Tags[i].Publishers[0].Name != "status-source" ||
			len(tz.Tags[i].Subscribers) != 1 || tz.Tags[i].Subscribers[0].Name != "status-sink" {
			t.Errorf("tag %s as listed: %+v", tag, tz.Tags)
		}
	})
}
