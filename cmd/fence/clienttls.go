package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"github.com/fenceworks/fence/internal/pemfile"
	"net/http"

	"github.com/fenceworks/fence/client"
)

// clientTLSFlags are the CLI's TLS settings (--cacert, --cert, --key, or
// FENCE_CACERT, FENCE_CERT, FENCE_KEY): with any of them the CLI speaks
// TLS, HOST:PORT means https://HOST:PORT and the default server is
// https://127.0.0.1:7420.
type clientTLSFlags struct {
	cacert, cert, key string
	config            *tls.Config // loaded by load, nil without TLS
}

// fromEnv takes the variables; flags given later win.
func (f *clientTLSFlags) fromEnv(getenv func(string) string) {
	f.cacert, f.cert, f.key = getenv("FENCE_CACERT"), getenv("FENCE_CERT"), getenv("FENCE_KEY")
}

func (f *clientTLSFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.cacert, "cacert", f.cacert, "`FILE`: PEM CA certificate(s) that sign the server's certificate; means https:// (env FENCE_CACERT)")
	fs.StringVar(&f.cert, "cert", f.cert, "`FILE`: PEM client certificate, for a server with --client-cert-auth (env FENCE_CERT)")
	fs.StringVar(&f.key, "key", f.key, "`FILE`: PEM key of --cert (env FENCE_KEY)")
}

// on reports whether any TLS setting was given.
func (f *clientTLSFlags) on() bool { return f.cacert != "" || f.cert != "" || f.key != "" }

// load reads the files into f.config; a bad set is a usage error naming
// the flag.
func (f *clientTLSFlags) load() error {
	f.config = nil
	if !f.on() {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.cacert != "" {
		pem, err := pemfile.Read(f.cacert)
		if err != nil {
			return &usageError{fmt.Sprintf("--cacert: %v", err)}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return &usageError{fmt.Sprintf("--cacert %s: no PEM certificate in it", f.cacert)}
		}
		cfg.RootCAs = pool
	}
	switch {
	case f.cert != "" && f.key == "":
		return &usageError{"--cert needs --key (FENCE_KEY), the certificate's key"}
	case f.key != "" && f.cert == "":
		return &usageError{"--key needs --cert (FENCE_CERT), the key's certificate"}
	case f.cert != "":
		pair, err := loadClientPair(f.cert, f.key)
		if err != nil {
			return &usageError{fmt.Sprintf("--cert %s with --key %s: %v", f.cert, f.key, err)}
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	f.config = cfg
	return nil
}

// clientOptions are opts with the TLS config, if any.
func (g *globals) clientOptions(opts ...client.Option) []client.Option {
	if g.tls.config != nil {
		opts = append(opts, client.WithTLS(g.tls.config))
	}
	if g.authToken != "" {
		opts = append(opts, client.WithBearerToken(g.authToken))
	}
	return opts
}

// httpClient is the plain HTTP client of status and members, with the TLS
// config, if any.
func (g *globals) httpClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if g.tls.config != nil {
		t.TLSClientConfig = g.tls.config.Clone()
	}
	if g.authToken != "" {
		return &http.Client{Transport: bearerTransport{t, "Bearer " + g.authToken}}
	}
	return &http.Client{Transport: t}
}

// loadClientPair is tls.LoadX509KeyPair within pemfile's bounds.
func loadClientPair(certFile, keyFile string) (tls.Certificate, error) {
	c, err := pemfile.Read(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	k, err := pemfile.Read(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(c, k)
}

// bearerTransport sends Authorization with every request.
type bearerTransport struct {
	*http.Transport
	auth string
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", b.auth)
	return b.Transport.RoundTrip(r)
}
