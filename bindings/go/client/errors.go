package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	y3 "github.com/y3-dev/y3/bindings/go"
)

// Kind is the stable snake_case name of an error, the same string the Rust transport
// (crates/y3-transport) and the Python package report for the same failure. Messages are
// for humans and may change; kinds do not.
type Kind string

// Frame error kinds: bytes that are not frames. Malformed Y3 inside a frame keeps the
// codec's own kind ("child_overflow", "invalid_length", "wrong_type", ...; see y3.Kind).
const (
	// KindTooLong: a frame whose declared (or encoded) body exceeds the frame limit.
	// Fields: Declared, Limit. Reported from the header alone, before the body is buffered.
	KindTooLong Kind = "too_long"
	// KindUnknownFrame: a top-level packet that is not a known frame node. Field: Tag.
	KindUnknownFrame Kind = "unknown_frame"
	// KindInvalidField: a field holds a value outside its range (a client type that is not
	// one byte, observed tags that are not 4-byte groups). Fields: Frame, FieldName.
	KindInvalidField Kind = "invalid_field"
	// KindBadMetadata: a data frame's metadata is not a msgpack map of string to string.
	// Field: Offset (where in the metadata the problem is).
	KindBadMetadata Kind = "bad_metadata"
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
	// KindUnexpectedFrame: the router sent a frame that does not belong at this point (or
	// redirected the client with connect-to frames too many times). Fields: Expected, Found.
	KindUnexpectedFrame Kind = "unexpected_frame"
	// KindClosed: the connection closed where more frames were expected, or the client was
	// used after Close.
	KindClosed Kind = "closed"
	// KindTimeout: something did not happen in time. Field: What.
	KindTimeout Kind = "timeout"
	// KindGaveUp: connecting gave up after Backoff.Attempts (by default a client never
	// gives up). Fields: Addr, Attempts, Err (the last attempt's error).
	KindGaveUp Kind = "gave_up"
	// KindQUICConnect: a QUIC connection could not be started (see package quicdial).
	KindQUICConnect Kind = "quic_connect"
	// KindRefused: frames a durable client sent were refused by the router (handled,
	// delivered to no one: over its frame limit, past its hop limit, a loop), returned by
	// DurableSource.Close. Field: Frames (how many; Refusals lists them).
	KindRefused Kind = "refused"
	// KindQUICConnection: a QUIC connection failed (an idle timeout, a stateless reset; see
	// package quicdial). Retried.
	KindQUICConnection Kind = "quic_connection"
)

// Refusal kinds: the router refused the client or closed its connection, with a rejected
// or goaway frame whose y3 code names the reason, or with a QUIC close whose reason starts
// with the kind. Fields: Code, Reason (the router's words).
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
	KindReservedTag        Kind = "reserved_tag"
	KindForbidden          Kind = "forbidden"
	KindBadFilter          Kind = "bad_filter"
	// KindRejected: a rejected (or goaway) frame without a y3 code, as YoMo's own zipper
	// sends it (a wrong token, a version mismatch, ...: Reason says which), or a QUIC close
	// with YoMo's application code 0x13 (or 0 and no reason) whose reason names no kind.
	// Never retried.
	KindRejected Kind = "rejected"
	// KindOther: a code this package does not know.
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

	Code      Code   // refusal kinds (zero for rejected)
	Reason    string // refusal kinds: the router's message, may be empty
	Declared  uint64 // too_long
	Limit     uint64 // too_long
	Tag       uint32 // unknown_frame: the frame type (the tag byte's low six bits)
	Frame     string // invalid_field: the frame type's name
	FieldName string // invalid_field
	Offset    uint64 // bad_metadata: the offset in the metadata bytes
	Buffered  uint64 // truncated
	Expected  string // unexpected_frame
	Found     string // unexpected_frame
	What      string // timeout
	Attempts  int    // gave_up
	Addr      string // gave_up: the address tried
	Frames    uint64 // refused
	Err       error  // the cause: io and tls failures, codec errors, gave_up's last error
}

// Error implements error.
func (e *Error) Error() string {
	var msg string
	switch e.Kind {
	case KindTooLong:
		msg = fmt.Sprintf("frame of %d bytes exceeds limit %d", e.Declared, e.Limit)
	case KindUnknownFrame:
		msg = fmt.Sprintf("unknown frame type 0x%02x", e.Tag)
	case KindInvalidField:
		msg = fmt.Sprintf("invalid %s in %s frame", e.FieldName, e.Frame)
	case KindBadMetadata:
		msg = fmt.Sprintf("metadata is not a msgpack string map (at byte %d)", e.Offset)
	case KindTruncated:
		msg = fmt.Sprintf("stream ended inside a frame (%d bytes buffered)", e.Buffered)
	case KindUnexpectedFrame:
		msg = fmt.Sprintf("unexpected %s frame, expected %s", e.Found, e.Expected)
	case KindClosed:
		msg = "connection closed"
	case KindTimeout:
		msg = "timed out waiting for " + e.What
	case KindGaveUp:
		at := ""
		if e.Addr != "" {
			at = " at " + e.Addr
		}
		msg = fmt.Sprintf("cannot reach the router%s after %d attempts (is it running there, "+
			"on that port and transport? a client retries forever unless Backoff.Attempts is set)",
			at, e.Attempts)
	case KindConfig:
		msg = "invalid configuration"
	case KindRefused:
		msg = fmt.Sprintf("the router refused %d frames (delivered to no one)", e.Frames)
	default:
		if isRefusalKind(e.Kind) {
			msg = "refused: " + string(e.Kind)
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
// that is not trusted, a bad configuration, a rejection, a malformed answer). It follows
// the retry column of spec/frames.md's code table, and the Rust transport's
// TransportError::is_retryable. Every client of this package dials by it (dialWithBackoff:
// the first connection and every reconnection); an established connection that ends for
// any reason but a refusal is dialled again, as YoMo's clients do.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case KindNormal, KindShuttingDown, KindSlowConsumer, KindTooManyConnections, KindHandshakeTimeout:
		return true
	case KindIO, KindClosed, KindTimeout, KindQUICConnection:
		return true
	case KindTruncated:
		// The stream ended inside a frame: the router's process died (or its host went
		// away) partway through a write, its kernel sent what it had, then closed. A lost
		// connection like any other; a malformed frame (a bug that would repeat) is not.
		return true
	}
	return false
}

// Sentinels, one per Kind, for errors.Is. They carry no fields; never returned as such.
var (
	ErrTooLong            = &Error{Kind: KindTooLong}
	ErrUnknownFrame       = &Error{Kind: KindUnknownFrame}
	ErrInvalidField       = &Error{Kind: KindInvalidField}
	ErrBadMetadata        = &Error{Kind: KindBadMetadata}
	ErrTruncated          = &Error{Kind: KindTruncated}
	ErrIO                 = &Error{Kind: KindIO}
	ErrTLS                = &Error{Kind: KindTLS}
	ErrConfig             = &Error{Kind: KindConfig}
	ErrUnexpectedFrame    = &Error{Kind: KindUnexpectedFrame}
	ErrClosed             = &Error{Kind: KindClosed}
	ErrTimeout            = &Error{Kind: KindTimeout}
	ErrGaveUp             = &Error{Kind: KindGaveUp}
	ErrQUICConnect        = &Error{Kind: KindQUICConnect}
	ErrQUICConnection     = &Error{Kind: KindQUICConnection}
	ErrNormal             = &Error{Kind: KindNormal}
	ErrShuttingDown       = &Error{Kind: KindShuttingDown}
	ErrUnauthorized       = &Error{Kind: KindUnauthorized}
	ErrProtocolError      = &Error{Kind: KindProtocolError}
	ErrVersionMismatch    = &Error{Kind: KindVersionMismatch}
	ErrBadHandshake       = &Error{Kind: KindBadHandshake}
	ErrSlowConsumer       = &Error{Kind: KindSlowConsumer}
	ErrTooManyConnections = &Error{Kind: KindTooManyConnections}
	ErrHandshakeTimeout   = &Error{Kind: KindHandshakeTimeout}
	ErrReservedTag        = &Error{Kind: KindReservedTag}
	ErrForbidden          = &Error{Kind: KindForbidden}
	ErrBadFilter          = &Error{Kind: KindBadFilter}
	ErrRejected           = &Error{Kind: KindRejected}
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

func isRefusalKind(k Kind) bool {
	switch k {
	case KindNormal, KindShuttingDown, KindUnauthorized, KindProtocolError, KindVersionMismatch,
		KindBadHandshake, KindSlowConsumer, KindTooManyConnections, KindHandshakeTimeout,
		KindReservedTag, KindForbidden, KindBadFilter, KindRejected, KindOther:
		return true
	}
	return false
}

// refusalError is the error for a rejected or goaway frame: the code's kind, or rejected
// when the frame has no code (YoMo's zipper never sends one).
func refusalError(c Code, has bool, message string) *Error {
	if _, ok := code(c, has); !ok {
		return &Error{Kind: KindRejected, Reason: message}
	}
	return &Error{Kind: c.Kind(), Code: c, Reason: message}
}

func rejectedError(r Rejected) *Error { return refusalError(r.Code, r.HasCode, r.Message) }

func goawayError(g Goaway) *Error { return refusalError(g.Code, g.HasCode, g.Message) }

// YoMoCloseCode is the QUIC application error code YoMo closes connections with, and that
// a y3 router uses for closes that must not be retried (spec/frames.md, QUIC close codes).
const YoMoCloseCode = 0x13

// CloseError is the error for a QUIC CONNECTION_CLOSE the router sent with application
// code appCode and reason (package quicdial uses it), as the Rust transport reads one: the
// kind is the reason's prefix when it names a code ("unauthorized: invalid token" is
// unauthorized, code 2); otherwise, as YoMo's clients decide whether to come back, code
// 0x13 or code 0 without a reason is rejected (never retried), and any other close is
// normal (retried).
func CloseError(appCode uint64, reason string, cause error) *Error {
	k, _, _ := strings.Cut(reason, ":")
	if c, ok := codeOf(Kind(k)); ok {
		return &Error{Kind: c.Kind(), Code: c, Reason: reason, Err: cause}
	}
	if appCode == YoMoCloseCode || (appCode == 0 && reason == "") {
		return &Error{Kind: KindRejected, Reason: reason, Err: cause}
	}
	return &Error{Kind: KindNormal, Code: CodeNormal, Reason: reason, Err: cause}
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
