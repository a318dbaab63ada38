package raftstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync/atomic"
	"time"
)

// NodeURIScheme is the scheme of the URI SAN that names a node in its peer
// certificate: fence-node://NODE-ID. With peer TLS (WithPeerTLS), a
// connection to or from the raft port is the node its certificate names,
// and no other.
const NodeURIScheme = "fence-node"

// NodeURI is the URI SAN a peer certificate of node id carries.
func NodeURI(id string) *url.URL { return &url.URL{Scheme: NodeURIScheme, Host: id} }

// NodeIDOf is the node id a peer certificate names: its one fence-node://
// URI SAN. A certificate with none, or with two, names no node.
func NodeIDOf(cert *x509.Certificate) (string, error) {
	if cert == nil {
		return "", errors.New("no certificate")
	}
	id := ""
	for _, u := range cert.URIs {
		if u.Scheme != NodeURIScheme {
			continue
		}
		if id != "" {
			return "", fmt.Errorf("the certificate names two nodes (%s and %s)", id, u.Host)
		}
		if u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
			return "", fmt.Errorf("the certificate's URI %s is not %s://NODE-ID", u, NodeURIScheme)
		}
		id = u.Host
	}
	if id == "" {
		return "", fmt.Errorf("the certificate names no node (no URI SAN %s://NODE-ID)", NodeURIScheme)
	}
	return id, nil
}

// PeerCerts returns the raft port's certificate and the pool of CAs that
// sign peer certificates, as they are now (a reloader re-reads the files):
// every handshake asks.
type PeerCerts func() (tls.Certificate, *x509.CertPool)

// WithPeerTLS makes every connection of the raft port, accepted and
// dialed, raft and API alike, mutual TLS: both sides present a certificate
// signed by a CA of the pool that names a node (NodeIDOf). An accepted
// connection whose node is not admitted (AdmitsPeer: a member of the
// configuration; see peer_admission.go), a dialed one whose node is not
// the member at the address dialed, are closed, and the refusal logged at
// most once a second (PeerRefusals counts them); an accepted connection is
// closed when its node leaves the configuration (SweepPeers).
func WithPeerTLS(certs PeerCerts) MuxOption {
	return func(x *Mux) { x.peerCerts = certs }
}

// Member is one server of the raft configuration as the mux sees it.
type Member struct{ ID, Addr string }

// SetMembers gives the mux the raft configuration, read at every peer TLS
// handshake (nil: unknown).
func (m *Mux) SetMembers(fn func() []Member) {
	if fn == nil {
		m.members.Store(nil)
		return
	}
	m.members.Store(&fn)
}

func (m *Mux) currentMembers() []Member {
	if p := m.members.Load(); p != nil {
		return (*p)()
	}
	return nil
}

// PeerTLS reports whether the raft port speaks mutual TLS.
func (m *Mux) PeerTLS() bool { return m.peerCerts != nil }

// PeerRefusals is how many peer connections (accepted or dialed) were
// refused by peer TLS: no or a bad certificate, another CA, a node that is
// not a member, or not the one dialed.
func (m *Mux) PeerRefusals() uint64 { return m.peerRefused.Load() }

// verifyPeer checks the chain of a peer's certificate against the CA pool
// for usage, and returns the node id it names.
func verifyPeer(rawCerts [][]byte, pool *x509.CertPool, usage x509.ExtKeyUsage) (string, error) {
	if len(rawCerts) == 0 {
		return "", errors.New("no certificate presented")
	}
	certs := make([]*x509.Certificate, len(rawCerts))
	for i, raw := range rawCerts {
		c, err := x509.ParseCertificate(raw)
		if err != nil {
			return "", fmt.Errorf("certificate does not parse: %w", err)
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return "", fmt.Errorf("certificate not from the peer CA: %w", err)
	}
	return NodeIDOf(certs[0])
}

// acceptTLS runs the server side of the handshake on an accepted
// connection: the client must send a certificate of the pool naming a
// member. It returns the connection to hand out, or an error (c closed).
func (m *Mux) acceptTLS(c net.Conn) (net.Conn, error) {
	cert, pool := m.peerCerts()
	var id string
	var why error
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAnyClientCert, // checked below, with the node id
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			got, err := verifyPeer(raw, pool, x509.ExtKeyUsageClientAuth)
			if err == nil && !m.AdmitsPeer(got) {
				err = fmt.Errorf("node %s is not a member of the configuration", got)
			}
			id, why = got, err
			return err
		},
	}
	tc := tls.Server(c, cfg)
	c.SetDeadline(time.Now().Add(headerTimeout))
	if err := tc.Handshake(); err != nil {
		if why == nil {
			why = err
		}
		select {
		case <-m.closed: // Close cut the handshake short: no refusal
		default:
			m.logPeerRefusal("accepted", c.RemoteAddr().String(), id, why)
		}
		c.Close()
		return nil, why
	}
	c.SetDeadline(time.Time{})
	pc := &peerConn{Conn: tc, id: id}
	m.track(pc)
	return pc, nil
}

// expectedAt is the member id at raft address addr ("" when no member has
// that address: a node about to be added, whose status call checks the id
// it claims against its certificate).
func (m *Mux) expectedAt(addr string) string {
	for _, s := range m.currentMembers() {
		if s.Addr == addr {
			return s.ID
		}
	}
	return ""
}

// dialTLS runs the client side of the handshake on a dialed connection to
// addr: the server must present a certificate of the pool naming the
// member at addr (any node when addr is no member's).
func (m *Mux) dialTLS(ctx context.Context, c net.Conn, addr string) (net.Conn, error) {
	cert, pool := m.peerCerts()
	want := m.expectedAt(addr)
	var id string
	var why error
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		// The server is checked below by its node id, not a host name:
		// the address dialed is what the raft configuration records.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			got, err := verifyPeer(raw, pool, x509.ExtKeyUsageServerAuth)
			if err == nil && want != "" && got != want {
				err = fmt.Errorf("the node at %s is %s by its certificate, not member %s", addr, got, want)
			}
			id, why = got, err
			return err
		},
	}
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		// A refusal: this side's check failed, or the other side's (a TLS
		// alert); a connection cut or timed out is no refusal (the peer
		// may be stopping).
		if why != nil || errors.As(err, new(tls.AlertError)) {
			if why == nil {
				why = err
			}
			m.logPeerRefusal("dialed", addr, id, why)
		} else {
			why = err
		}
		c.Close()
		return nil, fmt.Errorf("raftstore: peer TLS with %s: %w", addr, why)
	}
	return &peerConn{Conn: tc, id: id}, nil
}

// logPeerRefusal counts a refused peer connection and logs it, at most
// one line a second (with the count since the last line).
func (m *Mux) logPeerRefusal(dir, remote, id string, err error) {
	m.peerRefused.Add(1)
	m.refusedSinceLog.Add(1)
	m.mu.Lock()
	now := time.Now()
	if now.Sub(m.lastPeerLog) < time.Second {
		m.mu.Unlock()
		return
	}
	m.lastPeerLog = now
	m.mu.Unlock()
	n := m.refusedSinceLog.Swap(0)
	args := []any{"connection", dir, "remote", remote, "err", err.Error(), "refused_since_last_line", n}
	if id != "" {
		args = append(args, "cert_node_id", id)
	}
	m.log.Warn("raft port: peer connection refused (peer TLS)", args...)
}

// peerTLSState is the mux's peer TLS state (fields of Mux).
type peerTLSState struct {
	peerCerts       PeerCerts
	members         atomic.Pointer[func() []Member]
	peerRefused     atomic.Uint64
	refusedSinceLog atomic.Uint64
	lastPeerLog     time.Time // m.mu
	peerAdmission             // m.mu (peer_admission.go)
}

// DialAPITLS connects to the Fence API side of the raft port at raftAddr
// over peer TLS with cert, trusting roots (a caller without a mux: tests
// reaching a node as its peers do).
func DialAPITLS(ctx context.Context, raftAddr string, cert tls.Certificate, roots *x509.CertPool) (net.Conn, error) {
	c, err := new(net.Dialer).DialContext(ctx, "tcp", raftAddr)
	if err != nil {
		return nil, err
	}
	m := &Mux{log: slog.New(slog.DiscardHandler), peerTLSState: peerTLSState{peerCerts: func() (tls.Certificate, *x509.CertPool) { return cert, roots }}}
	tc, err := m.dialTLS(ctx, c, raftAddr)
	if err != nil {
		return nil, err
	}
	if _, err := tc.Write([]byte{HeaderAPI}); err != nil {
		tc.Close()
		return nil, err
	}
	return tc, nil
}
