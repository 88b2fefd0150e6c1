package peer

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/yomorun/yomo"
	"github.com/yomorun/yomo/core/frame"
)

// Default time bounds around YoMo calls that can block.
const (
	// DefaultConnectTimeout bounds Connect: with reconnect on, YoMo retries forever.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultCloseTimeout bounds Close: after a remote close YoMo's Close never returns.
	DefaultCloseTimeout = 2 * time.Second
)

// ErrTimeout is returned when a YoMo call did not return within its bound.
var ErrTimeout = errors.New("timed out")

// ClientConfig says how a YoMo client reaches its zipper.
type ClientConfig struct {
	// Addr is the zipper's QUIC address, host:port.
	Addr string
	// Name is the client's app name, sent in the handshake.
	Name string
	// Token, when not empty, is sent as the credential "token:<Token>".
	Token string
	// Reconnect makes the client retry its first dial and reconnect after a lost
	// connection (YoMo's WithReConnect). YoMo never retries a rejected handshake.
	Reconnect bool
	// Logger is the client's logger; nil means [Logger].
	Logger *slog.Logger
	// ConnectTimeout bounds Connect; 0 means [DefaultConnectTimeout].
	ConnectTimeout time.Duration
	// CloseTimeout bounds Close; 0 means [DefaultCloseTimeout].
	CloseTimeout time.Duration
}

func (c ClientConfig) name(fallback string) string {
	if c.Name != "" {
		return c.Name
	}
	return fallback
}

func (c ClientConfig) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return Logger()
}

func (c ClientConfig) connectTimeout() time.Duration {
	if c.ConnectTimeout > 0 {
		return c.ConnectTimeout
	}
	return DefaultConnectTimeout
}

func (c ClientConfig) closeTimeout() time.Duration {
	if c.CloseTimeout > 0 {
		return c.CloseTimeout
	}
	return DefaultCloseTimeout
}

func (c ClientConfig) sourceOptions() []yomo.SourceOption {
	opts := []yomo.SourceOption{yomo.WithLogger(c.logger())}
	if c.Token != "" {
		opts = append(opts, yomo.WithCredential("token:"+c.Token))
	}
	if c.Reconnect {
		opts = append(opts, yomo.WithSourceReConnect())
	}
	return opts
}

func (c ClientConfig) sfnOptions() []yomo.SfnOption {
	opts := []yomo.SfnOption{yomo.WithSfnLogger(c.logger())}
	if c.Token != "" {
		opts = append(opts, yomo.WithSfnCredential("token:"+c.Token))
	}
	if c.Reconnect {
		opts = append(opts, yomo.WithSfnReConnect())
	}
	return opts
}

// within runs call and waits at most d for it; a call still running after d is left behind
// (its goroutine leaks) and ErrTimeout is returned.
func within(d time.Duration, what string, call func() error) error {
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return fmt.Errorf("%s: %w after %s", what, ErrTimeout, d)
	}
}

// connectWithin connects a YoMo client within the configured bound. On timeout it closes
// the client (which stops YoMo's retry loop) and reports the last error YoMo saw.
func connectWithin(cc ClientConfig, connect func() error, closeClient func() error, last *errorLog) error {
	err := within(cc.connectTimeout(), "connect to "+cc.Addr, connect)
	if errors.Is(err, ErrTimeout) {
		_ = within(cc.closeTimeout(), "close", closeClient)
		if seen := last.Last(); seen != nil {
			return fmt.Errorf("%w (last error: %v)", err, seen)
		}
	}
	return err
}

// errorLog records what YoMo reports through a client's error handler.
type errorLog struct {
	mu     sync.Mutex
	last   error
	closed error
}

// record is the client's error handler.
func (l *errorLog) record(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = err
	var closed *frame.ErrConnClosed
	if errors.As(err, &closed) && closed.Remote {
		l.closed = err
	}
}

// Last is the last error YoMo reported, or nil.
func (l *errorLog) Last() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// RemoteClose is the error with which the zipper closed the connection for good (QUIC
// application code 0x13, or code 0 with no reason), or nil. After it YoMo's client never
// reconnects and every Write fails.
func (l *errorLog) RemoteClose() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}
