package interop_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/yomorun/yomo/core"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// testCA issues certificates for the mutual-TLS test with Go's crypto/x509.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // PEM of cert
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func writePEM(t *testing.T, file, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

var serial int64 = 1

// newCA makes a CA named name, written to dir/file.pem.
func newCA(t *testing.T, dir, name, file string) *testCA {
	t.Helper()
	key := newKey(t)
	serial++
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, file+".pem")
	writePEM(t, path, "CERTIFICATE", der)
	return &testCA{cert: cert, key: key, file: path}
}

// issue writes a certificate for usages (and, for a server, 127.0.0.1 and localhost) and
// its key; it returns the two files.
func (ca *testCA) issue(t *testing.T, dir, name string, usages ...x509.ExtKeyUsage) (string, string) {
	t.Helper()
	key := newKey(t)
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
	}
	if usages[0] == x509.ExtKeyUsageServerAuth {
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	writePEM(t, cert, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
	return cert, keyFile
}

// YoMo's mutual-TLS mode (issue 25): the router is configured only by YoMo's own
// environment variables — YOMO_TLS_VERIFY_PEER=true, YOMO_TLS_CACERT_FILE, and
// YOMO_TLS_CERT_FILE/YOMO_TLS_KEY_FILE for its certificate — and so are YoMo's clients.
// A client presenting a certificate issued by the CA is served; one without a certificate,
// or with one from another CA, is refused and never admitted. y3 serve also needs
// --tcp-tls: its plain TCP listener would otherwise be a door without client certificates
// (it refuses to start).
func TestMutualTLS(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		dir := t.TempDir()
		// One certificate per node, for serving and for client authentication alike, as a
		// YoMo deployment sharing these variables between its zipper and clients has.
		ca := newCA(t, dir, "y3 interop CA", "ca")
		nodeCert, nodeKey := ca.issue(t, dir, "node", x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
		// Another CA of the same name: Go's clients present only a certificate whose issuer
		// the router names as acceptable, so the stranger's certificate is offered, and
		// its signature does not verify.
		other := newCA(t, dir, "y3 interop CA", "other-ca")
		strangerCert, strangerKey := other.issue(t, dir, "stranger", x509.ExtKeyUsageClientAuth)

		// The router's environment, as a YoMo zipper's would be (y3 inherits it; YoMo's
		// zipper, in this process, reads it when it starts listening, and YoMo's clients
		// when they are created).
		t.Setenv("YOMO_TLS_VERIFY_PEER", "true")
		t.Setenv("YOMO_TLS_CACERT_FILE", ca.file)
		t.Setenv("YOMO_TLS_CERT_FILE", nodeCert)
		t.Setenv("YOMO_TLS_KEY_FILE", nodeKey)
		r := harness.Start(t, kind, harness.Options{TCPTLS: true})
		accepted := func() int {
			if c, ok := r.(harness.ConnCounter); ok {
				n, err := c.AcceptedConnections()
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			return -1
		}

		// With the CA-issued certificate, a YoMo client verifies the router against the CA
		// and is served.
		sk := harness.Sink(t, peer.FunctionConfig{ClientConfig: harness.Client(r, "sfn", ""), Observe: []uint32{tagIn}})
		src := harness.Source(t, harness.Client(r, "source", ""))
		const frames = 200
		writeBatch(t, src, tagIn, 0, frames, 64, "")
		waitRange(t, bounded(t, 10*time.Second), sk, 0, frames)
		settle()
		if got := sk.Tracker.Received(); got != frames {
			t.Errorf("stream function received %d frames, want exactly %d", got, frames)
		}
		admitted := accepted()

		refused := func(what string) {
			t.Helper()
			cc := harness.Client(r, what, "")
			cc.ConnectTimeout = 8 * time.Second
			s, err := peer.ConnectSource(cc)
			if err == nil {
				_ = s.Close()
				t.Errorf("%s: connected; want a refusal", what)
				return
			}
			var rej *core.ErrRejected
			if errors.As(err, &rej) {
				t.Errorf("%s: refused by a handshake frame (%q), want the TLS layer", what, rej.Message)
			}
			t.Logf("%s: refused: %v", what, err)
		}
		// Without a certificate.
		t.Setenv("YOMO_TLS_CERT_FILE", "")
		t.Setenv("YOMO_TLS_KEY_FILE", "")
		refused("no certificate")
		// With a certificate another CA issued.
		t.Setenv("YOMO_TLS_CERT_FILE", strangerCert)
		t.Setenv("YOMO_TLS_KEY_FILE", strangerKey)
		refused("foreign CA")

		// Neither was admitted, and the certified clients are still served.
		if n := accepted(); n != admitted {
			t.Errorf("%d connections admitted after the refusals, %d before", n, admitted)
		}
		writeBatch(t, src, tagIn, frames, frames, 64, "")
		waitRange(t, bounded(t, 10*time.Second), sk, frames, frames)
		if y3, ok := r.(interface{ Metric(string) (int, error) }); ok {
			for _, reason := range []string{"no_client_certificate", "bad_client_certificate"} {
				n, err := y3.Metric(`y3_router_rejected_total{reason="` + reason + `"}`)
				if err != nil || n != 1 {
					t.Errorf("y3 counted %d %s (%v), want 1", n, reason, err)
				}
			}
		}
	})
}
