// Command bench is the Go side of the y3 codec benchmark lab (`y3-lab codec`).
//
// It reads the data sets the lab wrote (-data), checks every implementation's value on
// every data set, times them with the lab's method (median of batches; wall clock and
// process CPU clock; one goroutine per core in parallel mode) and prints one JSON record
// per line on stdout: first {"go_version": ...}, then records and {"note": ...} lines.
//
// Implementations: the report's own method on github.com/yomorun/y3-codec-golang v1.7.3
// (go-y3-report), that library's full decode then find (go-y3-decode), a plain Go
// skip-scan (go-y3-scan), the report's encoding/json-into-a-map method (go-json-map),
// github.com/tidwall/gjson (go-gjson) and github.com/buger/jsonparser (go-jsonparser).
package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

type dataFile struct {
	Datasets []*dataset `json:"datasets"`
}

func emit(v interface{}) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
}

func note(format string, args ...interface{}) {
	emit(map[string]string{"note": fmt.Sprintf(format, args...)})
}

// load reads and prepares the data file.
func load(path string) ([]*dataset, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f dataFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, err
	}
	for _, ds := range f.Datasets {
		if err := ds.init(); err != nil {
			return nil, fmt.Errorf("%s %s: %w", ds.Case, ds.Order, err)
		}
	}
	return f.Datasets, nil
}

func (ds *dataset) init() error {
	var err error
	if ds.y3, err = hex.DecodeString(ds.Y3Hex); err != nil {
		return err
	}
	ds.json = []byte(ds.JSON)
	ds.name = fmt.Sprintf("k%d", ds.Key)
	ds.want, err = parseExpected(ds.ExpectedType, ds.Expected)
	return err
}

func main() {
	data := flag.String("data", "", "data file written by `y3-lab codec`")
	benchtime := flag.Duration("benchtime", 40*time.Millisecond, "length of one sample")
	warmup := flag.Duration("warmup", 100*time.Millisecond, "warm-up before the samples")
	samples := flag.Int("samples", 11, "samples per measurement (the median is reported)")
	threads := flag.Int("threads", runtime.NumCPU(), "goroutines in parallel mode")
	modes := flag.String("modes", "serial,parallel", "modes to run")
	only := flag.String("only", "", "comma-separated substrings of implementation names")
	flag.Parse()
	if *data == "" {
		fmt.Fprintln(os.Stderr, "usage: go run . -data FILE [flags]")
		os.Exit(2)
	}
	sets, err := load(*data)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	emit(map[string]string{"go_version": runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH})

	same := true
	for _, ds := range sets {
		if ds.Order != "ascending" {
			continue
		}
		ref, err := referencePacket(ds)
		if err != nil || !bytes.Equal(ref, ds.y3) {
			same = false
			note("%s: the lab's Y3 bytes differ from y3-codec-golang v1.7.3's encoder", ds.Case)
		}
	}
	if same {
		note("ascending Y3 packets are byte-identical to y3-codec-golang v1.7.3's encoder")
	}

	s := settings{warmup: *warmup, sample: *benchtime, samples: *samples, threads: *threads}
	var filters []string
	if *only != "" {
		filters = strings.Split(*only, ",")
	}
	for _, ds := range sets {
		for _, im := range impls {
			if !wanted(im.name, filters) {
				continue
			}
			size, factory := im.prepare(ds)
			for _, mode := range strings.Split(*modes, ",") {
				r, err := measure(factory, ds.want, mode, s)
				if err != nil {
					note("refused %s %s on %s %s: %v", im.name, mode, ds.Case, ds.Order, err)
					continue
				}
				r.Case, r.Order, r.Position, r.KeyPos = ds.Case, ds.Order, ds.Position, ds.KeyPos
				r.Impl, r.Format, r.Op, r.Bytes = im.name, im.format, im.op, size
				emit(r)
			}
		}
	}
}

func wanted(name string, filters []string) bool {
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if f != "" && strings.Contains(name, f) {
			return true
		}
	}
	return false
}
