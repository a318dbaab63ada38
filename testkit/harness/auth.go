package harness

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// TrustCA is a client TLS configuration whose RootCAs hold the PEM
// certificates in path (a CA `fence cert` made).
func TrustCA(path string) (*tls.Config, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("harness: CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("harness: %s holds no certificate", path)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Auth is what EnableAuth made: the first admin token, and one token per
// principal asked for, each holding the role it made.
type Auth struct {
	Admin  string
	Tokens []string
}

// EnableAuth turns authentication on for the servers at url (one URL, or
// a comma-separated list: changes go to the leader) with bin's CLI, as
// docs/security.md tells an operator to: `fence auth bootstrap` (the admin
// token), a role named role holding perms (KIND:PREFIX), tokens tokens of
// it (each its own principal), then `fence auth enable`. env is added to
// the CLI's environment (FENCE_CACERT, FENCE_CERT, FENCE_KEY for TLS).
func EnableAuth(ctx context.Context, bin, url string, env []string, role string, perms []string, tokens int) (Auth, error) {
	cli := func(token string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, bin, append([]string{"--server", url}, args...)...)
		cmd.Env = append(append(os.Environ(), env...), "FENCE_AUTH_TOKEN="+token)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("harness: fence %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return out, nil
	}
	secret := func(token string, args ...string) (string, error) {
		out, err := cli(token, append(args, "--json")...)
		if err != nil {
			return "", err
		}
		var v struct {
			Secret string `json:"secret"`
		}
		if err := json.Unmarshal(out, &v); err != nil || v.Secret == "" {
			return "", fmt.Errorf("harness: fence %s printed no secret: %q (%v)", strings.Join(args, " "), out, err)
		}
		return v.Secret, nil
	}
	var a Auth
	var err error
	if a.Admin, err = secret("", "auth", "bootstrap"); err != nil {
		return Auth{}, err
	}
	if _, err := cli(a.Admin, append([]string{"role", "grant", role}, perms...)...); err != nil {
		return Auth{}, err
	}
	for range tokens {
		tok, err := secret(a.Admin, "token", "create", "--role", role)
		if err != nil {
			return Auth{}, err
		}
		a.Tokens = append(a.Tokens, tok)
	}
	if _, err := cli(a.Admin, "auth", "enable"); err != nil {
		return Auth{}, err
	}
	return a, nil
}
