package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"time"
)

// ALPN is the protocol id of YoMo's QUIC and of the router's TLS and QUIC listeners.
const ALPN = "yomo"

// Stream is a connected, ordered byte stream to a router: a TCP or TLS connection, or one
// QUIC stream (see package quicdial).
type Stream interface {
	io.Reader
	io.Writer
	// CloseWrite ends the sending direction (TCP shutdown, TLS close_notify, QUIC FIN)
	// while reading goes on.
	CloseWrite() error
	// Close releases the stream (and its connection) at once.
	Close() error
	// SetReadDeadline bounds reads, as net.Conn's.
	SetReadDeadline(t time.Time) error
}

// Dialer opens streams to a router. The default dials TCP, with TLS when Options.TLS is
// set; quicdial.New gives a QUIC one.
type Dialer interface {
	DialStream(ctx context.Context, addr string) (Stream, error)
}

// Backoff is the exponential backoff between connection attempts. Zero fields take the
// defaults (100 ms, 5 s, and attempts forever: a client outlives a router restart or
// outage of any length, retrying every Max at worst).
type Backoff struct {
	// Initial is the delay after the first failed attempt.
	Initial time.Duration
	// Max is the largest delay.
	Max time.Duration
	// Attempts per (re)connection before giving up with gave_up; 0 (the default, also
	// AttemptsForever) never gives up.
	Attempts int
}

// AttemptsForever is Backoff.Attempts that never gives up (the default).
const AttemptsForever = 0

func (b Backoff) norm() Backoff {
	if b.Initial <= 0 {
		b.Initial = 100 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 5 * time.Second
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.Attempts < 0 {
		b.Attempts = AttemptsForever
	}
	return b
}

// Delay is the delay after failed attempt number attempt (0-based): Initial * 2^attempt,
// capped at Max, minus up to a quarter of jitter so that clients restarted together do not
// reconnect in lockstep.
func (b Backoff) Delay(attempt int) time.Duration {
	b = b.norm()
	d := b.Initial
	for i := 0; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	return d - time.Duration(rand.Int64N(int64(d/4)+1))
}

// Options says how to reach and identify to a router. The zero value is plain TCP, no name,
// no credential and the defaults below.
type Options struct {
	// Name is the application's name (the handshake's name field): it appears in the
	// router's logs and metrics.
	Name string
	// Credential is YoMo's credential, "<auth name>:<payload>" (e.g. "token:SECRET"),
	// split at the first ':' into the handshake's auth name and payload; without a ':'
	// it is all payload, with an empty auth name (the router's default, token). It takes
	// precedence over Token.
	Credential string
	// Token is the shared secret the router may require: the credential "token:" + Token.
	Token string
	// WantedTarget is the yomo-target a stream function (or sink) accepts: frames written
	// with that target reach only the functions that want it (YoMo's SetWantedTarget).
	WantedTarget string
	// Filter, when set, is a content filter (spec/filters.md) the router evaluates on every
	// data frame of each observed tag of a stream function (or sink), delivering only the
	// frames whose payload matches, e.g. "0x10/0x11:f32 > 60". A router refuses one that
	// does not compile with KindBadFilter.
	Filter string
	// TLS, when set, makes the default dialer speak TLS 1.3 over TCP (y3 serve
	// --tcp-tls). See TLSConfigFromPEM, PinnedTLSConfig and InsecureTLSConfig. ALPN and
	// the minimum version are filled in.
	TLS *tls.Config
	// Dialer replaces the TCP/TLS dialer (e.g. quicdial.New(tlsConfig)).
	Dialer Dialer
	// MaxFrameLen is the largest frame body sent or accepted (default DefaultMaxFrameLen).
	MaxFrameLen int
	// HandshakeTimeout bounds dialing plus the handshake's answer (default 5 s).
	HandshakeTimeout time.Duration
	// Backoff between connection attempts.
	Backoff Backoff
	// SendQueue is the number of frames queued between the application and the writer
	// goroutine (default 1024). A full queue blocks senders: that is the backpressure.
	SendQueue int
	// Linger is how long a closing client waits for the router to take its last frames
	// and close (default 2 s).
	Linger time.Duration
	// OnGoaway, when set, is called (from the client's reader goroutine) for every goaway
	// frame the router sends on an established connection (only y3 routers send them, to
	// clients at extension level 1).
	OnGoaway func(Goaway)
	// Logger receives debug and warning records (nil: none).
	Logger *slog.Logger
}

func (o Options) norm() Options {
	if o.MaxFrameLen <= 0 {
		o.MaxFrameLen = DefaultMaxFrameLen
	}
	o.MaxFrameLen = frameLimit(o.MaxFrameLen)
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 5 * time.Second
	}
	o.Backoff = o.Backoff.norm()
	if o.SendQueue <= 0 {
		o.SendQueue = 1024
	}
	if o.Linger <= 0 {
		o.Linger = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(discardHandler{})
	}
	if o.Dialer == nil {
		o.Dialer = TCPDialer{TLS: o.TLS}
	}
	return o
}

// auth is the handshake's auth name and payload for these options.
func (o *Options) auth() (name, payload string) {
	if o.Credential != "" {
		if name, payload, ok := strings.Cut(o.Credential, ":"); ok {
			return name, payload
		}
		return "", o.Credential
	}
	if o.Token != "" {
		return "token", o.Token
	}
	return "", ""
}

// TCPDialer dials plain TCP, or TLS 1.3 over TCP when TLS is set. The socket keeps TCP
// keep-alive on (the protocol has no ping frame).
type TCPDialer struct {
	TLS *tls.Config
}

// DialStream implements Dialer.
func (d TCPDialer) DialStream(ctx context.Context, addr string) (Stream, error) {
	nd := &net.Dialer{KeepAlive: 15 * time.Second}
	if d.TLS == nil {
		c, err := nd.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return c.(*net.TCPConn), nil
	}
	td := &tls.Dialer{NetDialer: nd, Config: ClientTLSConfig(d.TLS)}
	c, err := td.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return c.(*tls.Conn), nil
}

// ClientTLSConfig returns a copy of c with what the router (and a YoMo zipper) requires:
// TLS 1.3 and the ALPN "yomo" (nil: a config that trusts the system roots).
func ClientTLSConfig(c *tls.Config) *tls.Config {
	if c == nil {
		c = &tls.Config{}
	}
	c = c.Clone()
	if c.MinVersion < tls.VersionTLS13 {
		c.MinVersion = tls.VersionTLS13
	}
	if len(c.NextProtos) == 0 {
		c.NextProtos = []string{ALPN}
	}
	return c
}

// TLSConfigFromPEM trusts the certificates in pemCerts as roots: a CA bundle, or the
// development certificate `y3 serve` writes (its names are localhost, 127.0.0.1 and ::1).
//
// Errors: config when pemCerts holds no certificate.
func TLSConfigFromPEM(pemCerts []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCerts) {
		return nil, &Error{Kind: KindConfig, Err: errors.New("no certificate in the PEM data")}
	}
	return ClientTLSConfig(&tls.Config{RootCAs: pool}), nil
}

// TLSConfigFromPEMFile is TLSConfigFromPEM on a file's contents.
func TLSConfigFromPEMFile(path string) (*tls.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Kind: KindConfig, Err: err}
	}
	return TLSConfigFromPEM(b)
}

// PinnedTLSConfig accepts exactly the given certificates (DER, or PEM blocks) as the
// router's end-entity certificate, whatever their names, issuers and dates: certificate
// pinning. Nothing else is trusted.
//
// Errors: config when no certificate is given or a PEM input holds none.
func PinnedTLSConfig(certs ...[]byte) (*tls.Config, error) {
	var pinned [][]byte
	for _, c := range certs {
		if bytes.Contains(c, []byte("-----BEGIN")) {
			rest := c
			for {
				var block *pem.Block
				block, rest = pem.Decode(rest)
				if block == nil {
					break
				}
				if block.Type == "CERTIFICATE" {
					pinned = append(pinned, block.Bytes)
				}
			}
			continue
		}
		pinned = append(pinned, c)
	}
	if len(pinned) == 0 {
		return nil, &Error{Kind: KindConfig, Err: errors.New("no certificate to pin")}
	}
	return ClientTLSConfig(&tls.Config{
		// The chain is checked below against the pins instead of the roots.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errors.New("y3 client: the router presented no certificate")
			}
			for _, p := range pinned {
				if bytes.Equal(raw[0], p) {
					return nil
				}
			}
			return x509.UnknownAuthorityError{}
		},
	}), nil
}

// InsecureTLSConfig accepts any certificate: the connection is encrypted but the router
// is not authenticated. Development only — and what a stock YoMo zipper needs: its
// self-signed certificate, made afresh at every start with no IP address in it, cannot be
// verified (YoMo's own clients skip verification by default).
func InsecureTLSConfig() *tls.Config {
	return ClientTLSConfig(&tls.Config{InsecureSkipVerify: true})
}

type discardHandler struct{}

func (discardHandler) Enabled(context.Context, slog.Level) bool  { return false }
func (discardHandler) Handle(context.Context, slog.Record) error { return nil }
func (d discardHandler) WithAttrs([]slog.Attr) slog.Handler      { return d }
func (d discardHandler) WithGroup(string) slog.Handler           { return d }
