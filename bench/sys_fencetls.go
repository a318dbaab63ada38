package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/testkit/harness"
)

func init() {
	Register(fenceSessionTLS{})
	Register(fenceSessionTLSAuth{})
}

// fenceSessionTLS is fence-session against a server whose client port
// speaks TLS (HTTP/2 over TLS, ALPN h2): the same workloads, so that the
// cost of TLS on the session path is the ratio of the two rows measured in
// one run (issue 21's benchmark).
type fenceSessionTLS struct{}

func (fenceSessionTLS) Name() string   { return "fence-session-tls" }
func (fenceSessionTLS) Server() string { return "fence-tls" }
func (fenceSessionTLS) Fenced() bool   { return true }

// PKIEnv names the variable that holds the directory of the certificates
// `fence cert` made for the fence-tls server (ca.crt, server.crt, ...).
// StartFenceTLS sets it in the runner's environment, so the clients the
// runner starts in child processes find the CA too.
const PKIEnv = "FENCEBENCH_PKI"

func (fenceSessionTLS) Open(ctx context.Context, addr string, workers int) (Client, error) {
	cfg, err := benchClientTLS()
	if err != nil {
		return nil, err
	}
	return &fenceSessionClient{addr: addr, clients: map[int]*client.Client{},
		scheme: "https", opts: []client.Option{client.WithTLS(cfg)}}, nil
}

// fenceSessionTLSAuth is fence-session-tls with authentication on: every
// call carries a bearer token whose role may lock, read and write every
// name, and the server authenticates and checks it (issue 21's benchmark:
// the cost of TLS and auth together, against fence-session in one run).
type fenceSessionTLSAuth struct{}

func (fenceSessionTLSAuth) Name() string   { return "fence-session-tls-auth" }
func (fenceSessionTLSAuth) Server() string { return "fence-tls-auth" }
func (fenceSessionTLSAuth) Fenced() bool   { return true }

// AuthEnv names the variable that holds the bench clients' bearer token
// (set by StartFenceTLSAuth, inherited by the runner's children).
const AuthEnv = "FENCEBENCH_AUTH_TOKEN"

func (fenceSessionTLSAuth) Open(ctx context.Context, addr string, workers int) (Client, error) {
	cfg, err := benchClientTLS()
	if err != nil {
		return nil, err
	}
	tok := os.Getenv(AuthEnv)
	if tok == "" {
		return nil, fmt.Errorf("%s is not set: no fence-tls-auth server was started", AuthEnv)
	}
	return &fenceSessionClient{addr: addr, clients: map[int]*client.Client{},
		scheme: "https", opts: []client.Option{client.WithTLS(cfg), client.WithBearerToken(tok)}}, nil
}

// StartFenceTLSAuth is StartFenceTLS, then `fence auth bootstrap`, a role
// bench with lock:, read: and write: (every name), a token holding it, and
// `fence auth enable`; the token goes into $FENCEBENCH_AUTH_TOKEN.
func StartFenceTLSAuth(bin, tmp string) (*Server, error) {
	s, err := startFenceTLS(bin, tmp, "fence-tls-auth")
	if err != nil {
		return nil, err
	}
	a, err := harness.EnableAuth(context.Background(), bin, "https://"+s.Addr,
		[]string{"FENCE_CACERT=" + filepath.Join(os.Getenv(PKIEnv), "ca.crt")}, "bench", []string{"lock:", "read:", "write:"}, 1)
	if err != nil {
		s.Stop()
		return nil, err
	}
	if err := os.Setenv(AuthEnv, a.Tokens[0]); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// benchClientTLS trusts the CA in $FENCEBENCH_PKI.
func benchClientTLS() (*tls.Config, error) {
	dir := os.Getenv(PKIEnv)
	if dir == "" {
		return nil, fmt.Errorf("%s is not set: no fence-tls server was started", PKIEnv)
	}
	return harness.TrustCA(filepath.Join(dir, "ca.crt"))
}

// StartFenceTLS is StartFence with the client port on TLS: `fence cert`
// makes a CA and a server certificate for 127.0.0.1 under tmp, and the
// server is started with --cert-file and --key-file.
func StartFenceTLS(bin, tmp string) (*Server, error) { return startFenceTLS(bin, tmp, "fence-tls") }

func startFenceTLS(bin, tmp, kind string) (*Server, error) {
	// One CA for every TLS server of the run: the clients find it in
	// $FENCEBENCH_PKI, whichever server they talk to.
	pki := os.Getenv(PKIEnv)
	if _, err := os.Stat(filepath.Join(pki, "server.crt")); pki == "" || err != nil {
		if pki, err = os.MkdirTemp(tmp, "pki-"); err != nil {
			return nil, err
		}
		if out, err := exec.Command(bin, "cert", "--dir", pki, "--valid", "24h").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("fence cert: %v: %s", err, strings.TrimSpace(string(out)))
		}
		if err := os.Setenv(PKIEnv, pki); err != nil {
			return nil, err
		}
	}
	cfg, err := benchClientTLS()
	if err != nil {
		return nil, err
	}
	return startFence(bin, tmp, kind, cfg,
		"--cert-file", filepath.Join(pki, "server.crt"), "--key-file", filepath.Join(pki, "server.key"))
}
