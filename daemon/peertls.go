package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/raftstore"
)

// PeerTLSEnabled reports whether the raft port speaks mutual TLS.
func (c Config) PeerTLSEnabled() bool { return c.PeerCertFile != "" }

// validatePeerTLS checks the peer TLS settings as a set and loads their
// files once: the three go together and the certificate must name a node
// (raftstore.NodeIDOf). That they need cluster mode is New's check
// (ErrPeerTLSAlone): `fence serve` validates before it adds the cluster
// flags.
func (c Config) validatePeerTLS() error {
	set := 0
	for _, f := range []string{c.PeerCertFile, c.PeerKeyFile, c.PeerTrustedCAFile} {
		if f != "" {
			set++
		}
	}
	switch {
	case set == 0:
		return nil
	case c.PeerCertFile == "":
		return fence.Invalid("config.peer_cert_file", "set with config.peer_key_file and config.peer_trusted_ca_file (peer TLS needs all three)", "")
	case c.PeerKeyFile == "":
		return fence.Invalid("config.peer_key_file", "set with config.peer_cert_file and config.peer_trusted_ca_file (peer TLS needs all three)", "")
	case c.PeerTrustedCAFile == "":
		return fence.Invalid("config.peer_trusted_ca_file", "set with config.peer_cert_file and config.peer_key_file (peer TLS is mutual: the CA that signs every node's certificate)", "")
	}
	cert, err := loadKeyPair(c.PeerCertFile, c.PeerKeyFile)
	if err != nil {
		return fence.Invalid("config.peer_cert_file", "a PEM certificate that loads with config.peer_key_file: "+err.Error(), c.PeerCertFile)
	}
	if _, err := raftstore.NodeIDOf(cert.Leaf); err != nil {
		return fence.Invalid("config.peer_cert_file", "a certificate with the URI SAN "+raftstore.NodeURIScheme+"://NODE-ID (fence cert --node-id): "+err.Error(), c.PeerCertFile)
	}
	if _, err := loadPool(c.PeerTrustedCAFile); err != nil {
		return fence.Invalid("config.peer_trusted_ca_file", "a PEM file of CA certificates: "+err.Error(), c.PeerTrustedCAFile)
	}
	return nil
}

// ErrPeerTLSAlone: peer TLS settings without a raft port (New).
var ErrPeerTLSAlone = errors.New("the peer TLS files are for the raft port: a single node (no --raft-addr) has none")

// PeerCertNodeError: the peer certificate names another node than this
// one. Run refuses to start (its peers would refuse it: a connection is
// the node its certificate names).
type PeerCertNodeError struct {
	CertFile, CertNodeID, NodeID string
}

func (e *PeerCertNodeError) Error() string {
	return "--peer-cert-file " + e.CertFile + " names node " + e.CertNodeID + " (URI SAN " + raftstore.NodeURI(e.CertNodeID).String() +
		"), not this node's --node-id " + e.NodeID + ": give this node its own certificate (fence cert --node-id " + e.NodeID + ")"
}

// checkPeerCertNamesNode refuses a peer certificate of another node.
func (c Config) checkPeerCertNamesNode() error {
	if !c.PeerTLSEnabled() {
		return nil
	}
	cert, err := loadKeyPair(c.PeerCertFile, c.PeerKeyFile)
	if err != nil {
		return err
	}
	id, err := raftstore.NodeIDOf(cert.Leaf)
	if err != nil {
		return err
	}
	if id != c.NodeID {
		return &PeerCertNodeError{CertFile: c.PeerCertFile, CertNodeID: id, NodeID: c.NodeID}
	}
	return nil
}

// newPeerCertReloader serves the peer certificate and CA of c's files,
// re-read as the client port's are.
func newPeerCertReloader(c Config) (*certReloader, error) {
	r := &certReloader{certFile: c.PeerCertFile, keyFile: c.PeerKeyFile, caFile: c.PeerTrustedCAFile, log: c.Logger, now: time.Now, nodeID: c.NodeID,
		what: "peer TLS", metric: "fence_peer_tls", clientAuth: tls.RequireAndVerifyClientCert}
	return r.start()
}

// peerCerts is the raft port's raftstore.PeerCerts.
func (r *certReloader) peerCerts() (tls.Certificate, *x509.CertPool) {
	cfg := r.current()
	return cfg.Certificates[0], cfg.ClientCAs
}
