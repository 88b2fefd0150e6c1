// Package quicdial connects y3 clients over QUIC (quic-go) to a y3 router or to a YoMo
// zipper, as YoMo's own clients do: one bidirectional stream per connection (stream 0),
// opened by the client, which writes its handshake on it at once, carrying the same frames
// as TCP. TLS 1.3 always, ALPN "yomo"; a keep-alive PING every 2 s.
//
//	tlsConf, _ := client.TLSConfigFromPEMFile(certPath) // the path `y3 serve` printed
//	opts := client.Options{Name: "sensor", Dialer: quicdial.New(tlsConf)}
//	src, err := client.ConnectSource(ctx, "127.0.0.1:9000", opts)
//
//	// A stock YoMo zipper: its self-signed certificate cannot be verified.
//	opts = client.Options{Name: "sensor", Credential: "token:secret", Dialer: quicdial.Insecure()}
//
// The router ends connections with CONNECTION_CLOSE: application code 0x13 (YoMo's) for a
// refusal that must not be retried, 0x01 for one that may be, the reason starting with the
// stable kind ("unauthorized: ..."). Reads report such a close as the *client.Error that
// client.CloseError makes of it.
//
// It is a separate package so that programs using TCP and TLS only do not link quic-go.
package quicdial

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/y3-dev/y3/bindings/go/client"
)

// KeepAlive is the keep-alive period of client connections: the router's idle timeout is
// 10 s and a YoMo zipper's 5 s, and the protocol has no ping frame.
const KeepAlive = 2 * time.Second

// Dialer dials QUIC. Build it with New.
type Dialer struct {
	tls  *tls.Config
	conf *quic.Config
}

// Insecure returns a QUIC dialer that accepts any certificate
// (client.InsecureTLSConfig): what a stock YoMo zipper needs, as its self-signed
// certificate cannot be verified. Development only otherwise.
func Insecure() *Dialer { return New(client.InsecureTLSConfig()) }

// New returns a QUIC dialer trusting what tlsConf trusts (client.TLSConfigFromPEM,
// client.PinnedTLSConfig, client.InsecureTLSConfig; nil: the system roots). ALPN and
// TLS 1.3 are filled in.
func New(tlsConf *tls.Config) *Dialer {
	return &Dialer{
		tls: client.ClientTLSConfig(tlsConf),
		conf: &quic.Config{
			KeepAlivePeriod:       KeepAlive,
			MaxIncomingStreams:    -1, // routers and zippers open no streams
			MaxIncomingUniStreams: -1,
		},
	}
}

// WithConfig replaces the quic-go configuration (keep-alive, idle timeout, ...).
func (d *Dialer) WithConfig(conf *quic.Config) *Dialer {
	return &Dialer{tls: d.tls, conf: conf}
}

// DialStream implements client.Dialer: it completes the QUIC handshake and opens the
// stream.
//
// Errors: tls when the handshake fails on the certificate or ALPN, quic_connect otherwise
// (for instance, no router answers before ctx's deadline).
func (d *Dialer) DialStream(ctx context.Context, addr string) (client.Stream, error) {
	conn, err := quic.DialAddr(ctx, addr, d.tls.Clone(), d.conf.Clone())
	if err != nil {
		return nil, dialError(ctx, err)
	}
	st, err := conn.OpenStreamSync(ctx)
	if err != nil {
		_ = conn.CloseWithError(client.YoMoCloseCode, closeReason)
		return nil, dialError(ctx, err)
	}
	return &stream{conn: conn, st: st}, nil
}

func dialError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var te *quic.TransportError
	if errors.As(err, &te) && te.ErrorCode.IsCryptoError() {
		return &client.Error{Kind: client.KindTLS, Err: err}
	}
	var idle *quic.IdleTimeoutError
	var hs *quic.HandshakeTimeoutError
	if errors.As(err, &idle) || errors.As(err, &hs) {
		// Nobody answered: retryable, as a refused TCP connection is.
		return &client.Error{Kind: client.KindQUICConnection, Err: err}
	}
	return &client.Error{Kind: client.KindQUICConnect, Err: err}
}

// stream is one bidirectional QUIC stream as a client.Stream.
type stream struct {
	conn *quic.Conn
	st   *quic.Stream
}

func (s *stream) Read(p []byte) (int, error) {
	n, err := s.st.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = readError(err)
	}
	return n, err
}

// readError maps a failed read: the peer's CONNECTION_CLOSE is the refusal its code and
// reason name (client.CloseError); a close of our own is the end of the stream.
func readError(err error) error {
	var ae *quic.ApplicationError
	if errors.As(err, &ae) {
		if !ae.Remote {
			return io.EOF
		}
		return client.CloseError(uint64(ae.ErrorCode), ae.ErrorMessage, err)
	}
	var se *quic.StreamError
	if errors.As(err, &se) || isDeadline(err) {
		return err
	}
	return &client.Error{Kind: client.KindQUICConnection, Err: err}
}

func isDeadline(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

func (s *stream) Write(p []byte) (int, error) { return s.st.Write(p) }

// CloseWrite sends FIN on the stream.
func (s *stream) CloseWrite() error { return s.st.Close() }

// closeReason is the reason a client closes its connection with, after YoMo's clients'
// "Source: shutdown".
const closeReason = "y3 client: shutdown"

// Close closes the connection at once, with YoMo's code 0x13.
func (s *stream) Close() error {
	s.st.CancelRead(0)
	return s.conn.CloseWithError(client.YoMoCloseCode, closeReason)
}

func (s *stream) SetReadDeadline(t time.Time) error { return s.st.SetReadDeadline(t) }
