package quicdial_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/y3-dev/y3/bindings/go/client"
	"github.com/y3-dev/y3/bindings/go/client/quicdial"
)

func selfSigned(t *testing.T) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// fakeQUICRouter accepts one stream per connection, answers the handshake and counts the
// data frames until the client's FIN, then closes the connection. A handshake whose auth
// payload is not "secret" is refused as a y3 router refuses it over QUIC: a rejected frame
// with the code, then CONNECTION_CLOSE 0x13 "unauthorized: ..."; with the payload
// "close-only", the close alone.
func fakeQUICRouter(t *testing.T, cert tls.Certificate) (string, *atomic.Int64) {
	ln, err := quic.ListenAddr("127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{client.ALPN},
		MinVersion:   tls.VersionTLS13,
	}, &quic.Config{MaxIdleTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var frames atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			go func() {
				st, err := conn.AcceptStream(context.Background())
				if err != nil {
					return
				}
				r := client.NewFrameReader(st, 0)
				f, err := r.Next()
				h, ok := f.(client.Handshake)
				if err != nil || !ok || h.ClientType != client.ClientSource || h.Version != client.Version {
					_ = conn.CloseWithError(client.YoMoCloseCode, "bad_handshake: not a source")
					return
				}
				switch h.AuthPayload {
				case "secret":
				case "close-only":
					_ = conn.CloseWithError(client.YoMoCloseCode, "unauthorized: invalid token")
					return
				default:
					b, _ := client.EncodeFrame(client.Rejected{Message: "invalid token", Code: client.CodeUnauthorized}, 0)
					_, _ = st.Write(b)
					time.Sleep(50 * time.Millisecond)
					_ = conn.CloseWithError(client.YoMoCloseCode, "unauthorized: invalid token")
					return
				}
				b, _ := client.EncodeFrame(client.HandshakeAck{}, 0)
				if _, err := st.Write(b); err != nil {
					return
				}
				for {
					f, err := r.Next()
					if err != nil {
						if errors.Is(err, io.EOF) {
							_ = st.Close()
							time.Sleep(50 * time.Millisecond)
						}
						_ = conn.CloseWithError(0, "")
						return
					}
					if _, ok := f.(client.Data); ok {
						frames.Add(1)
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), &frames
}

func TestSourceOverQUIC(t *testing.T) {
	cert := selfSigned(t)
	addr, frames := fakeQUICRouter(t, cert)
	pinned, err := client.PinnedTLSConfig(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	src, err := client.ConnectSource(ctx, addr, client.Options{Token: "secret", Dialer: quicdial.New(pinned)})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	for i := range n {
		if _, err := src.Send(0x10, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Close ends the stream and waits for the router's end: every frame was read.
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if frames.Load() != n {
		t.Fatalf("%d of %d frames", frames.Load(), n)
	}
}

// A refusal over QUIC is typed whether the rejected frame or only the close arrives.
func TestQUICRejection(t *testing.T) {
	addr, _ := fakeQUICRouter(t, selfSigned(t))
	for _, payload := range []string{"guess", "close-only"} {
		start := time.Now()
		o := client.Options{Token: payload, Dialer: quicdial.Insecure(), Backoff: client.Backoff{Attempts: 5}}
		_, err := client.ConnectSource(context.Background(), addr, o)
		var e *client.Error
		if !errors.As(err, &e) || e.Kind != client.KindUnauthorized || e.Code != client.CodeUnauthorized || e.Retryable() {
			t.Fatalf("%s: %#v", payload, err)
		}
		if time.Since(start) > 2*time.Second {
			t.Fatalf("%s: retried", payload)
		}
	}
}

func TestQUICRefusals(t *testing.T) {
	addr, _ := fakeQUICRouter(t, selfSigned(t))
	other, err := client.PinnedTLSConfig(selfSigned(t).Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	o := client.Options{Dialer: quicdial.New(other), Backoff: client.Backoff{Attempts: 5}}
	_, err = client.ConnectSource(context.Background(), addr, o)
	if client.KindOf(err) != client.KindTLS {
		t.Fatalf("untrusted certificate: %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("retried")
	}
	// Nobody there: retried, then gave_up.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	empty := pc.LocalAddr().String()
	_ = pc.Close()
	o = client.Options{Dialer: quicdial.Insecure(), HandshakeTimeout: 300 * time.Millisecond,
		Backoff: client.Backoff{Initial: 10 * time.Millisecond, Attempts: 2}}
	_, err = client.ConnectSource(context.Background(), empty, o)
	if !errors.Is(err, client.ErrGaveUp) {
		t.Fatalf("no router: %v", err)
	}
	t.Logf("no router: %v", err)
}
