// Command yomo-peer runs YoMo v1.22.0's own zipper, source and stream functions, for y3's
// benchmark lab and interoperability tests.
//
//	yomo-peer zipper --addr 127.0.0.1:9000 [--token T] [--name N] [--mesh name=host:port,...] [--reject-reserved]
//	yomo-peer source --addr A --tag 0x33 --count N --size BYTES [--rate MSG_PER_S] [--token T] [--target T]
//	yomo-peer sfn    --addr A --observe 0x33 [--observe ...] --emit 0x34 [--wanted-target T] [--exit-after N]
//	yomo-peer sink   --addr A --observe 0x34 --count N [--timeout-s S] [--idle-s S] [--wanted-target T]
//
// Every stdout line is one JSON object; the last one is the summary (see README.md for the
// keys). YoMo's logs go to stderr at level error unless YOMO_LOG_LEVEL says otherwise.
// Exit status: 0 ok, 1 the run failed (its JSON has "error"), 2 bad usage.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/yomorun/yomo/core/ylog"

	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// stdout is the real standard output, kept for the JSON lines. os.Stdout is pointed at
// stderr because YoMo prints status lines ("[name] is waiting for request...") to it.
var stdout = os.Stdout

const usage = `usage: yomo-peer zipper|source|sfn|sink [flags]   (yomo-peer CMD -h for flags)`

func main() {
	os.Stdout = os.Stderr
	// YoMo reads its log settings once at package init; defaults of this tool: level error,
	// output stderr (see peer.Logger).
	ylog.SetDefault(peer.Logger())

	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	commands := map[string]func([]string) int{
		"zipper": runZipper,
		"source": runSource,
		"sfn":    runSFN,
		"sink":   runSink,
	}
	run, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown command %q\n%s\n", os.Args[1], usage)
		os.Exit(2)
	}
	os.Exit(run(os.Args[2:]))
}

// emit writes v as one JSON line on stdout.
func emit(v any) {
	line, err := json.Marshal(v)
	if err != nil {
		panic(err) // every value emitted is a plain struct or map
	}
	fmt.Fprintf(stdout, "%s\n", line)
}

// status is the exit status of a run whose report error is errText.
func status(errText string) int {
	if errText != "" {
		return 1
	}
	return 0
}
