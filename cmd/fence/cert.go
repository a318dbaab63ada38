package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fenceworks/fence/internal/certgen"
	"github.com/fenceworks/fence/raftstore"
)

// certCmd makes a test CA (once) and, signed by it, a server certificate
// for 127.0.0.1, ::1, localhost and the --hosts given, and a client
// certificate, into --dir: what a test cluster needs for --cert-file,
// --key-file, --trusted-ca-file and the CLI's --cacert, --cert, --key,
// without other tools; with --node-id, a peer certificate per node id
// (peer-ID.crt, peer-ID.key: the URI SAN fence-node://ID, server and
// client usage) for --peer-cert-file and --peer-key-file. Run again, it keeps the CA and issues new
// certificates from it (a rotation: fence serve re-reads them). ECDSA
// P-256; keys are written 0600; every file is replaced in one rename.
func certCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	flags := newLocalFlagSet("cert", "[--dir DIR] [--hosts HOST,...] [--server-name NAME] [--client-name NAME] [--node-id ID,...] [--valid D]", g, stderr)
	dir := flags.String("dir", "fence-certs", "`DIR` for ca.crt, ca.key, NAME.crt, NAME.key (made if missing; an existing CA is kept)")
	hosts := flags.String("hosts", "", "`HOST,...`: more names and addresses for the server certificate (127.0.0.1, ::1 and localhost are always in it)")
	serverName := flags.String("server-name", "server", "file name (and CN) of the server certificate; empty: none")
	clientName := flags.String("client-name", "client", "file name (and CN) of the client certificate; empty: none")
	nodeIDs := flags.String("node-id", "", "`ID,...`: also a peer certificate for each node id (peer-ID.crt, peer-ID.key, naming fence-node://ID) for the raft port's --peer-cert-file")
	valid := duration(flags, "valid", 365*24*time.Hour, "how long the new certificates (and a new CA) are valid")
	if _, err := parseExact(flags, args); err != nil {
		return usageExit(err)
	}
	for _, n := range []string{*serverName, *clientName} {
		if n == "ca" || strings.ContainsAny(n, `/\`) {
			return fail(g, stdout, stderr, &usageError{fmt.Sprintf("cert: a certificate name must be a file name other than ca, got %q", n)})
		}
	}
	ids := splitHosts(*nodeIDs)
	for _, id := range ids {
		if strings.ContainsAny(id, `/\`) || raftstore.NodeURI(id).String() != raftstore.NodeURIScheme+"://"+id {
			return fail(g, stdout, stderr, &usageError{fmt.Sprintf("cert: --node-id %q: a node id named by a peer certificate must be a host name (letters, digits, '-', '.')", id)})
		}
	}
	if *valid <= 0 {
		return fail(g, stdout, stderr, &usageError{"cert: --valid must be more than 0"})
	}
	files, err := makeCerts(*dir, splitHosts(*hosts), *serverName, *clientName, *valid, ids...)
	if err != nil {
		return fail(g, stdout, stderr, fmt.Errorf("cert: %w", err))
	}
	emit(g, stdout, "wrote "+strings.Join(files, " "), map[string]any{"files": files})
	return exitOK
}

func splitHosts(s string) []string {
	var out []string
	for _, h := range strings.Split(s, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// makeCerts writes the CA (unless dir has one) and the certificates (a
// peer certificate for each of nodeIDs); it returns the files written.
func makeCerts(dir string, hosts []string, serverName, clientName string, valid time.Duration, nodeIDs ...string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var files []string
	write := func(name string, data []byte, mode os.FileMode) error {
		p := filepath.Join(dir, name)
		files = append(files, p)
		return certgen.WriteFile(p, data, mode)
	}
	ca, err := certgen.LoadCA(dir)
	if errors.Is(err, fs.ErrNotExist) {
		// A CA certificate without its key (kept off this host, as the
		// docs advise) is not replaced: a new CA would make every
		// certificate it signed untrusted wherever ca.crt is trusted.
		for _, f := range []string{"ca.crt", "ca.key"} {
			if _, serr := os.Stat(filepath.Join(dir, f)); serr == nil {
				return nil, fmt.Errorf("%s holds %s but not the other half of the CA: fence cert will not replace a CA; give the directory that holds ca.key too, or another directory for a new CA", dir, f)
			}
		}
		// A name of its own (a random suffix): a client given another
		// `fence cert` CA then names which one it was checking against.
		if ca, err = certgen.NewCA("Fence test CA "+randomSuffix(), valid); err != nil {
			return nil, err
		}
		key, err := ca.KeyPEM()
		if err != nil {
			return nil, err
		}
		if err := write("ca.key", key, 0o600); err != nil {
			return nil, err
		}
		if err := write("ca.crt", ca.CertPEM(), 0o644); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("the CA in %s: %w", dir, err)
	}
	issue := func(name string, o certgen.Options) error {
		if name == "" {
			return nil
		}
		o.CommonName, o.Valid = name, valid
		c, k, _, err := ca.Issue(o)
		if err != nil {
			return err
		}
		// The key first: a server that reads the pair between the two
		// renames refuses the mismatch and keeps its old pair until the
		// certificate follows.
		if err := write(name+".key", k, 0o600); err != nil {
			return err
		}
		return write(name+".crt", c, 0o644)
	}
	if err := issue(serverName, certgen.Options{Server: true, Hosts: append([]string{"127.0.0.1", "::1", "localhost"}, hosts...)}); err != nil {
		return nil, err
	}
	if err := issue(clientName, certgen.Options{Client: true}); err != nil {
		return nil, err
	}
	for _, id := range nodeIDs {
		// Both usages: a node dials its peers and is dialed by them. The
		// hosts are for tools that check them; peers check the node id.
		o := certgen.Options{URIs: []*url.URL{raftstore.NodeURI(id)}, Hosts: append([]string{"127.0.0.1", "::1", "localhost"}, hosts...)}
		if err := issue("peer-"+id, o); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// randomSuffix is 8 random hex digits.
func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
