package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// testSet builds an ascending data set the way the lab does, with the reference encoder.
func testSet(t *testing.T, count, key int) *dataset {
	t.Helper()
	ds := &dataset{Case: fmt.Sprintf("C%02d-K%02d", count, key), Order: "ascending", Count: count, Key: key}
	var js []string
	for k := 1; k <= count; k++ {
		ds.Keys = append(ds.Keys, k)
		text := textFor(k)
		if kindFor(k) == "string" {
			text = `"` + text + `"`
		}
		js = append(js, fmt.Sprintf(`"k%d":%s`, k, text))
	}
	ds.JSON = "{" + strings.Join(js, ",") + "}"
	ds.ExpectedType, ds.Expected = kindFor(key), textFor(key)
	ref, err := referencePacket(ds)
	if err != nil {
		t.Fatal(err)
	}
	ds.Y3Hex = fmt.Sprintf("%x", ref)
	if err := ds.init(); err != nil {
		t.Fatal(err)
	}
	return ds
}

func TestEveryImplementationExtractsTheValue(t *testing.T) {
	for _, c := range [][2]int{{3, 2}, {16, 8}, {32, 16}, {63, 32}, {63, 1}, {63, 63}, {63, 5}, {63, 6}} {
		ds := testSet(t, c[0], c[1])
		for _, im := range impls {
			_, factory := im.prepare(ds)
			if got := factory()(); !ds.want.equal(got) {
				t.Errorf("%s on %s: got %v, want %v", im.name, ds.Case, got, ds.want)
			}
		}
	}
}

func TestReferenceBytesMatchTheLab(t *testing.T) {
	// The lab's C03-K02 packet (crates/y3-lab/src/data.rs, small_case_bytes).
	ds := testSet(t, 3, 2)
	want := []byte{0x80, 0x0b, 0x01, 0x01, 0x61, 0x02, 0x02, 0xff, 0x3f, 0x03, 0x02, 0x81, 0x00}
	if !bytes.Equal(ds.y3, want) {
		t.Fatalf("reference encoder wrote %x", ds.y3)
	}
}

func TestHarnessMeasures(t *testing.T) {
	ds := testSet(t, 16, 8)
	s := settings{sample: 200000, samples: 3, threads: 2}
	for _, mode := range []string{"serial", "parallel"} {
		r, err := measure(func() func() value { _, f := prepareScan(ds); return f() }, ds.want, mode, s)
		if err != nil || r.NsPerOp <= 0 {
			t.Fatalf("%s: %v %+v", mode, err, r)
		}
	}
}
