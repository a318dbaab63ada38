package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"github.com/fenceworks/fence/internal/pemfile"
	"github.com/fenceworks/fence/raftstore"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/fenceworks/fence"
)

// tlsCheckEvery: a handshake looks at the certificate files' size and
// modification time at most this often, and re-reads them when either
// changed (or the file was replaced).
const tlsCheckEvery = time.Second

// TLSEnabled reports whether c serves the client API over TLS.
func (c Config) TLSEnabled() bool { return c.CertFile != "" }

// validateTLS checks the TLS settings as a set and loads their files once
// (Validate): a certificate without its key, a key without a certificate,
// a CA or client-cert-auth without a certificate, client-cert-auth without
// a CA, or a file that does not load are refused naming the setting.
func (c Config) validateTLS() error {
	switch {
	case c.CertFile == "" && c.KeyFile != "":
		return fence.Invalid("config.cert_file", "set with config.key_file (the certificate of that key)", "")
	case c.CertFile != "" && c.KeyFile == "":
		return fence.Invalid("config.key_file", "set with config.cert_file (the key of that certificate)", "")
	case c.CertFile == "" && c.TrustedCAFile != "":
		return fence.Invalid("config.cert_file", "set with config.trusted_ca_file (client certificates are checked over TLS only)", "")
	case c.ClientCertAuth && c.TrustedCAFile == "":
		return fence.Invalid("config.trusted_ca_file", "set with config.client_cert_auth (the CA that signs client certificates)", "")
	case c.CertFile == "":
		return nil
	}
	if _, err := loadKeyPair(c.CertFile, c.KeyFile); err != nil {
		return fence.Invalid("config.cert_file", "a PEM certificate that loads with config.key_file: "+err.Error(), c.CertFile)
	}
	if c.TrustedCAFile != "" {
		if _, err := loadPool(c.TrustedCAFile); err != nil {
			return fence.Invalid("config.trusted_ca_file", "a PEM file of CA certificates: "+err.Error(), c.TrustedCAFile)
		}
	}
	return nil
}

func loadKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := readPEMFile(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readPEMFile(keyFile)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &cert, nil
}

// readPEMFile reads a certificate, key or CA file within pemfile's bounds
// (a regular file of at most pemfile.MaxBytes).
func readPEMFile(file string) ([]byte, error) { return pemfile.Read(file) }

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := readPEMFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in %s", file)
	}
	return pool, nil
}

// fileStamp is what tells a changed file: its size, its modification time
// and the file itself (a file renamed over it is another).
type fileStamp struct {
	info os.FileInfo
}

func stampOf(path string) fileStamp {
	if path == "" {
		return fileStamp{}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{fi}
}

func (a fileStamp) same(b fileStamp) bool {
	if a.info == nil || b.info == nil {
		return a.info == nil && b.info == nil
	}
	return a.info.Size() == b.info.Size() && a.info.ModTime().Equal(b.info.ModTime()) && os.SameFile(a.info, b.info)
}

// tlsFiles is one load of the certificate, key and CA files: the server
// config a handshake gets, and the files' stamps when they were read.
type tlsFiles struct {
	config *tls.Config
	stamps [3]fileStamp // cert, key, CA
	serial string       // the certificate's serial number, for the log
}

// certReloader serves the certificate and CA of Config's files, re-read
// when the files change (looked at, at most once a second, by the next
// handshake) or when Reload is called (SIGHUP). A load that fails keeps
// what was loaded before and logs an error once per change of the files.
// Connections open keep the certificate of their handshake.
type certReloader struct {
	certFile, keyFile, caFile string
	clientAuth                tls.ClientAuthType
	log                       *slog.Logger
	now                       func() time.Time
	what                      string // "TLS" or "peer TLS", in log lines
	nodeID                    string // peer TLS: the node the certificate must name
	metric                    string // metric name prefix: fence_tls or fence_peer_tls

	failures prometheus.Counter // fence_tls_reload_failures_total

	mu          sync.Mutex
	cur         *tlsFiles
	failed      [3]fileStamp // the stamps of the last load that failed
	lastChecked time.Time
}

// newCertReloader loads the files once; an error is the first load's.
func newCertReloader(c Config) (*certReloader, error) {
	r := &certReloader{certFile: c.CertFile, keyFile: c.KeyFile, caFile: c.TrustedCAFile, log: c.Logger, now: time.Now, what: "TLS", metric: "fence_tls"}
	switch {
	case c.ClientCertAuth:
		r.clientAuth = tls.RequireAndVerifyClientCert
	case c.TrustedCAFile != "":
		r.clientAuth = tls.VerifyClientCertIfGiven
	}
	return r.start()
}

// start makes the reloader's metric and loads the files once.
func (r *certReloader) start() (*certReloader, error) {
	r.failures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: r.metric + "_reload_failures_total",
		Help: "Loads of the " + r.what + " certificate, key or CA files that failed (the previous certificate stays in use).",
	})
	f, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cur, r.lastChecked = f, r.now()
	r.warnExpiry(f)
	return r, nil
}

func (r *certReloader) stamps() [3]fileStamp {
	return [3]fileStamp{stampOf(r.certFile), stampOf(r.keyFile), stampOf(r.caFile)}
}

// load reads the files into a server config.
func (r *certReloader) load() (*tlsFiles, error) {
	st := r.stamps()
	cert, err := loadKeyPair(r.certFile, r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("certificate %s with key %s: %w", r.certFile, r.keyFile, err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{*cert},
		NextProtos:   []string{"h2", "http/1.1"},
		MinVersion:   tls.VersionTLS12,
		ClientAuth:   r.clientAuth,
	}
	if r.caFile != "" {
		pool, err := loadPool(r.caFile)
		if err != nil {
			return nil, fmt.Errorf("trusted CA file %s: %w", r.caFile, err)
		}
		cfg.ClientCAs = pool
	}
	return &tlsFiles{config: cfg, stamps: st, serial: cert.Leaf.SerialNumber.Text(16)}, nil
}

func (r *certReloader) warnExpiry(f *tlsFiles) {
	leaf := f.config.Certificates[0].Leaf
	if leaf != nil && r.now().After(leaf.NotAfter) {
		r.log.Warn(r.what+" certificate has expired: the other side will refuse it", "cert_file", r.certFile, "not_after", leaf.NotAfter)
	}
}

// checkValidity refuses, on a reload, a certificate that is not valid now
// (expired, or not valid yet) while the one served now is: swapping it in
// would make every new handshake fail, where keeping the old one serves
// clients until it expires itself. (At start there is nothing better to
// serve: an expired certificate is only warned about.)
func (r *certReloader) checkValidity(f *tlsFiles) error {
	now := r.now()
	valid := func(c *x509.Certificate) bool {
		return c != nil && !now.Before(c.NotBefore) && !now.After(c.NotAfter)
	}
	leaf := f.config.Certificates[0].Leaf
	if valid(leaf) || !valid(r.cur.config.Certificates[0].Leaf) {
		return nil
	}
	if now.After(leaf.NotAfter) {
		return fmt.Errorf("certificate %s expired at %s: keeping the one served now (valid until %s)",
			r.certFile, leaf.NotAfter.UTC().Format(time.RFC3339), r.cur.config.Certificates[0].Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return fmt.Errorf("certificate %s is not valid until %s: keeping the one served now",
		r.certFile, leaf.NotBefore.UTC().Format(time.RFC3339))
}

// checkNodeID refuses a peer certificate that names another node than
// this one (or none): served, it would make this node that other node to
// every peer — or none, and every peer would refuse it. At start Run
// refuses it (checkPeerCertNamesNode); a reload keeps the one served.
func (r *certReloader) checkNodeID(f *tlsFiles) error {
	if r.nodeID == "" {
		return nil
	}
	id, err := raftstore.NodeIDOf(f.config.Certificates[0].Leaf)
	if err != nil {
		return fmt.Errorf("certificate %s: %w: keeping the one served now", r.certFile, err)
	}
	if id != r.nodeID {
		return fmt.Errorf("certificate %s names node %s, not this node's --node-id %s: keeping the one served now", r.certFile, id, r.nodeID)
	}
	return nil
}

// Reload re-reads the files now. It returns the load's error (the old
// certificate stays in use).
func (r *certReloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reloadLocked("signal")
}

func (r *certReloader) reloadLocked(why string) error {
	r.lastChecked = r.now()
	f, err := r.load()
	if err == nil {
		err = r.checkValidity(f)
	}
	if err == nil {
		err = r.checkNodeID(f)
	}
	if err != nil {
		r.failed = r.stamps()
		r.failures.Inc()
		r.log.Error(r.what+" certificate reload failed; still serving the previous certificate", "why", why, "err", err)
		return err
	}
	r.cur, r.failed = f, [3]fileStamp{}
	r.log.Info(r.what+" certificate loaded", "why", why, "cert_file", r.certFile, "serial", f.serial,
		"not_after", f.config.Certificates[0].Leaf.NotAfter)
	r.warnExpiry(f)
	return nil
}

// current returns the config to serve, re-read first when a second has
// passed since the last look and the files changed.
func (r *certReloader) current() *tls.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.now().Sub(r.lastChecked) >= tlsCheckEvery {
		r.lastChecked = r.now()
		st := r.stamps()
		if !sameStamps(st, r.cur.stamps) && !sameStamps(st, r.failed) {
			r.reloadLocked("files changed")
		}
	}
	return r.cur.config
}

func sameStamps(a, b [3]fileStamp) bool {
	return a[0].same(b[0]) && a[1].same(b[1]) && a[2].same(b[2])
}

// collectors are the reloader's metrics: the failed loads, and when the
// certificate served now expires.
func (r *certReloader) collectors() []prometheus.Collector {
	notAfter := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: r.metric + "_cert_not_after_seconds",
		Help: "When the " + r.what + " certificate served now expires, as a Unix time.",
	}, func() float64 {
		r.mu.Lock()
		defer r.mu.Unlock()
		return float64(r.cur.config.Certificates[0].Leaf.NotAfter.Unix())
	})
	return []prometheus.Collector{notAfter, r.failures}
}

// serverConfig is the listener's config: every handshake asks the
// reloader for the current one.
func (r *certReloader) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.current(), nil
		},
	}
}
