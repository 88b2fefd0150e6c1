package interop_test

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
)

// The documented keys of each yomo-peer report (README.md). The benchmark lab reads them.
var reportKeys = map[string][]string{
	"source": {"sent", "errors", "seconds", "msg_per_s"},
	"sfn":    {"received", "relayed", "errors"},
	"sink": {"received", "unique", "missing", "duplicates", "bad_payloads", "tid_ok", "source_id_ok",
		"distinct_tids", "source_ids", "tags", "p50_us", "p99_us", "p999_us", "max_us", "seconds", "msg_per_s"},
}

// yomo-peer's four commands in one pipeline (source -> sfn relay -> sink) through YoMo's
// zipper run by `yomo-peer zipper` and through y3: the lab's setups, with their JSON.
func TestPeerCommand(t *testing.T) {
	bin := buildPeer(t)
	const token = "lab-token"
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const n = 300
		var addr string
		var zipper *harness.Process
		if kind == harness.YoMo {
			zipper = harness.StartProcess(t, nil, nil, bin, "zipper", "--addr", "127.0.0.1:0", "--token", token, "--reject-reserved")
			var ready struct{ Listening string }
			readyLine(t, zipper, `{"listening"`, &ready)
			addr = ready.Listening
		} else {
			addr = harness.Start(t, kind, harness.Options{Token: token}).Addr()
		}
		common := []string{"--addr", addr, "--token", token}
		count := strconv.Itoa(n)

		sink := harness.StartProcess(t, nil, nil, bin, append([]string{"sink", "--observe", "0x34", "--count", count, "--timeout-s", "20"}, common...)...)
		readyLine(t, sink, `{"connected"`, nil)
		sfn := harness.StartProcess(t, nil, nil, bin, append([]string{"sfn", "--observe", "0x33", "--emit", "0x34", "--exit-after", count}, common...)...)
		readyLine(t, sfn, `{"connected"`, nil)
		src := harness.StartProcess(t, nil, nil, bin, append([]string{"source", "--tag", "0x33", "--count", count, "--size", "64", "--rate", "3000"}, common...)...)

		srcRep, code := finalReport(t, src, "source", 20*time.Second)
		if code != 0 || srcRep["sent"] != float64(n) || srcRep["errors"] != float64(0) {
			t.Errorf("source: exit %d, %v", code, srcRep)
		}
		sinkRep, code := finalReport(t, sink, "sink", 25*time.Second)
		if code != 0 || sinkRep["received"] != float64(n) || sinkRep["missing"] != float64(0) ||
			sinkRep["duplicates"] != float64(0) || sinkRep["tid_ok"] != true || sinkRep["source_id_ok"] != true {
			t.Errorf("sink: exit %d, %v", code, sinkRep)
		}
		sfnRep, code := finalReport(t, sfn, "sfn", 10*time.Second)
		if code != 0 || sfnRep["relayed"] != float64(n) {
			t.Errorf("sfn: exit %d, %v", code, sfnRep)
		}

		bad := harness.StartProcess(t, nil, nil, bin, "source", "--addr", addr, "--token", "wrong", "--count", "1")
		badRep, code := finalReport(t, bad, "", 15*time.Second)
		if msg, _ := badRep["error"].(string); code != 1 || msg == "" {
			t.Errorf("source with a wrong token: want exit 1 and an error, got exit %d, %v", code, badRep)
		} else {
			t.Logf("wrong token: %s", msg)
		}

		if zipper != nil {
			if err := zipper.Stop(); err != nil {
				t.Errorf("yomo-peer zipper after SIGTERM: %v, want exit 0", err)
			}
		}
	})
}

// readyLine waits for the line starting with prefix and decodes it into v (if not nil).
func readyLine(t *testing.T, p *harness.Process, prefix string, v any) {
	t.Helper()
	line, err := p.WaitLine(prefix, harness.ReadyTimeout)
	if err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, p.Stderr())
	}
	if v != nil {
		if err := json.Unmarshal([]byte(line), v); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
	}
}

// finalReport reads p's stdout to the end, waits for it to exit, and returns its last line
// decoded and its exit status. With kind set, the report must have every documented key.
func finalReport(t *testing.T, p *harness.Process, kind string, timeout time.Duration) (map[string]any, int) {
	t.Helper()
	deadline := time.After(timeout)
	var last string
read:
	for {
		select {
		case line, ok := <-p.Lines():
			if !ok {
				break read
			}
			last = line
		case <-deadline:
			p.Stop()
			t.Fatalf("%s: no end of output within %s\nstderr:\n%s", kind, timeout, p.Stderr())
		}
	}
	code := exitCode(p.Wait(5 * time.Second))
	var rep map[string]any
	if err := json.Unmarshal([]byte(last), &rep); err != nil {
		t.Fatalf("%s: last line %q is not JSON: %v\nstderr:\n%s", kind, last, err, p.Stderr())
	}
	var missing []string
	for _, key := range reportKeys[kind] {
		if _, ok := rep[key]; !ok {
			missing = append(missing, key)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s report %s lacks keys %s", kind, last, strings.Join(missing, ", "))
	}
	return rep, code
}

// exitCode is the exit status in a Process.Wait error (0 for nil, -1 if not an exit).
func exitCode(err error) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	default:
		return -1
	}
}

// `yomo-peer zipper --mesh`: zipper A reports its link to zipper B once it has connected,
// and from then on a source on A reaches a sink on B (the lab's `net federation` setup).
func TestPeerZipperMeshConnected(t *testing.T) {
	bin := buildPeer(t)
	const n = 200
	b := harness.StartProcess(t, nil, nil, bin, "zipper", "--addr", "127.0.0.1:0", "--name", "zipper-b")
	var readyB struct{ Listening string }
	readyLine(t, b, `{"listening"`, &readyB)
	a := harness.StartProcess(t, nil, nil, bin, "zipper", "--addr", "127.0.0.1:0", "--name", "zipper-a",
		"--mesh", "zipper-b="+readyB.Listening)
	var readyA struct{ Listening string }
	readyLine(t, a, `{"listening"`, &readyA)
	var mesh struct {
		MeshConnected string `json:"mesh_connected"`
	}
	readyLine(t, a, `{"mesh_connected"`, &mesh)
	if mesh.MeshConnected != "zipper-b" {
		t.Fatalf("mesh_connected %q, want zipper-b", mesh.MeshConnected)
	}
	count := strconv.Itoa(n)
	sink := harness.StartProcess(t, nil, nil, bin, "sink", "--addr", readyB.Listening, "--observe", "0x33", "--count", count, "--timeout-s", "20")
	readyLine(t, sink, `{"connected"`, nil)
	src := harness.StartProcess(t, nil, nil, bin, "source", "--addr", readyA.Listening, "--tag", "0x33", "--count", count, "--size", "64", "--rate", "2000", "--linger", "2s")
	sinkRep, code := finalReport(t, sink, "sink", 25*time.Second)
	if code != 0 || sinkRep["unique"] != float64(n) || sinkRep["duplicates"] != float64(0) {
		t.Errorf("sink on B: exit %d, %v", code, sinkRep)
	}
	if _, code := finalReport(t, src, "source", 20*time.Second); code != 0 {
		t.Errorf("source on A: exit %d", code)
	}
}
