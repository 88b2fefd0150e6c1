// Package quicdial connects y3 clients to a router over QUIC (quic-go): one bidirectional
// stream per connection, opened by the client, which writes its handshake on it at once,
// carrying the same frames as TCP. TLS 1.3 always, ALPN "y3/1".
//
//	tlsConf, _ := client.TLSConfigFromPEMFile("/tmp/y3-dev-cert.pem")
//	opts := client.Options{Name: "sensor", Dialer: quicdial.New(tlsConf)}
//	src, err := client.ConnectSource(ctx, "127.0.0.1:9000", opts)
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

// KeepAlive is the keep-alive period of client connections (the router's idle timeout is
// quinn's 30 s default), as the Rust SDK's.
const KeepAlive = 10 * time.Second

// Dialer dials QUIC. Build it with New.
type Dialer struct {
	tls  *tls.Config
	conf *quic.Config
}

// New returns a QUIC dialer trusting what tlsConf trusts (client.TLSConfigFromPEM,
// client.PinnedTLSConfig, client.InsecureTLSConfig; nil: the system roots). ALPN and
// TLS 1.3 are filled in.
func New(tlsConf *tls.Config) *Dialer {
	return &Dialer{
		tls: client.ClientTLSConfig(tlsConf),
		conf: &quic.Config{
			KeepAlivePeriod:       KeepAlive,
			MaxIncomingStreams:    -1, // the router opens no streams
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
		_ = conn.CloseWithError(0, "")
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
		// The router closes its connection with code 0 once it is done: the end of the
		// stream, as a TCP FIN would be.
		var ae *quic.ApplicationError
		if errors.As(err, &ae) && ae.ErrorCode == 0 {
			return n, io.EOF
		}
		var se *quic.StreamError
		if !errors.As(err, &se) && !isDeadline(err) {
			err = &client.Error{Kind: client.KindQUICConnection, Err: err}
		}
	}
	return n, err
}

func isDeadline(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

func (s *stream) Write(p []byte) (int, error) { return s.st.Write(p) }

// CloseWrite sends FIN on the stream.
func (s *stream) CloseWrite() error { return s.st.Close() }

// Close closes the connection at once.
func (s *stream) Close() error {
	s.st.CancelRead(0)
	return s.conn.CloseWithError(0, "")
}

func (s *stream) SetReadDeadline(t time.Time) error { return s.st.SetReadDeadline(t) }
