package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/internal/certgen"
	"github.com/fenceworks/fence/testkit/testutil"
)

// The peer TLS settings are checked as a set before anything opens, each
// refusal naming its setting: the three files go together and the
// certificate must name a node (fence-node://ID); New refuses them on a
// single node (ErrPeerTLSAlone). Run also
// refuses a certificate naming another node than --node-id
// (*PeerCertNodeError): its peers would take it for that node.
func TestPeerTLSConfigValidate(t *testing.T) {
	p := newPeerPKI(t)
	cert, key := p.write(t, p.ca, "n1", "n1")
	noID := filepath.Join(p.dir, "noid")
	c, k, _, err := p.ca.Issue(certgen.Options{CommonName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(noID+".crt", c, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(noID+".key", k, 0o600); err != nil {
		t.Fatal(err)
	}
	raft := ClusterConfig{RaftAddr: "127.0.0.1:0", Bootstrap: true}
	for _, tc := range []struct {
		name      string
		mod       func(*Config)
		field, in string
	}{
		{"cert alone", func(c *Config) { c.PeerCertFile = cert }, "config.peer_key_file", "all three"},
		{"no CA", func(c *Config) { c.PeerCertFile, c.PeerKeyFile = cert, key }, "config.peer_trusted_ca_file", "mutual"},
		{"CA alone", func(c *Config) { c.PeerTrustedCAFile = p.caFile }, "config.peer_cert_file", "all three"},
		{"a certificate naming no node", func(c *Config) {
			c.PeerCertFile, c.PeerKeyFile, c.PeerTrustedCAFile = noID+".crt", noID+".key", p.caFile
		}, "config.peer_cert_file", "fence-node://NODE-ID"},
		{"a CA file that does not load", func(c *Config) { c.PeerCertFile, c.PeerKeyFile, c.PeerTrustedCAFile = cert, key, key }, "config.peer_trusted_ca_file", "CA certificates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Cluster = raft
			tc.mod(&c)
			var inv *fence.InvalidError
			if err := c.Validate(); !errors.As(err, &inv) || inv.Field != tc.field || !strings.Contains(err.Error(), tc.in) {
				t.Fatalf("Validate = %v, want an InvalidError for %s saying %q", err, tc.field, tc.in)
			}
		})
	}
	alone := DefaultConfig()
	alone.DataDir = t.TempDir()
	alone.PeerCertFile, alone.PeerKeyFile, alone.PeerTrustedCAFile = cert, key, p.caFile
	if _, err := New(alone); !errors.Is(err, ErrPeerTLSAlone) {
		t.Fatalf("New of a single node with peer TLS files = %v, want ErrPeerTLSAlone", err)
	}
	good := DefaultConfig()
	good.NodeID, good.Cluster = "n1", raft
	good.PeerCertFile, good.PeerKeyFile, good.PeerTrustedCAFile = cert, key, p.caFile
	if err := good.Validate(); err != nil {
		t.Fatalf("a good peer TLS config: %v", err)
	}
	other := good
	other.NodeID, other.DataDir, other.Listen = "n2", t.TempDir(), "127.0.0.1:0"
	other.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	var e *PeerCertNodeError
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard) // a Run that serves returns nil then
	defer cancel()
	if err := Run(ctx, other); !errors.As(err, &e) || e.CertNodeID != "n1" || e.NodeID != "n2" || !strings.Contains(err.Error(), "fence cert --node-id n2") {
		t.Fatalf("Run with n1's certificate as n2 = %v, want a *PeerCertNodeError naming both", err)
	}
}

// raftSerial handshakes with the raft port at addr as member cert and
// returns the serial of the certificate the port presents.
func raftSerial(t *testing.T, addr string, cert tls.Certificate) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Text(16)
}

// The peer certificate is re-read without a restart, as the client port's:
// replaced files are noticed by a later handshake, ReloadTLS (SIGHUP)
// takes them at once, a junk file or another node's certificate is refused
// and the last good pair kept —
// and the node goes on leading with its raft connections through it all.
func TestPeerTLSReload(t *testing.T) {
	p := newPeerPKI(t)
	cfg := DefaultConfig()
	cfg.NodeID, cfg.DataDir = "n1", t.TempDir()
	cfg.Cluster = ClusterConfig{RaftAddr: testutil.FreeAddr(t), Bootstrap: true}
	cfg.PeerCertFile, cfg.PeerKeyFile = p.write(t, p.ca, "n1", "n1")
	cfg.PeerTrustedCAFile = p.caFile
	var logs testutil.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Serve(ln) }()
	defer func() {
		d.Close()
		<-done
	}()
	member := tlsCert(t, p.ca, "n1") // n1 is the only member: its id may come in
	addr := cfg.Cluster.RaftAddr
	serial := func() string { return raftSerial(t, addr, member) }
	first := serial()

	// Replaced files: a later handshake (at most a second on) serves them.
	rotate := func() string {
		t.Helper()
		c, k, leaf, err := p.ca.Issue(peerOptions("n1"))
		if err != nil {
			t.Fatal(err)
		}
		if err := certgen.WriteFile(cfg.PeerKeyFile, k, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := certgen.WriteFile(cfg.PeerCertFile, c, 0o644); err != nil {
			t.Fatal(err)
		}
		return leaf.SerialNumber.Text(16)
	}
	second := rotate()
	until(t, "the raft port serves the replaced peer certificate", func() bool { return serial() == second })
	if first == second {
		t.Fatal("the rotation issued the same serial")
	}
	// ReloadTLS takes new files at once.
	third := rotate()
	if err := d.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if got := serial(); got != third {
		t.Fatalf("after ReloadTLS the raft port serves %s, want %s", got, third)
	}
	// Junk: refused, the last good pair kept, an error logged.
	if err := os.WriteFile(cfg.PeerCertFile, []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.ReloadTLS(); err == nil {
		t.Fatal("ReloadTLS took a junk peer certificate")
	}
	if got := serial(); got != third {
		t.Fatalf("after a junk file the raft port serves %s, want the last good %s", got, third)
	}
	if !strings.Contains(logs.String(), "peer TLS certificate reload failed") {
		t.Errorf("no error logged for the junk peer certificate:\n%s", logs.String())
	}
	// Another node's certificate of the same CA (n2's files copied over
	// n1's by mistake, or on purpose): refused, n1's kept.
	c2, k2, _, err := p.ca.Issue(peerOptions("n2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := certgen.WriteFile(cfg.PeerKeyFile, k2, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := certgen.WriteFile(cfg.PeerCertFile, c2, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.ReloadTLS(); err == nil || !strings.Contains(err.Error(), "names node n2, not this node's --node-id n1") {
		t.Fatalf("ReloadTLS of n2's certificate on n1: %v, want refused naming n2 and n1", err)
	}
	if got := serial(); got != third {
		t.Fatalf("after another node's certificate the raft port serves %s, want the last good %s", got, third)
	}
	// The node serves once it leads and has caught up since its start
	// (on a loaded machine that can come after the rotations): a
	// rotation that broke its raft port would keep it from ever being
	// ready.
	until(t, "n1 ready (leading, caught up)", d.Ready)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if _, err := d.Service().Acquire(ctx, fence.AcquireRequest{Name: "after-rotation", Owner: "o", TTL: time.Minute}); err != nil {
		t.Fatalf("Acquire after the rotations: %v", err)
	}
}
