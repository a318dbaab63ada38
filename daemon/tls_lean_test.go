package daemon

import (
	"bufio"
	"crypto/tls"
	"net"
	"testing"

	"github.com/fenceworks/fence/api/leanwire"
	"github.com/fenceworks/fence/client"
)

// TestTLSLeanSessionPort: the lean session port serves the client port's
// TLS (crypto/tls over the listener, the same certificate and client-CA
// rule): a client with a certificate of the trusted CA keeps its session
// over it; a connection with another CA's certificate, or none, is refused
// by the handshake, and a plaintext hello gets no lean frame back.
func TestTLSLeanSessionPort(t *testing.T) {
	p := newPKI(t)
	d, addr := startTLS(t, Config{CertFile: p.certFile, KeyFile: p.keyFile, TrustedCAFile: p.caFile, ClientCertAuth: true})
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go d.ServeSessions(sln)
	lean := sln.Addr().String()

	if err := acquireOnce(t, "https://"+addr, client.WithTLS(p.clientTLS(p.client)), client.WithLeanSessions(lean)); err != nil {
		t.Fatalf("session over the lean port with the trusted client certificate: %v", err)
	}
	for name, certs := range map[string][]tls.Certificate{"none": nil, "other CA": {p.otherClient, {}}} {
		c, err := tls.Dial("tcp", lean, p.clientTLS(certs...))
		if err == nil {
			w := bufio.NewWriter(c)
			_ = leanwire.WriteFrame(w, leanwire.KindHello, leanwire.Hello{Version: leanwire.Version}.Append(nil))
			_ = w.Flush()
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		if err == nil {
			t.Fatalf("%s: the lean TLS port accepted a client without a certificate of the trusted CA", name)
		}
	}
	c, err := net.Dial("tcp", lean)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := bufio.NewWriter(c)
	_ = leanwire.WriteFrame(w, leanwire.KindHello, leanwire.Hello{Version: leanwire.Version}.Append(nil))
	_ = w.Flush()
	var buf []byte
	if kind, _, err := leanwire.ReadFrame(bufio.NewReader(c), 1<<20, &buf); err == nil && (kind == leanwire.KindReply || kind == leanwire.KindEnd) {
		t.Fatalf("a plaintext hello to the TLS lean port was answered with lean frame kind %d", kind)
	}
}
