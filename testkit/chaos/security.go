package chaos

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/fenceworks/fence/client"
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
	cli := func(token string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, bin, append([]string{"--server", url, "--json"}, args...)...)
		cmd.Env = os.Environ()
		if token != "" {
			cmd.Env = append(cmd.Env, "FENCE_AUTH_TOKEN="+token)
		}
		if s.TLS != nil {
			cmd.Env = append(cmd.Env, "FENCE_CACERT="+filepath.Join(s.Dir, "ca.crt"))
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("chaos: fence %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return out, nil
	}
	secret := func(out []byte) (string, error) {
		var v struct {
			Secret string `json:"secret"`
		}
		if err := json.Unmarshal(out, &v); err != nil || v.Secret == "" {
			return "", fmt.Errorf("chaos: no secret in %q: %v", out, err)
		}
		return v.Secret, nil
	}
	out, err := cli("", "auth", "bootstrap")
	if err != nil {
		return err
	}
	admin, err := secret(out)
	if err != nil {
		return err
	}
	if _, err := cli(admin, "role", "grant", "worker", "lock:", "read:", "write:"); err != nil {
		return err
	}
	s.WorkerTokens = nil
	for i := range workers {
		out, err := cli(admin, "token", "create", "--role", "worker", "--description", fmt.Sprintf("chaos worker %d", i))
		if err != nil {
			return err
		}
		tok, err := secret(out)
		if err != nil {
			return err
		}
		s.WorkerTokens = append(s.WorkerTokens, tok)
	}
	if _, err := cli(admin, "auth", "enable"); err != nil {
		return err
	}
	s.AuthToken = admin
	for _, n := range nodes {
		n.server().SetAuthToken(admin)
	}
	return nil
}
