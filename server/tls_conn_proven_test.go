package server

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/internal/certgen"
)

// startTLSServer serves cfg over TLS (a certificate for 127.0.0.1 from a
// new CA) and returns its https URL and the CA's pool.
func startTLSServer(t *testing.T, cfg Config) (*Server, string, *x509.CertPool) {
	t.Helper()
	ca, err := certgen.NewCA("fence-test", 0)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.TLSCertificate(certgen.Options{CommonName: "fence", Hosts: []string{"127.0.0.1"}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	s, url := startServerWith(t, cfg)
	return s, "https://" + strings.TrimPrefix(url, "http://"), ca.Pool()
}

// h2TLSClient speaks HTTP/2 over TLS, trusting roots, on one connection.
func h2TLSClient(roots *x509.CertPool) *http.Client {
	p := new(http.Protocols)
	p.SetHTTP2(true)
	return &http.Client{Transport: tracked(&http.Transport{Protocols: p, MaxConnsPerHost: 1, TLSClientConfig: &tls.Config{RootCAs: roots}})}
}

// Over TLS, too, a connection a request came on is proven and lives on
// past UnprovenTimeout. (It was not: the connection cap did not find its
// connection under TLS and tlsListener's wrapper, so every TLS connection
// was closed UnprovenTimeout after it was accepted, its requests cut.)
func TestTLSConnectionsAreProvenByARequest(t *testing.T) {
	s, url, roots := startTLSServer(t, Config{ReadHeaderTimeout: time.Hour, UnprovenTimeout: 200 * time.Millisecond, IdleTimeout: time.Hour})
	hc := h2TLSClient(roots)
	c := keptClient{hc: hc, lc: fencev1connect.NewLockServiceClient(hc, url)}
	c.acquire(t, "a")
	// Longer than UnprovenTimeout: wait for a silent socket opened after
	// the client's request to be closed by it.
	late, r := rawConn(t, "http://"+strings.TrimPrefix(url, "https://"))
	untilClosed(t, late, r)
	if !c.acquire(t, "b") {
		t.Fatalf("the client's TLS connection, proven by its request, was closed as unproven (%d closed so)", s.conns.expired.Load())
	}
}
