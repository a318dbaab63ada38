package chaos

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/fenceworks/fence/client"
)

// Security is how the harness, its workers and its nemesis reach nodes
// whose client port serves TLS. nil is plaintext, the default.
type Security struct {
	// Dir holds `fence cert`'s output: ca.crt, server.crt, server.key.
	Dir string
	// TLS trusts Dir/ca.crt.
	TLS *tls.Config
}

// NewSecurity makes a CA and a server certificate for 127.0.0.1 in dir
// with bin's `fence cert`.
func NewSecurity(bin, dir string) (*Security, error) {
	if out, err := exec.Command(bin, "cert", "--dir", dir, "--valid", "24h").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("chaos: fence cert: %v: %s", err, strings.TrimSpace(string(out)))
	}
	cfg, err := trustCA(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	return &Security{Dir: dir, TLS: cfg}, nil
}

// trustCA is a client TLS configuration that trusts the CA in path.
func trustCA(path string) (*tls.Config, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("chaos: CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("chaos: %s holds no certificate", path)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Scheme is the URL scheme of the nodes' client ports.
func (s *Security) Scheme() string {
	if s == nil || s.TLS == nil {
		return "http"
	}
	return "https"
}

// ServerArgs are the `fence serve` flags that serve TLS.
func (s *Security) ServerArgs() []string {
	if s == nil || s.TLS == nil {
		return nil
	}
	return []string{"--cert-file", filepath.Join(s.Dir, "server.crt"), "--key-file", filepath.Join(s.Dir, "server.key")}
}

// ClientOptions are the Go client's options for these nodes.
func (s *Security) ClientOptions(more ...client.Option) []client.Option {
	var o []client.Option
	if s != nil && s.TLS != nil {
		o = append(o, client.WithTLS(s.TLS.Clone()))
	}
	return append(o, more...)
}

// tlsConfig is s's client TLS configuration (nil without TLS).
func (s *Security) tlsConfig() *tls.Config {
	if s == nil {
		return nil
	}
	return s.TLS
}
