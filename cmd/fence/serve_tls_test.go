package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fence serve refuses a bad set of TLS flags before it starts, with exit 2
// and a line naming the flags (not the config fields) and what is needed.
func TestServeRefusesBadTLSFlags(t *testing.T) {
	dir := t.TempDir()
	if _, err := makeCerts(dir, nil, "server", "client", 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	crt, key, ca := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"), filepath.Join(dir, "ca.crt")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cert-file", crt}, "--key-file must be set with --cert-file"},
		{[]string{"--key-file", key}, "--cert-file must be set with --key-file"},
		{[]string{"--cert-file", crt, "--key-file", key, "--client-cert-auth"}, "--trusted-ca-file must be set with --client-cert-auth"},
		{[]string{"--trusted-ca-file", ca}, "--cert-file must be set with --trusted-ca-file"},
		{[]string{"--cert-file", ca, "--key-file", key}, "--cert-file must be a PEM certificate that loads with --key-file: tls: private key does not match public key"},
		{[]string{"--cert-file", crt, "--key-file", key, "--trusted-ca-file", key}, "--trusted-ca-file must be a PEM file of CA certificates"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"--data-dir", filepath.Join(t.TempDir(), "d")}, tc.args...)
		code := serveCmd(&globals{stdout: &stdout}, args, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("serve %q: exit %d, stderr %q; want exit %d saying %q", tc.args, code, stderr.String(), exitUsage, tc.want)
		}
	}
}
