package daemon

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/internal/certgen"
	"github.com/fenceworks/fence/testkit/testutil"
)

// pki is a test CA with a server certificate for 127.0.0.1 and localhost
// and a client certificate, in files, and another CA that signs a client
// certificate of its own.
type pki struct {
	dir                 string
	ca, other           *certgen.CA
	certFile, keyFile   string
	caFile              string
	client, otherClient tls.Certificate
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	var err error
	if p.ca, err = certgen.NewCA("fence test CA", 0); err != nil {
		t.Fatal(err)
	}
	if p.other, err = certgen.NewCA("another CA", 0); err != nil {
		t.Fatal(err)
	}
	p.certFile, p.keyFile, p.caFile = filepath.Join(p.dir, "server.crt"), filepath.Join(p.dir, "server.key"), filepath.Join(p.dir, "ca.crt")
	p.writeServer(t, certgen.Options{})
	if err := os.WriteFile(p.caFile, p.ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	if p.client, err = p.ca.TLSCertificate(certgen.Options{CommonName: "worker", Client: true}); err != nil {
		t.Fatal(err)
	}
	if p.otherClient, err = p.other.TLSCertificate(certgen.Options{CommonName: "worker", Client: true}); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeServer issues a server certificate with o's validity (SANs
// 127.0.0.1 and localhost) into the server's files, key first, each
// replaced in one rename; it returns the certificate's serial in hex.
func (p *pki) writeServer(t *testing.T, o certgen.Options) string {
	t.Helper()
	o.CommonName, o.Hosts, o.Server = "fence", []string{"127.0.0.1", "localhost"}, true
	c, k, cert, err := p.ca.Issue(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := certgen.WriteFile(p.keyFile, k, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := certgen.WriteFile(p.certFile, c, 0o644); err != nil {
		t.Fatal(err)
	}
	return cert.SerialNumber.Text(16)
}

// clientTLS trusts the test CA, and presents certs. An empty certificate
// last means: send certs[0] even when the server's list of CAs does not
// name its issuer (Go's client would send none).
func (p *pki) clientTLS(certs ...tls.Certificate) *tls.Config {
	if n := len(certs); n == 2 && certs[1].Certificate == nil {
		c := certs[0]
		return &tls.Config{RootCAs: p.ca.Pool(), GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }}
	}
	return &tls.Config{RootCAs: p.ca.Pool(), Certificates: certs}
}

// startTLS serves a daemon with cfg's TLS settings on a loopback port until
// the test ends and returns it and its address.
func startTLS(t *testing.T, cfg Config) (*Daemon, string) {
	t.Helper()
	cfg.DataDir = t.TempDir()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return d, ln.Addr().String()
}

// acquireOnce acquires and releases a lock with a fail-fast client.
func acquireOnce(t *testing.T, url string, opts ...client.Option) error {
	t.Helper()
	c, err := client.New(url, append([]client.Option{client.WithFailFast(), client.WithAttemptTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	l, err := c.Acquire(ctx, "tls-"+strings.ReplaceAll(t.Name(), "/", "-"), client.TTL(time.Minute))
	if err != nil {
		return err
	}
	return l.Release(ctx)
}

// wantTLSError asserts err is a *client.TLSError whose cause says want.
func wantTLSError(t *testing.T, err error, want string) {
	t.Helper()
	var te *client.TLSError
	if !errors.As(err, &te) {
		t.Fatalf("error = %v (%T), want a *client.TLSError saying %q", err, err, want)
	}
	if !strings.Contains(te.Error(), want) {
		t.Fatalf("error = %q, want it to say %q", te.Error(), want)
	}
}

// What a client that cannot trust the server, or speaks the wrong protocol
// to it, gets: a *client.TLSError at once (not retried until its deadline)
// that names the cause — the CA, the expiry, the host name, plain HTTP to
// the TLS port and TLS to a plain port — and a plain net/http client gets
// the server's 400 saying it spoke HTTP to an HTTPS server.
func TestTLSRefusalsNameTheCause(t *testing.T) {
	p := newPKI(t)
	_, addr := startTLS(t, Config{CertFile: p.certFile, KeyFile: p.keyFile})
	url := "https://" + addr

	t.Run("trusted", func(t *testing.T) {
		for _, withSession := range []bool{false, true} {
			opts := []client.Option{client.WithTLS(p.clientTLS())}
			if !withSession {
				opts = append(opts, client.WithoutSession())
			}
			if err := acquireOnce(t, url, opts...); err != nil {
				t.Fatalf("session=%v: %v", withSession, err)
			}
		}
	})
	t.Run("wrong CA", func(t *testing.T) {
		err := acquireOnce(t, url, client.WithTLS(&tls.Config{RootCAs: p.other.Pool()}))
		wantTLSError(t, err, "not signed by a trusted CA")
	})
	t.Run("system roots", func(t *testing.T) {
		err := acquireOnce(t, url, client.WithoutSession())
		wantTLSError(t, err, "not signed by a trusted CA")
	})
	t.Run("host name mismatch", func(t *testing.T) {
		err := acquireOnce(t, url, client.WithTLS(&tls.Config{RootCAs: p.ca.Pool(), ServerName: "fence.other.example"}))
		wantTLSError(t, err, "does not name the host")
	})
	t.Run("plaintext to the TLS port", func(t *testing.T) {
		for _, withSession := range []bool{false, true} {
			var opts []client.Option
			if !withSession {
				opts = append(opts, client.WithoutSession())
			}
			err := acquireOnce(t, "http://"+addr, opts...)
			wantTLSError(t, err, "speaks TLS on this port")
		}
		hc := &http.Client{Transport: &http.Transport{}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "HTTP request to an HTTPS server") {
			t.Fatalf("plain GET /healthz on the TLS port = %d %q", resp.StatusCode, body)
		}
	})
	t.Run("http:// with WithTLS refused", func(t *testing.T) {
		if _, err := client.New("http://"+addr, client.WithTLS(p.clientTLS())); err == nil || !strings.Contains(err.Error(), "https://") {
			t.Fatalf("New(http://, WithTLS) = %v, want a refusal asking for https://", err)
		}
	})
	t.Run("TLS to a plain port", func(t *testing.T) {
		_, plain := startServer(t)
		err := acquireOnce(t, strings.Replace(plain, "http://", "https://", 1), client.WithTLS(p.clientTLS()), client.WithoutSession())
		wantTLSError(t, err, "does not speak TLS")
	})
	t.Run("expired", func(t *testing.T) {
		q := newPKI(t)
		q.ca = p.ca // the same CA: only the validity differs
		q.writeServer(t, certgen.Options{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
		_, expired := startTLS(t, Config{CertFile: q.certFile, KeyFile: q.keyFile})
		err := acquireOnce(t, "https://"+expired, client.WithTLS(p.clientTLS()))
		wantTLSError(t, err, "expired")
	})
}

// With --client-cert-auth a client without a certificate, or with one from
// another CA, is refused at the handshake (its error says the server
// refused it and what it needs); the right one is served. With a CA but
// without --client-cert-auth a client without a certificate is served,
// one with a certificate from another CA is refused.
func TestTLSClientCertAuth(t *testing.T) {
	p := newPKI(t)
	_, required := startTLS(t, Config{CertFile: p.certFile, KeyFile: p.keyFile, TrustedCAFile: p.caFile, ClientCertAuth: true})
	_, ifGiven := startTLS(t, Config{CertFile: p.certFile, KeyFile: p.keyFile, TrustedCAFile: p.caFile})
	for _, tc := range []struct {
		name    string
		addr    string
		certs   []tls.Certificate
		refused bool
	}{
		{"required/none", required, nil, true},
		{"required/other CA", required, []tls.Certificate{p.otherClient}, true},
		{"required/other CA, sent anyway", required, []tls.Certificate{p.otherClient, {}}, true},
		{"required/right", required, []tls.Certificate{p.client}, false},
		{"if given/none", ifGiven, nil, false},
		{"if given/other CA", ifGiven, []tls.Certificate{p.otherClient}, false}, // Go's client sends no certificate the server's CA list does not name
		{"if given/other CA, sent anyway", ifGiven, []tls.Certificate{p.otherClient, {}}, true},
		{"if given/right", ifGiven, []tls.Certificate{p.client}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, withSession := range []bool{false, true} {
				opts := []client.Option{client.WithTLS(p.clientTLS(tc.certs...))}
				if !withSession {
					opts = append(opts, client.WithoutSession())
				}
				err := acquireOnce(t, "https://"+tc.addr, opts...)
				if !tc.refused {
					if err != nil {
						t.Fatalf("session=%v: %v", withSession, err)
					}
					continue
				}
				wantTLSError(t, err, "the server refused the TLS handshake")
			}
			// And a plain net/http client the same.
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: p.clientTLS(tc.certs...)}}
			defer hc.CloseIdleConnections()
			resp, err := hc.Get("https://" + tc.addr + "/healthz")
			if err == nil {
				resp.Body.Close()
			}
			if (err != nil) != tc.refused {
				t.Fatalf("GET /healthz: %v, want refused=%v", err, tc.refused)
			}
		})
	}
}

// Bad TLS settings are refused by Validate naming the setting and what it
// needs, before anything starts.
func TestTLSConfigValidate(t *testing.T) {
	p := newPKI(t)
	junk := filepath.Join(p.dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		mod       func(*Config)
		field, in string
	}{
		{"cert without key", func(c *Config) { c.CertFile = p.certFile }, "config.key_file", "set with config.cert_file"},
		{"key without cert", func(c *Config) { c.KeyFile = p.keyFile }, "config.cert_file", "set with config.key_file"},
		{"client-cert-auth without CA", func(c *Config) { c.CertFile, c.KeyFile, c.ClientCertAuth = p.certFile, p.keyFile, true }, "config.trusted_ca_file", "client_cert_auth"},
		{"CA without cert", func(c *Config) { c.TrustedCAFile = p.caFile }, "config.cert_file", "trusted_ca_file"},
		{"cert that does not load", func(c *Config) { c.CertFile, c.KeyFile = junk, p.keyFile }, "config.cert_file", "loads"},
		{"key of another cert", func(c *Config) { c.CertFile, c.KeyFile = p.certFile, p.caFile }, "config.cert_file", "loads"},
		{"CA that does not load", func(c *Config) {
			c.CertFile, c.KeyFile, c.TrustedCAFile = p.certFile, p.keyFile, junk
		}, "config.trusted_ca_file", "CA certificates"},
		{"missing file", func(c *Config) { c.CertFile, c.KeyFile = filepath.Join(p.dir, "nope.crt"), p.keyFile }, "config.cert_file", "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			var inv *fence.InvalidError
			if err := c.Validate(); !errors.As(err, &inv) || inv.Field != tc.field || !strings.Contains(err.Error(), tc.in) {
				t.Fatalf("Validate = %v, want an InvalidError for %s saying %q", err, tc.field, tc.in)
			}
		})
	}
	c := DefaultConfig()
	c.CertFile, c.KeyFile, c.TrustedCAFile, c.ClientCertAuth = p.certFile, p.keyFile, p.caFile, true
	if err := c.Validate(); err != nil {
		t.Fatalf("a good TLS config: %v", err)
	}
}

// handshakeSerial makes a new TLS connection and returns the serial of
// the certificate the server sent.
func handshakeSerial(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Text(16)
}

// Certificates are rotated without a restart: while clients acquire and
// release over TLS (sessions on HTTP/2 streams, standalone leases on
// HTTP/1.1 and h2), the key and certificate files are replaced, key first
// (so a reload can see a key without its certificate and must keep the
// old pair) — no request fails, the connections opened before the
// rotation keep working, and new handshakes get the new certificate.
// A file replaced by junk is refused and the last good one kept.
func TestTLSRotationUnderLoad(t *testing.T) {
	p := newPKI(t)
	var logs testutil.Buffer
	d, addr := startTLS(t, Config{CertFile: p.certFile, KeyFile: p.keyFile, TrustedCAFile: p.caFile, ClientCertAuth: true,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	url := "https://" + addr
	first := handshakeSerial(t, addr, p.clientTLS(p.client))

	// An HTTP/2 connection opened before the rotation.
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: p.clientTLS(p.client), ForceAttemptHTTP2: true}}
	defer h2.CloseIdleConnections()
	peerSerial := func() string {
		t.Helper()
		resp, err := h2.Get(url + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("proto %s, want HTTP/2", resp.Proto)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Text(16)
	}
	if s := peerSerial(); s != first {
		t.Fatalf("serial %s, want %s", s, first)
	}

	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		ok   int
		errs []error
	}
	results := make(chan result)
	workers := []client.Option{
		nil, // session (HTTP/2 stream)
		client.WithoutSession(),
		client.WithProtocol(client.ProtocolGRPC),
		client.WithProtocol(client.ProtocolConnectJSON),
	}
	for i, opt := range workers {
		go func() {
			var r result
			defer func() { results <- r }()
			opts := []client.Option{client.WithTLS(p.clientTLS(p.client))}
			if opt != nil {
				opts = append(opts, opt)
			}
			c, err := client.New(url, opts...)
			if err != nil {
				r.errs = append(r.errs, err)
				return
			}
			defer c.Close()
			name := "rot-" + string(rune('a'+i))
			for ctx.Err() == nil {
				cctx, ccancel := context.WithTimeout(context.Background(), hangGuard)
				l, err := c.Acquire(cctx, name, client.TTL(time.Minute))
				if err == nil {
					err = l.Release(cctx)
				}
				ccancel()
				if err != nil {
					r.errs = append(r.errs, err)
					continue
				}
				r.ok++
			}
		}()
	}

	serials := []string{first}
	for range 3 {
		serials = append(serials, p.writeServer(t, certgen.Options{}))
		want := serials[len(serials)-1]
		until(t, "new handshakes get certificate "+want, func() bool { return handshakeSerial(t, addr, p.clientTLS(p.client)) == want })
	}
	// A broken file is refused; the last good certificate stays.
	if err := certgen.WriteFile(p.certFile, []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.ReloadTLS(); err == nil {
		t.Fatal("ReloadTLS of a junk certificate file succeeded")
	}
	resp, err := h2.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`(?m)^fence_tls_reload_failures_total [1-9]`).Match(metrics) {
		t.Fatalf("fence_tls_reload_failures_total is not above 0 after a failed reload:\n%s", metrics)
	}
	if !strings.Contains(logs.String(), "TLS certificate reload failed") {
		t.Fatalf("no error logged for a failed reload:\n%s", logs.String())
	}
	if s := handshakeSerial(t, addr, p.clientTLS(p.client)); s != serials[len(serials)-1] {
		t.Fatalf("after a failed reload the server sent %s, want the last good %s", s, serials[len(serials)-1])
	}
	// And SIGHUP's path (ReloadTLS) takes a good new one at once.
	last := p.writeServer(t, certgen.Options{})
	if err := d.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if s := handshakeSerial(t, addr, p.clientTLS(p.client)); s != last {
		t.Fatalf("after ReloadTLS the server sent %s, want %s", s, last)
	}
	// Wait for every worker to have done some work after the rotation.
	cancel()
	total := 0
	for range workers {
		r := <-results
		for _, err := range r.errs {
			t.Errorf("request failed during the rotation: %v", err)
		}
		if r.ok == 0 {
			t.Errorf("a worker did nothing")
		}
		total += r.ok
	}
	// The HTTP/2 connection opened before is still the one in use: it
	// still shows the first certificate.
	if s := peerSerial(); s != first {
		t.Fatalf("the connection opened before the rotation shows serial %s, want the first, %s (was it dropped?)", s, first)
	}
	t.Logf("%d acquire+release cycles over %d certificates", total, len(serials)+1)
}

// Over TLS the API answers every protocol it answers in plain text: the Go
// client's Connect, Connect JSON and gRPC (sessions over HTTP/2 streams),
// gRPC-Web and plain JSON POSTs from net/http, over HTTP/1.1 and h2 alike;
// /healthz, /readyz and /metrics too.
func TestTLSEveryProtocol(t *testing.T) {
	p := newPKI(t)
	_, addr := startTLS(t, Config{CertFile: p.certFile, KeyFile: p.keyFile})
	url := "https://" + addr
	for _, proto := range []struct {
		name string
		p    client.Protocol
	}{{"connect", client.ProtocolConnect}, {"connect-json", client.ProtocolConnectJSON}, {"grpc", client.ProtocolGRPC}} {
		for _, withSession := range []bool{false, true} {
			opts := []client.Option{client.WithTLS(p.clientTLS()), client.WithProtocol(proto.p)}
			if !withSession {
				opts = append(opts, client.WithoutSession())
			}
			if err := acquireOnce(t, url, opts...); err != nil {
				t.Fatalf("%s session=%v: %v", proto.name, withSession, err)
			}
		}
	}
	for _, h := range []struct {
		name  string
		h2    bool
		major int
	}{{"HTTP/1.1", false, 1}, {"h2", true, 2}} {
		tr := &http.Transport{TLSClientConfig: p.clientTLS(), ForceAttemptHTTP2: h.h2}
		if !h.h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // no h2
		}
		hc := &http.Client{Transport: tr}
		do := func(method, path, ctype string, body []byte) *http.Response {
			t.Helper()
			req, err := http.NewRequest(method, url+path, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if ctype != "" {
				req.Header.Set("Content-Type", ctype)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("%s %s %s: %v", h.name, method, path, err)
			}
			if resp.ProtoMajor != h.major {
				t.Fatalf("%s %s: proto %s", h.name, path, resp.Proto)
			}
			return resp
		}
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			resp := do("GET", path, "", nil)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%s GET %s = %d", h.name, path, resp.StatusCode)
			}
			if path == "/metrics" && (!strings.Contains(string(b), "fence_tls_cert_not_after_seconds") || !strings.Contains(string(b), "fence_tls_reload_failures_total 0")) {
				t.Fatalf("/metrics lacks the TLS metrics:\n%s", b)
			}
		}
		resp := do("POST", "/fence.v1.LockService/Acquire", "application/json", []byte(`{"name":"json-`+h.name+`","ttl":"30s"}`))
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"token"`) {
			t.Fatalf("%s JSON Acquire = %d %s", h.name, resp.StatusCode, b)
		}
		// gRPC-Web: an empty List (one 5-byte frame of an empty message).
		resp = do("POST", "/fence.v1.LockService/List", "application/grpc-web+proto", []byte{0, 0, 0, 0, 0})
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(b, []byte("grpc-status:0")) && !bytes.Contains(b, []byte("grpc-status: 0")) && resp.Header.Get("Grpc-Status") != "0" {
			t.Fatalf("%s gRPC-Web List = %d %q %v", h.name, resp.StatusCode, b, resp.Header)
		}
		hc.CloseIdleConnections()
	}
}

var _ = x509.NewCertPool

// The CA file of --trusted-ca-file is re-read as the certificate is: a
// client whose certificate is from a CA not in it is refused, then served
// once the file holds that CA too (the files changed, no signal); a CA
// file replaced by junk keeps the last good one.
func TestTLSTrustedCAReload(t *testing.T) {
	p := newPKI(t)
	d, addr := startTLS(t, Config{CertFile: p.certFile, KeyFile: p.keyFile, TrustedCAFile: p.caFile, ClientCertAuth: true})
	url := "https://" + addr
	newcomer := []client.Option{client.WithTLS(p.clientTLS(p.otherClient, tls.Certificate{})), client.WithoutSession()}
	wantTLSError(t, acquireOnce(t, url, newcomer...), "the server refused the TLS handshake")
	if err := acquireOnce(t, url, client.WithTLS(p.clientTLS(p.client)), client.WithoutSession()); err != nil {
		t.Fatal(err)
	}
	bundle := append(p.ca.CertPEM(), p.other.CertPEM()...)
	if err := certgen.WriteFile(p.caFile, bundle, 0o644); err != nil {
		t.Fatal(err)
	}
	until(t, "a client of the added CA to be served", func() bool { return acquireOnce(t, url, newcomer...) == nil })
	if err := acquireOnce(t, url, client.WithTLS(p.clientTLS(p.client)), client.WithoutSession()); err != nil {
		t.Fatalf("the first CA's client after the CA file changed: %v", err)
	}
	if err := certgen.WriteFile(p.caFile, []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.ReloadTLS(); err == nil {
		t.Fatal("ReloadTLS of a junk CA file succeeded")
	}
	if err := acquireOnce(t, url, newcomer...); err != nil {
		t.Fatalf("after a junk CA file the last good CA bundle should stay: %v", err)
	}
}

// A reload that finds an expired certificate (or one not valid yet) in the
// files keeps serving the valid one it has, counts a failed reload, and
// takes the next valid certificate written.
func TestTLSReloadKeepsAValidCertificateOverAnExpiredOne(t *testing.T) {
	p := newPKI(t)
	d, addr := startTLS(t, Config{CertFile: p.certFile, KeyFile: p.keyFile})
	good := handshakeSerial(t, addr, p.clientTLS())
	for _, tc := range []struct {
		name string
		o    certgen.Options
		want string
	}{
		{"expired", certgen.Options{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)}, "expired at"},
		{"not valid yet", certgen.Options{NotBefore: time.Now().Add(24 * time.Hour), NotAfter: time.Now().Add(48 * time.Hour)}, "is not valid until"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.writeServer(t, tc.o)
			err := d.ReloadTLS()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReloadTLS with a certificate that is %s = %v, want a refusal saying %q", tc.name, err, tc.want)
			}
			if got := handshakeSerial(t, addr, p.clientTLS()); got != good {
				t.Fatalf("after refusing a certificate that is %s the server serves serial %s, want the valid %s", tc.name, got, good)
			}
			if err := acquireOnce(t, "https://"+addr, client.WithTLS(p.clientTLS()), client.WithoutSession()); err != nil {
				t.Fatalf("a call after the refused reload: %v", err)
			}
		})
	}
	next := p.writeServer(t, certgen.Options{})
	if err := d.ReloadTLS(); err != nil {
		t.Fatalf("ReloadTLS of a valid certificate after refused ones: %v", err)
	}
	if got := handshakeSerial(t, addr, p.clientTLS()); got != next {
		t.Fatalf("after a valid reload the server serves serial %s, want %s", got, next)
	}
}
