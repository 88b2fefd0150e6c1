package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"

	y3 "github.com/y3-dev/y3/bindings/go"
)

// Kind is the stable snake_case name of an error, the same string the Rust transport
// (crates/y3-transport, FrameError::kind and TransportError::kind) reports for the same
// failure. Messages are for humans and may change; kinds do not.
type Kind string

// Frame error kinds: bytes that are not frames. Malformed Y3 inside a frame keeps the
// codec's own kind ("child_overflow", "invalid_utf8", "wrong_type", ...; see y3.Kind).
const (
	// KindTooLong: a frame whose declared (or encoded) body exceeds the frame limit.
	// Fields: Declared, Limit. Reported from the header alone, before the body is buffered.
	KindTooLong Kind = "too_long"
	// KindUnknownFrame: a top-level packet that is not a known frame node. Field: Tag.
	KindUnknownFrame Kind = "unknown_frame"
	// KindMissingField: a required field is absent. Fields: Frame, Field.
	KindMissingField Kind = "missing_field"
	// KindInvalidField: a field holds a value outside its range (an unknown role).
	// Fields: Frame, FieldName.
	KindInvalidField Kind = "invalid_field"
	// KindTruncated: the stream ended inside a frame. Field: Buffered.
	KindTruncated Kind = "truncated"
)

// Transport error kinds: connections that could not be made or kept.
const (
	// KindIO: a socket-level failure (connection refused, reset, ...). Err holds the cause.
	KindIO Kind = "io"
	// KindTLS: the TLS handshake failed (an untrusted certificate, a name mismatch, no
	// common protocol). Not retried: it would fail the same way.
	KindTLS Kind = "tls"
	// KindConfig: an option combination that cannot work.
	KindConfig Kind = "config"
	// KindUnexpectedFrame: the router sent a frame that does not belong at this point.
	// Fields: Expected, Found.
	KindUnexpectedFrame Kind = "unexpected_frame"
	// KindClosed: the connection closed where more frames were expected, or the client was
	// used after Close.
	KindClosed Kind = "closed"
	// KindTimeout: something did not happen in time. Field: What.
	KindTimeout Kind = "timeout"
	// KindGaveUp: reconnecting gave up after Backoff.Attempts. Fields: Attempts, Err (the
	// last attempt's error).
	KindGaveUp Kind = "gave_up"
	// KindQUICConnect: a QUIC connection could not be started (see package quicdial).
	KindQUICConnect Kind = "quic_connect"
	// KindQUICConnection: a QUIC connection failed or was closed (see package quicdial).
	KindQUICConnection Kind = "quic_connection"
)

// Goaway kinds: the router refused the client or closed its connection with a goaway
// frame. Field: Code (and Reason, the router's words).
const (
	KindNormal             Kind = "normal"
	KindShuttingDown       Kind = "shutting_down"
	KindUnauthorized       Kind = "unauthorized"
	KindProtocolError      Kind = "protocol_error"
	KindVersionMismatch    Kind = "version_mismatch"
	KindBadHandshake       Kind = "bad_handshake"
	KindSlowConsumer       Kind = "slow_consumer"
	KindTooManyConnections Kind = "too_many_connections"
	KindHandshakeTimeout   Kind = "handshake_timeout"
	// KindOther: a goaway code this package does not know.
	KindOther Kind = "other"
)

// Error is every error of this package that has a stable Kind. Only the fields documented
// for its Kind are set. Use errors.Is with the Err* sentinels to test for a kind, or
// errors.As to read the fields:
//
//	var e *client.Error
//	if errors.As(err, &e) && e.Kind == client.KindUnauthorized { log.Print(e.Reason) }
//
// A frame that is malformed Y3 is an *Error whose Kind is the codec's kind and whose Err is
// the *y3.Error, so errors.As(err, new(*y3.Error)) works as well.
type Error struct {
	Kind Kind

	Code      GoawayCode // goaway kinds
	Reason    string     // goaway kinds: the router's reason, may be empty
	Declared  uint64     // too_long
	Limit     uint64     // too_long
	Tag       uint32     // unknown_frame: the packet's key
	Frame     string     // missing_field, invalid_field: the frame type's name
	Field     uint32     // missing_field: the field key
	FieldName string     // invalid_field
	Buffered  uint64     // truncated
	Expected  string     // unexpected_frame
	Found     string     // unexpected_frame
	What      string     // timeout
	Attempts  int        // gave_up
	Err       error      // the cause: io and tls failures, codec errors, gave_up's last error
}

// Error implements error.
func (e *Error) Error() string {
	var msg string
	switch e.Kind {
	case KindTooLong:
		msg = fmt.Sprintf("frame of %d bytes exceeds limit %d", e.Declared, e.Limit)
	case KindUnknownFrame:
		msg = fmt.Sprintf("unknown frame type 0x%02x", e.Tag)
	case KindMissingField:
		msg = fmt.Sprintf("%s frame lacks field 0x%02x", e.Frame, e.Field)
	case KindInvalidField:
		msg = fmt.Sprintf("invalid %s in %s frame", e.FieldName, e.Frame)
	case KindTruncated:
		msg = fmt.Sprintf("stream ended inside a frame (%d bytes buffered)", e.Buffered)
	case KindUnexpectedFrame:
		msg = fmt.Sprintf("unexpected %s frame, expected %s", e.Found, e.Expected)
	case KindClosed:
		msg = "connection closed"
	case KindTimeout:
		msg = "timed out waiting for " + e.What
	case KindGaveUp:
		msg = fmt.Sprintf("gave up after %d connection attempts", e.Attempts)
	case KindConfig:
		msg = "invalid configuration"
	default:
		if isGoawayKind(e.Kind) {
			msg = "goaway: " + string(e.Kind)
			if e.Reason != "" {
				msg += " (" + e.Reason + ")"
			}
		} else {
			msg = string(e.Kind)
		}
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return "y3 client: " + msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error of the same Kind, so that
// errors.Is(err, client.ErrUnauthorized) holds whatever the reason.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind
}

// Retryable reports whether trying again later may succeed (a lost connection, a router
// shutting down) as opposed to a refusal that would repeat (a wrong token, a certificate
// that is not trusted, a bad configuration). It is the Rust SDK's is_retryable.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case KindShuttingDown, KindSlowConsumer, KindTooManyConnections, KindNormal:
		return true
	case KindIO, KindClosed, KindTimeout, KindQUICConnection:
		return true
	}
	return false
}

// Sentinels, one per Kind, for errors.Is. They carry no fields; never returned as such.
var (
	ErrTooLong            = &Error{Kind: KindTooLong}
	ErrUnknownFrame       = &Error{Kind: KindUnknownFrame}
	ErrMissingField       = &Error{Kind: KindMissingField}
	ErrInvalidField       = &Error{Kind: KindInvalidField}
	ErrTruncated          = &Error{Kind: KindTruncated}
	ErrIO                 = &Error{Kind: KindIO}
	ErrTLS                = &Error{Kind: KindTLS}
	ErrConfig             = &Error{Kind: KindConfig}
	ErrUnexpectedFrame    = &Error{Kind: KindUnexpectedFrame}
	ErrClosed             = &Error{Kind: KindClosed}
	ErrTimeout            = &Error{Kind: KindTimeout}
	ErrGaveUp             = &Error{Kind: KindGaveUp}
	ErrNormal             = &Error{Kind: KindNormal}
	ErrShuttingDown       = &Error{Kind: KindShuttingDown}
	ErrUnauthorized       = &Error{Kind: KindUnauthorized}
	ErrProtocolError      = &Error{Kind: KindProtocolError}
	ErrVersionMismatch    = &Error{Kind: KindVersionMismatch}
	ErrBadHandshake       = &Error{Kind: KindBadHandshake}
	ErrSlowConsumer       = &Error{Kind: KindSlowConsumer}
	ErrTooManyConnections = &Error{Kind: KindTooManyConnections}
	ErrHandshakeTimeout   = &Error{Kind: KindHandshakeTimeout}
)

// KindOf returns the Kind of err: the client kind of an *Error, the codec kind of a bare
// *y3.Error, else "".
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	if k := y3.KindOf(err); k != "" {
		return Kind(k)
	}
	return ""
}

// Retryable reports whether err is an *Error that may succeed when tried again.
func Retryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retryable()
}

func isGoawayKind(k Kind) bool {
	switch k {
	case KindNormal, KindShuttingDown, KindUnauthorized, KindProtocolError, KindVersionMismatch,
		KindBadHandshake, KindSlowConsumer, KindTooManyConnections, KindHandshakeTimeout, KindOther:
		return true
	}
	return false
}

// goawayError is the error for a goaway frame.
func goawayError(g Goaway) *Error {
	return &Error{Kind: g.Code.Kind(), Code: g.Code, Reason: g.Reason}
}

// codecError wraps a *y3.Error (or passes a client error through).
func codecError(err error) error {
	if err == nil {
		return nil
	}
	var ce *Error
	if errors.As(err, &ce) {
		return err
	}
	var ye *y3.Error
	if errors.As(err, &ye) {
		if ye.Kind == y3.KindTooLong && ye.Op == y3.OpDecode {
			return &Error{Kind: KindTooLong, Declared: uint64(ye.Declared), Limit: ye.Limit, Err: ye}
		}
		return &Error{Kind: Kind(ye.Kind), Err: ye}
	}
	return &Error{Kind: KindIO, Err: err}
}

// ioError classifies a transport failure: TLS failures are tls (not retried), the rest io
// (or timeout). Context errors are returned as they are; client errors pass through.
func ioError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ce *Error
	if errors.As(err, &ce) {
		return err
	}
	if isTLSError(err) {
		return &Error{Kind: KindTLS, Err: err}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{Kind: KindClosed, Err: err}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &Error{Kind: KindTimeout, What: "the network", Err: err}
	}
	return &Error{Kind: KindIO, Err: err}
}

func isTLSError(err error) bool {
	var (
		cv  *tls.CertificateVerificationError
		ua  x509.UnknownAuthorityError
		he  x509.HostnameError
		ci  x509.CertificateInvalidError
		al  tls.AlertError
		rh  tls.RecordHeaderError
		ech *tls.ECHRejectionError
	)
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &he) ||
		errors.As(err, &ci) || errors.As(err, &al) || errors.As(err, &rh) || errors.As(err, &ech)
}
