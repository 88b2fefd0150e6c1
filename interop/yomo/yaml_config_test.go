package interop_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	pkgconfig "github.com/yomorun/yomo/pkg/config"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// yomoConfigs holds YoMo's own zipper configs, copied unchanged (testdata/yomo-configs/README.md
// says from where): v1.19.7 is not a dependency of this module, so its module cache copy
// cannot be relied on.
const yomoConfigs = "../../testdata/yomo-configs"

// A running zipper of the cascade: where its clients dial, and its process.
type cascadeZipper struct {
	addr string // 127.0.0.1:PORT
	proc *harness.Process
}

// TestYoMoZipperYAML runs YoMo v1.19.7's example/4-cascading-zipper as its README does
// (`yomo serve -c zipper_1.yaml`, `yomo serve -c zipper_2.yaml`) with its two YAML files,
// unchanged but for the port numbers (free ports instead of 9001 and 9002), on y3 as
// `y3 serve -c zipper_N.yaml`, and, as the control, on YoMo's zipper as `yomo serve -c`
// runs it: YoMo's own pkg/config parses the file, and `yomo-peer zipper` (one process per
// zipper: YoMo keeps the token in a process-wide singleton) serves YoMo's zipper with its
// name, host:port, token and mesh, skipping the mesh entry that names the zipper itself,
// as yomo.NewZipper does. Every pairing of the two kinds runs.
//
// As in the example, a source on zipper-1 (token z1) reaches a function on zipper-2 (token
// z2) through zipper-1's mesh link (credential token:z2); and, since zipper_2.yaml lists
// zipper-1 too, a source on zipper-2 reaches a function on zipper-1. Exact counts, each
// frame once, and a local function on zipper-1 gets its own source's frames once too.
func TestYoMoZipperYAML(t *testing.T) {
	for _, pair := range []struct{ a, b harness.Kind }{
		{harness.YoMo, harness.YoMo},
		{harness.Y3, harness.Y3},
		{harness.YoMo, harness.Y3},
		{harness.Y3, harness.YoMo},
	} {
		t.Run(fmt.Sprintf("%s-to-%s", pair.a, pair.b), func(t *testing.T) {
			const n = 500
			dir := t.TempDir()
			p1, p2 := freePort(t), freePort(t)
			ports := map[string]string{"9001": p1, "9002": p2}
			file1 := rewritePorts(t, dir, "4-cascading-zipper/zipper_1.yaml", ports)
			file2 := rewritePorts(t, dir, "4-cascading-zipper/zipper_2.yaml", ports)
			z2 := serveYAML(t, pair.b, file2)
			z1 := serveYAML(t, pair.a, file1)

			cc := func(z cascadeZipper, name, token string) peer.ClientConfig {
				return peer.ClientConfig{Addr: z.addr, Name: name, Token: token}
			}
			onB := harness.Sink(t, peer.FunctionConfig{ClientConfig: cc(z2, "sfn-echo", "z2"), Observe: []uint32{tagIn}})
			onA := harness.Sink(t, peer.FunctionConfig{ClientConfig: cc(z1, "sfn-local", "z1"), Observe: []uint32{tagIn}})
			backOnA := harness.Sink(t, peer.FunctionConfig{ClientConfig: cc(z1, "sfn-back", "z1"), Observe: []uint32{tagOut}})
			srcA := harness.Source(t, cc(z1, "yomo-source", "z1"))
			srcB := harness.Source(t, cc(z2, "source-2", "z2"))

			// The mesh links dial in the background: probe each way until it carries frames.
			ctx := bounded(t, 30*time.Second)
			probeUntil(t, ctx, srcA, tagIn, onB)
			probeUntil(t, ctx, srcB, tagOut, backOnA)
			writeBatch(t, srcA, tagIn, 0, n, 64, "")
			writeBatch(t, srcB, tagOut, 0, n, 64, "")
			waitRange(t, ctx, onB, 0, n)
			waitRange(t, ctx, onA, 0, n)
			waitRange(t, ctx, backOnA, 0, n)
			settle()
			for name, sk := range map[string]*peer.Sink{"on zipper-2": onB, "local on zipper-1": onA, "back on zipper-1": backOnA} {
				rep := sk.Tracker.Report(0, n)
				if rep.Missing != 0 || rep.Duplicates != 0 || !rep.TidOK || !rep.SourceIDOK {
					t.Errorf("%s: %+v", name, rep)
				}
			}
			// A wrong token is refused where the file asks for one (z1 on zipper-1).
			if wrong, err := peer.ConnectSource(cc(z1, "wrong-token", "z2")); err == nil {
				wrong.Close()
				t.Errorf("zipper-1 (%s) admitted token z2", pair.a)
			}
		})
	}
}

// TestYoMoSampleConfig: YoMo v1.22.0's own sample zipper config (test/config.yaml) has an
// LLM and MCP `bridge:` and mesh entries spelling their credential `auth:`. YoMo's parser
// takes it (the control: the bridge starts, the `auth:` keys are ignored and those links
// dial without a credential); `y3 serve -c` refuses it, exit status 2, naming `bridge`, and
// does not listen.
func TestYoMoSampleConfig(t *testing.T) {
	file := filepath.Join(yomoConfigs, "v1.22.0/config.yaml")
	conf, err := pkgconfig.ParseConfigFile(file)
	if err != nil || conf.Name != "zipper-sgp" || conf.Bridge == nil {
		t.Fatalf("YoMo's own parser: %+v, %v", conf, err)
	}
	if cred := conf.Mesh["zipper-usa"].Credential; cred != "" {
		t.Fatalf("YoMo read zipper-usa's auth: as a credential: %q", cred)
	}
	bin := harness.Y3Bin(t)
	cmd := exec.Command(bin, "serve", "-c", file)
	cmd.Env = append(os.Environ(), "RUST_LOG=warn")
	out, err := runBounded(cmd, 20*time.Second)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("y3 serve -c %s: %v, want exit status 2\n%s", file, err, out)
	}
	want := "error: yaml_unsupported: YoMo zipper config " + file + ": bridge: YoMo's LLM and MCP bridges are not part of y3"
	if !strings.Contains(string(out), want) || strings.Contains(string(out), "listening") {
		t.Fatalf("y3 serve -c %s said:\n%s\nwant a line with %q", file, out, want)
	}
}

// runBounded runs cmd, killing it after d: its stdout and stderr together.
func runBounded(cmd *exec.Cmd, d time.Duration) ([]byte, error) {
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	timer := time.AfterFunc(d, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	return []byte(buf.String()), err
}

// freePort is a UDP port number that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	_, port, err := net.SplitHostPort(harness.FreeUDPAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// rewritePorts copies YoMo's config rel (under v1.19.7) into dir with every `port: OLD`
// replaced by `port: NEW` per ports, and nothing else changed.
func rewritePorts(t *testing.T, dir, rel string, ports map[string]string) string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(yomoConfigs, "v1.19.7", rel))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(text), "\n")
	replaced := 0
	for i, line := range lines {
		key, value, ok := strings.Cut(line, "port: ")
		if ok && strings.TrimSpace(key) == "" {
			if port, ok := ports[value]; ok {
				lines[i] = key + "port: " + port
				replaced++
			}
		}
	}
	if replaced != 3 { // its own port and the two mesh entries
		t.Fatalf("%s: %d ports replaced, want 3", rel, replaced)
	}
	file := filepath.Join(dir, filepath.Base(rel))
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// serveYAML serves the zipper config file as kind: `y3 serve -c FILE`, or YoMo's zipper
// with what YoMo's pkg/config reads from it.
func serveYAML(t *testing.T, kind harness.Kind, file string) cascadeZipper {
	t.Helper()
	conf, err := pkgconfig.ParseConfigFile(file)
	if err != nil {
		t.Fatalf("YoMo's parser refuses %s: %v", file, err)
	}
	dial := "127.0.0.1:" + strconv.Itoa(conf.Port)
	if kind == harness.Y3 {
		p, ready := harness.StartY3(t, t.TempDir(), nil, "serve", "-c", file)
		// QUIC on the file's host:port; no TCP and no metrics listener (YoMo has neither).
		want := map[string]string{"quic": fmt.Sprintf("%s:%d", conf.Host, conf.Port)}
		if !reflect.DeepEqual(ready.Listeners, want) {
			t.Fatalf("y3 serve -c %s: listeners %v, want %v", file, ready.Listeners, want)
		}
		return cascadeZipper{addr: dial, proc: p}
	}
	// yomo serve: token auth when auth has type and token; every mesh entry but itself.
	args := []string{"zipper", "--addr", fmt.Sprintf("%s:%d", conf.Host, conf.Port), "--name", conf.Name}
	if _, ok := conf.Auth["type"]; ok {
		args = append(args, "--token", conf.Auth["token"])
	}
	var mesh []string
	credential := ""
	for name, m := range conf.Mesh {
		if name == "" || name == conf.Name {
			continue
		}
		if credential != "" && m.Credential != credential {
			t.Fatalf("%s: yomo-peer takes one mesh credential", file)
		}
		credential = m.Credential
		mesh = append(mesh, fmt.Sprintf("%s=%s:%d", name, m.Host, m.Port))
	}
	args = append(args, "--mesh", strings.Join(mesh, ","), "--mesh-credential", credential)
	p := harness.StartProcess(t, nil, nil, buildPeer(t), args...)
	readyLine(t, p, `{"listening"`, nil)
	return cascadeZipper{addr: dial, proc: p}
}
