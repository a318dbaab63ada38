package raftstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/fenceworks/fence/internal/certgen"
)

// peerCert is a peer certificate of ca naming node id.
func peerCert(t *testing.T, ca *certgen.CA, id string) tls.Certificate {
	t.Helper()
	c, err := ca.TLSCertificate(certgen.Options{CommonName: id, URIs: []*url.URL{NodeURI(id)}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Which node a raft port under peer TLS admits, and for how long. Closed
// until it knows its configuration (a node whose data dir holds one): a
// spare certificate of the CA is refused in the moment of the node's
// start. Open while empty (a node that started empty and waits to be
// added): any node of the CA. A member only once the configuration is
// known. And an accepted connection ends when its node leaves the
// configuration (SweepPeers), so a removed member keeps no door open.
func TestPeerAdmission(t *testing.T) {
	ca, err := certgen.NewCA("peer CA", 0)
	if err != nil {
		t.Fatal(err)
	}
	mux, err := Listen("127.0.0.1:0", "", WithPeerTLS(func() (tls.Certificate, *x509.CertPool) { return peerCert(t, ca, "n1"), ca.Pool() }),
		PeersClosedUntilKnown(), WithMuxLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer mux.Close()
	api := mux.APIListener()
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := api.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	ctx := context.Background()
	// dial connects as node id and reports whether the mux handed the
	// connection out (the client's end, to watch) or refused it (nil).
	dial := func(id string) net.Conn {
		t.Helper()
		c, err := DialAPITLS(ctx, mux.Addr(), peerCert(t, ca, id), ca.Pool())
		if err != nil {
			return nil // refused in the handshake
		}
		// Under TLS 1.3 the client's handshake ends before the server
		// has judged its certificate: a refusal arrives as the first
		// read's error; an admitted connection is handed out.
		read := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 1))
			read <- err
		}()
		select {
		case a := <-accepted:
			if got := peerIDOf(a); got != id {
				t.Fatalf("handed out a connection of %s, dialed as %s", got, id)
			}
			t.Cleanup(func() { a.Close() })
			return c
		case <-read:
			c.Close()
			return nil
		}
	}
	closedByMux := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(time.Minute))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF || err != nil && !isTimeout(err)
	}

	if c := dial("n9"); c != nil {
		t.Fatal("a node of the CA admitted before the configuration is known (closed until known)")
	}
	mux.OpenWhileEmpty(true)
	spare := dial("n9")
	if spare == nil {
		t.Fatal("a node of the CA refused by a node open while empty (waiting to be added)")
	}
	if mux.SweepPeers() != 0 {
		t.Fatal("the sweep closed a connection while the configuration is empty and open")
	}

	members := []Member{{ID: "n1", Addr: mux.Addr()}, {ID: "n2", Addr: "127.0.0.1:1"}}
	mux.SetMembers(func() []Member { return members })
	if c := dial("n9"); c != nil {
		t.Fatal("a node that is not a member admitted once the configuration is known")
	}
	n2 := dial("n2")
	if n2 == nil {
		t.Fatal("member n2 refused")
	}
	if n := mux.SweepPeers(); n != 1 {
		t.Fatalf("the sweep closed %d connections, want 1 (n9's, accepted while the configuration was empty)", n)
	}
	if !closedByMux(spare) {
		t.Fatal("n9's connection still open after the sweep")
	}
	// n2 is removed: its open connection ends with its membership.
	members = members[:1]
	if n := mux.SweepPeers(); n != 1 || !closedByMux(n2) {
		t.Fatalf("after n2's removal the sweep closed %d connections (want 1, n2's)", n)
	}
	if mux.AdmitsPeer("n2") || !mux.AdmitsPeer("n1") {
		t.Fatal("AdmitsPeer does not follow the configuration")
	}
	// A configuration read that fails (no members) on a node that has
	// seen one: closed again.
	mux.OpenWhileEmpty(false)
	members = nil
	if mux.AdmitsPeer("n1") {
		t.Fatal("an unknown configuration admits a node after OpenWhileEmpty(false)")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// peerIDOf is the node id of an accepted connection (through countedConn).
func peerIDOf(c net.Conn) string {
	for {
		switch x := c.(type) {
		case interface{ PeerNodeID() string }:
			return x.PeerNodeID()
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return ""
		}
	}
}
