package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// tagValue is a flag holding one data tag, 0x33 or 51.
type tagValue uint32

func (v *tagValue) String() string { return peer.FormatTag(uint32(*v)) }

func (v *tagValue) Set(text string) error {
	tag, err := peer.ParseTag(text)
	*v = tagValue(tag)
	return err
}

// tagList is a repeatable tag flag.
type tagList []uint32

func (l *tagList) String() string {
	parts := make([]string, len(*l))
	for i, tag := range *l {
		parts[i] = peer.FormatTag(tag)
	}
	return strings.Join(parts, ",")
}

func (l *tagList) Set(text string) error {
	tag, err := peer.ParseTag(text)
	if err == nil {
		*l = append(*l, tag)
	}
	return err
}

// clientFlags registers the flags every client subcommand shares.
func clientFlags(fs *flag.FlagSet, cc *peer.ClientConfig, defaultName string) {
	fs.StringVar(&cc.Addr, "addr", "127.0.0.1:9000", "zipper address host:port (QUIC)")
	fs.StringVar(&cc.Name, "name", defaultName, "client name sent in the handshake")
	fs.StringVar(&cc.Token, "token", "", `credential "token:<T>" (empty: none)`)
	fs.BoolVar(&cc.Reconnect, "reconnect", false, "retry the first dial and reconnect after a lost connection (YoMo WithReConnect)")
	fs.DurationVar(&cc.ConnectTimeout, "connect-timeout", peer.DefaultConnectTimeout, "give up connecting after this long")
}

// parse parses args or exits with status 2.
func parse(fs *flag.FlagSet, args []string) {
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		usageError(fs, fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
}

// usageError prints msg and the flags, then exits with status 2.
func usageError(fs *flag.FlagSet, msg string) {
	fmt.Fprintf(os.Stderr, "yomo-peer %s: %s\n", fs.Name(), msg)
	fs.PrintDefaults()
	os.Exit(2)
}

// seconds is a duration given in (fractional) seconds.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
