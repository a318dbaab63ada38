package chaos

import (
	"context"
	"crypto/tls"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/testkit/harness"
)

// Security is how the harness, its workers and its nemesis reach nodes
// whose client port serves TLS, or checks bearer tokens, or both. nil is
// plaintext with no credentials, the default.
type Security struct {
	// Dir holds `fence cert`'s output: ca.crt, server.crt, server.key
	// ("" without TLS).
	Dir string
	// TLS trusts Dir/ca.crt (nil: plaintext).
	TLS *tls.Config
	// AuthToken, once authentication is on (EnableAuth), is the admin
	// token of the harness's and the nemesis's calls; WorkerTokens[i] is
	// worker i's, each its own principal.
	AuthToken    string
	WorkerTokens []string
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

// trustCA is harness.TrustCA.
func trustCA(path string) (*tls.Config, error) { return harness.TrustCA(path) }

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
	if s != nil && s.AuthToken != "" {
		o = append(o, client.WithBearerToken(s.AuthToken))
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

// token is s's admin token ("" without).
func (s *Security) token() string {
	if s == nil {
		return ""
	}
	return s.AuthToken
}

// EnableAuth turns authentication on for the cluster, with bin's CLI
// against url: `fence auth bootstrap` (the admin token), a role worker
// that may lock, read and write every name, one token holding it per
// worker (each its own principal: ownership is checked between workers),
// and `fence auth enable`. Every node's harness calls then carry the
// admin token.
func (s *Security) EnableAuth(ctx context.Context, bin, url string, workers int, nodes []*Node) error {
	var env []string
	if s.TLS != nil {
		env = append(env, "FENCE_CACERT="+filepath.Join(s.Dir, "ca.crt"))
	}
	a, err := harness.EnableAuth(ctx, bin, url, env, "worker", []string{"lock:", "read:", "write:"}, workers)
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	s.AuthToken, s.WorkerTokens = a.Admin, a.Tokens
	for _, n := range nodes {
		n.server().SetAuthToken(a.Admin)
	}
	return nil
}
