package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/internal/certgen"
	"github.com/fenceworks/fence/raftstore"
)

// fence cert makes a CA once and keeps it: run again, it issues new
// certificates from the same CA. The server certificate names 127.0.0.1,
// ::1, localhost and the hosts given, is ECDSA P-256 and verifies against
// the CA for server auth; the client's verifies for client auth; keys are
// 0600.
func TestCertMakesCAOnceAndVerifiableCertificates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if _, err := makeCerts(dir, []string{"fence-1.internal", "10.0.0.5"}, "server", "client", time.Hour); err != nil {
		t.Fatal(err)
	}
	ca1, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := tls.LoadX509KeyPair(filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca1)
	leaf := first.Leaf
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "fence-1.internal", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("server certificate for fence-1.internal: %v", err)
	}
	for _, h := range []string{"127.0.0.1", "::1", "10.0.0.5", "localhost"} {
		if err := leaf.VerifyHostname(h); err != nil {
			t.Errorf("server certificate does not name %s: %v", h, err)
		}
	}
	if leaf.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("key algorithm %v, want ECDSA", leaf.PublicKeyAlgorithm)
	}
	cl, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("client certificate: %v", err)
	}
	for _, k := range []string{"ca.key", "server.key", "client.key"} {
		fi, err := os.Stat(filepath.Join(dir, k))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", k, fi.Mode(), err)
		}
	}

	files, err := makeCerts(dir, nil, "server", "client", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(files, filepath.Join(dir, "ca.crt")) {
		t.Errorf("the second run rewrote the CA: %v", files)
	}
	ca2, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if !bytes.Equal(ca1, ca2) {
		t.Fatal("the CA changed on the second run")
	}
	second, err := tls.LoadX509KeyPair(filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"))
	if err != nil {
		t.Fatal(err)
	}
	if second.Leaf.SerialNumber.Cmp(leaf.SerialNumber) == 0 {
		t.Fatal("the second run kept the server certificate")
	}
	if _, err := second.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost"}); err != nil {
		t.Fatalf("the reissued certificate is not from the same CA: %v", err)
	}
}

// A directory holding ca.crt without ca.key (the key kept off this host)
// is refused, not given a new CA over the old certificate: that made
// every certificate of the old CA untrusted wherever ca.crt is trusted.
func TestCertKeepsACAWhoseKeyIsElsewhere(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if _, err := makeCerts(dir, nil, "server", "client", time.Hour); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	if _, err := makeCerts(dir, nil, "server2", "", time.Hour); err == nil {
		t.Fatal("fence cert with ca.crt but no ca.key made certificates")
	}
	after, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if !bytes.Equal(before, after) {
		t.Fatal("fence cert replaced ca.crt")
	}
	if _, err := os.Stat(filepath.Join(dir, "server2.crt")); err == nil {
		t.Fatal("fence cert issued server2.crt without the CA's key")
	}
}

// Two CAs made by fence cert have different names, so a client checking
// against the wrong one names which one it had (they were all "Fence test
// CA").
func TestCertCAsHaveTheirOwnNames(t *testing.T) {
	var names []string
	for range 2 {
		dir := t.TempDir()
		if _, err := makeCerts(dir, nil, "", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		ca, err := certgen.LoadCA(dir)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, ca.Cert.Subject.CommonName)
	}
	if names[0] == names[1] || !strings.HasPrefix(names[0], "Fence test CA ") {
		t.Fatalf("CA names %q: want two different names starting with %q", names, "Fence test CA ")
	}
}

// fence cert --node-id issues, from the same CA, a peer certificate per
// node id: peer-ID.crt and peer-ID.key, naming the node by the URI SAN
// fence-node://ID (what the raft port checks), good for server and client
// auth (a node dials its peers and is dialed), key 0600.
func TestCertMakesPeerCertificatesNamingNodes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if _, err := makeCerts(dir, nil, "server", "", time.Hour, "n1", "n2"); err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	for _, id := range []string{"n1", "n2"} {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "peer-"+id+".crt"), filepath.Join(dir, "peer-"+id+".key"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := raftstore.NodeIDOf(pair.Leaf)
		if err != nil || got != id {
			t.Errorf("peer-%s.crt names node %q (%v), want %s", id, got, err, id)
		}
		for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
				t.Errorf("peer-%s.crt for usage %v: %v", id, u, err)
			}
		}
		if fi, err := os.Stat(filepath.Join(dir, "peer-"+id+".key")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("peer-%s.key: %v, want mode 0600", id, err)
		}
	}
	var out, errOut bytes.Buffer
	if code := certCmd(&globals{}, []string{"--dir", dir, "--node-id", "a/b"}, &out, &errOut); code != exitUsage {
		t.Errorf("fence cert --node-id a/b: exit %d, want %d (%s)", code, exitUsage, errOut.String())
	}
}
