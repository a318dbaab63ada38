//go:build e2e

package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// certDir runs `fence cert` into a new directory and returns it.
func certDir(t *testing.T, dir string, args ...string) string {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "certs")
	}
	fenceRun(t, "", append([]string{"cert", "--dir", dir}, args...)...).want(t, 0, "fence cert")
	return dir
}

// serverSerial opens a new TLS connection to url's host, trusting the CA
// in dir and presenting its client certificate, and returns the serial of
// the certificate the server sent.
func serverSerial(t *testing.T, url, dir string) string {
	t.Helper()
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("ca.crt: %v", err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Text(16)
}

// certSubject is the subject of the certificate in a PEM file.
func certSubject(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.Subject.String()
}

// fileSerial is the serial of the certificate in a PEM file.
func fileSerial(t *testing.T, path string) string {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(path, strings.TrimSuffix(path, ".crt")+".key")
	if err != nil {
		t.Fatal(err)
	}
	return pair.Leaf.SerialNumber.Text(16)
}

// waitFor polls cond until it holds, failing after procLimit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(procLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, procLimit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The path a new user takes, with real processes: `fence cert` makes a CA
// and certificates; `fence serve --cert-file --key-file --trusted-ca-file
// --client-cert-auth` serves them; the CLI with --cacert --cert --key (or
// FENCE_CACERT, FENCE_CERT, FENCE_KEY) and HOST:PORT is served over TLS,
// without a client certificate or with plain HTTP it is refused with an
// error naming the cause. Then rotation: `fence cert` run again issues a
// new server certificate from the same CA, which the server takes without
// a signal (the files changed).
func TestProcessServeTLSCertRotate(t *testing.T) {
	dir := certDir(t, "")
	srv := startServe(t, "--cert-file", filepath.Join(dir, "server.crt"), "--key-file", filepath.Join(dir, "server.key"),
		"--trusted-ca-file", filepath.Join(dir, "ca.crt"), "--client-cert-auth")
	if !strings.HasPrefix(srv.url, "https://") {
		t.Fatalf("fence serve with --cert-file logged %s, want an https:// URL", srv.url)
	}
	hostPort := strings.TrimPrefix(srv.url, "https://")
	tlsArgs := []string{"--cacert", filepath.Join(dir, "ca.crt"), "--cert", filepath.Join(dir, "client.crt"), "--key", filepath.Join(dir, "client.key")}

	r := fenceRun(t, "", append([]string{"--server", hostPort, "acquire", "tls-a", "--ttl", "30s"}, tlsArgs...)...).want(t, 0, "acquire over TLS")
	tok := tokenOf(t, r.stdout)
	noCert := fenceRun(t, "", "--server", hostPort, "--cacert", filepath.Join(dir, "ca.crt"), "release", "tls-a", "--token", "1").want(t, exitError, "no client certificate")
	if !strings.Contains(noCert.stderr, "refused the TLS handshake") || !strings.Contains(noCert.stderr, "certificate required") {
		t.Fatalf("without a client certificate: stderr %q, want the server's refusal named", noCert.stderr)
	}
	plain := fenceRun(t, "http://"+hostPort, "read", "x").want(t, exitError, "plain HTTP to the TLS port")
	if !strings.Contains(plain.stderr, "speaks TLS on this port") {
		t.Fatalf("plain HTTP: stderr %q, want it to say the port speaks TLS", plain.stderr)
	}
	// A CA that did not sign the server's certificate: every command,
	// those of the client package and the admin ones that call the API
	// themselves, says so in words, names the certificate's issuer and
	// what to do (--cacert), never the bare x509 error.
	other := certDir(t, "")
	issuer := certSubject(t, filepath.Join(dir, "ca.crt"))
	for _, cmd := range [][]string{{"read", "x"}, {"auth", "status"}, {"status"}, {"members"}, {"keys"}, {"token", "list"}} {
		wrongCA := fenceRun(t, "", append(append([]string{"--server", hostPort, "--cacert", filepath.Join(other, "ca.crt")}, tlsArgs[2:]...), cmd...)...).want(t, exitError, "wrong CA: "+cmd[0])
		for _, want := range []string{"not signed by a trusted CA", "issued by " + strconv.Quote(issuer), "--cacert " + filepath.Join(other, "ca.crt") + " does not hold the CA"} {
			if !strings.Contains(wrongCA.stderr, want) {
				t.Errorf("wrong CA, fence %s: stderr %q, want %q", strings.Join(cmd, " "), wrongCA.stderr, want)
			}
		}
		if strings.Contains(wrongCA.stderr, "x509:") {
			t.Errorf("wrong CA, fence %s: stderr %q shows the bare x509 error", strings.Join(cmd, " "), wrongCA.stderr)
		}
	}
	t.Setenv("FENCE_CACERT", filepath.Join(dir, "ca.crt"))
	t.Setenv("FENCE_CERT", filepath.Join(dir, "client.crt"))
	t.Setenv("FENCE_KEY", filepath.Join(dir, "client.key"))
	fenceRun(t, "", "--server", hostPort, "release", "tls-a", "--token", strconv.FormatUint(tok, 10)).want(t, 0, "release with FENCE_CACERT, FENCE_CERT, FENCE_KEY")
	fenceRun(t, "", "--server", hostPort, "status").want(t, 0, "status over TLS")

	// Rotation by changed files, no signal.
	first := serverSerial(t, srv.url, dir)
	certDir(t, dir)
	rotated := fileSerial(t, filepath.Join(dir, "server.crt"))
	if rotated == first {
		t.Fatal("fence cert issued the same serial again")
	}
	waitFor(t, "the server to send the rotated certificate", func() bool { return serverSerial(t, srv.url, dir) == rotated })
	fenceRun(t, "", "--server", hostPort, "acquire", "tls-b", "--ttl", "30s").want(t, 0, "acquire after the rotation")
}

// padded writes b to p in place (the same inode), padded with newlines to
// 4096 bytes, with the modification time mtime: a file whose size,
// modification time and inode say nothing of a change of content.
func padded(t *testing.T, p string, b []byte, mtime time.Time) {
	t.Helper()
	b = append(b, bytes.Repeat([]byte("\n"), 4096-len(b))...)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// SIGHUP re-reads the certificate files with a real `fence serve`, and
// only the signal can have done it: the new pair is written in place,
// padded to the old size, with the old modification time, so the files
// look unchanged (and handshakes keep the old certificate until the
// signal). The server does not die of SIGHUP and serves on.
func TestProcessServeTLSSIGHUP(t *testing.T) {
	dir := certDir(t, "")
	crt, key := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	read := func(p string) []byte {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	stamp := time.Now().Add(-time.Hour).Truncate(time.Second)
	padded(t, key, read(key), stamp)
	padded(t, crt, read(crt), stamp)
	first := fileSerial(t, crt)
	srv := startServe(t, "--cert-file", crt, "--key-file", key, "--trusted-ca-file", filepath.Join(dir, "ca.crt"), "--client-cert-auth")
	if s := serverSerial(t, srv.url, dir); s != first {
		t.Fatalf("server sent %s, want %s", s, first)
	}

	// The next pair from the same CA, made elsewhere, copied in place.
	next := filepath.Join(t.TempDir(), "next")
	if err := os.MkdirAll(next, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "ca.key"} {
		if err := os.WriteFile(filepath.Join(next, f), read(filepath.Join(dir, f)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	certDir(t, next)
	want := fileSerial(t, filepath.Join(next, "server.crt"))
	padded(t, key, read(filepath.Join(next, "server.key")), stamp)
	padded(t, crt, read(filepath.Join(next, "server.crt")), stamp)
	if fileSerial(t, crt) != want {
		t.Fatal("the padded files do not hold the next certificate")
	}
	// Handshakes more than a second apart: each looks at the files, and
	// sees nothing changed.
	for range 2 {
		if s := serverSerial(t, srv.url, dir); s != first {
			t.Fatalf("before SIGHUP the server sent %s, want %s: it noticed files that look unchanged", s, first)
		}
		deadline := time.Now().Add(1100 * time.Millisecond)
		waitFor(t, "a second to pass", func() bool { return time.Now().After(deadline) })
	}
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server to send the certificate SIGHUP loaded", func() bool {
		select {
		case <-srv.exited:
			t.Fatalf("fence serve exited on SIGHUP: %v", srv.err)
		default:
		}
		return serverSerial(t, srv.url, dir) == want
	})
	t.Setenv("FENCE_CACERT", filepath.Join(dir, "ca.crt"))
	t.Setenv("FENCE_CERT", filepath.Join(dir, "client.crt"))
	t.Setenv("FENCE_KEY", filepath.Join(dir, "client.key"))
	fenceRun(t, "", "--server", strings.TrimPrefix(srv.url, "https://"), "acquire", "after-hup", "--ttl", "30s").want(t, 0, "acquire after SIGHUP")
}
