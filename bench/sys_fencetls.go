package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/fenceworks/fence/client"
)

func init() { Register(fenceSessionTLS{}) }

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

// benchClientTLS trusts the CA in $FENCEBENCH_PKI.
func benchClientTLS() (*tls.Config, error) {
	dir := os.Getenv(PKIEnv)
	if dir == "" {
		return nil, fmt.Errorf("%s is not set: no fence-tls server was started", PKIEnv)
	}
	pem, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s/ca.crt holds no certificate", dir)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// StartFenceTLS is StartFence with the client port on TLS: `fence cert`
// makes a CA and a server certificate for 127.0.0.1 under tmp, and the
// server is started with --cert-file and --key-file.
func StartFenceTLS(bin, tmp string) (*Server, error) {
	pki, err := os.MkdirTemp(tmp, "pki-")
	if err != nil {
		return nil, err
	}
	if out, err := exec.Command(bin, "cert", "--dir", pki, "--valid", "24h").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("fence cert: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if err := os.Setenv(PKIEnv, pki); err != nil {
		return nil, err
	}
	cfg, err := benchClientTLS()
	if err != nil {
		return nil, err
	}
	return startFence(bin, tmp, "fence-tls", cfg,
		"--cert-file", filepath.Join(pki, "server.crt"), "--key-file", filepath.Join(pki, "server.key"))
}
