package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/cluster"
	"github.com/fenceworks/fence/daemon"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/raftstore"
)

// Test-only environment variables of `fence serve` (documented as such in
// docs/operations.md): the chaos harness and the system tests use them to
// put a fault proxy on every peer link and to skew a node's clocks. They are
// read here and nowhere else.
const (
	envDialMap     = "FENCE_TEST_DIAL_MAP"     // "raftaddr=proxyaddr,...": outgoing dials to raftaddr go to proxyaddr
	envClockOffset = "FENCE_TEST_CLOCK_OFFSET" // e.g. "+1h": added to every wall-clock reading of the node
	envClockRate   = "FENCE_TEST_CLOCK_RATE"   // e.g. "1.005": scales the leader clock's elapsed time
)

// serveUsageNotes follow serve's flags in its --help.
const serveUsageNotes = `
A cluster: start the first node with --raft-addr and --bootstrap, the others
with --raft-addr and --join URL (any running node's client URL), or every node
with the same --peers list. A restarted node rejoins with its data dir:
--bootstrap and --peers are ignored once the dir holds raft state, and --join
asks nobody while the node is a member. fence members lists and changes the
members. A data dir made by fence restore forms its cluster by itself: start
it without --join, --peers or --bootstrap (refused until its first start),
then the others with empty data dirs and --join.

TLS: --cert-file and --key-file serve the client port (API, health, metrics)
over TLS; --trusted-ca-file checks client certificates, --client-cert-auth
requires one. The files are re-read when they change (a handshake looks at
most once a second) and on SIGHUP; a load that fails keeps the old
certificate and logs an error. fence cert makes a test CA and certificates.

Environment: every flag above but the global ones (--server, --json,
--timeout) can be set by the variable named with it, FENCE_ and the flag in
upper case with _ for - (--max-ttl: FENCE_MAX_TTL=1h). A flag on the command
line wins over its variable; an empty variable counts as unset; a value the
flag refuses stops the start (exit 2) naming the variable. A FENCE_ variable
no flag reads is logged as a warning (a typo?).

Logs go to stderr, one record a line (--log-format text or json): one line
per leader change ("leader changed": node_id, term, leader_id), one per
refused start ("start refused": the reason) before exiting; at --log-level
debug also every refused request ("request refused": procedure, reason).

Test-only environment (for the chaos harness and the system tests; never set
in production; a set one is logged as a warning):
  FENCE_TEST_DIAL_MAP=raftaddr=proxyaddr,...  outgoing dials to raftaddr go to proxyaddr
  FENCE_TEST_CLOCK_OFFSET=+1h                 added to every wall-clock reading of the node
  FENCE_TEST_CLOCK_RATE=1.005                 scales the leader clock's elapsed time
`

// clusterFlags are serve's cluster flags (rows of serveFlagTable).
type clusterFlags struct {
	nodeID, raftAddr, raftAdvertise, join, peers string
	bootstrap                                    bool
	heartbeat, election, leaderLease, commit     time.Duration
}

// config checks the cluster flags together and returns the daemon's
// cluster config, and the test hooks the environment sets (testHooks).
// Every error names the flag (or variable) at fault.
func (f *clusterFlags) config(getenv func(string) string) (daemon.ClusterConfig, daemon.Hooks, error) {
	c, err := f.clusterConfig()
	if err != nil {
		return c, daemon.Hooks{}, err
	}
	h, err := testHooks(getenv)
	return c, h, err
}

// clusterConfig checks the cluster flags together.
func (f *clusterFlags) clusterConfig() (daemon.ClusterConfig, error) {
	var c daemon.ClusterConfig
	if err := cluster.ValidateID("--node-id", f.nodeID); err != nil {
		return c, err
	}
	if f.raftAddr == "" {
		for _, x := range []struct {
			name string
			set  bool
		}{{"raft-advertise", f.raftAdvertise != ""}, {"bootstrap", f.bootstrap}, {"join", f.join != ""}, {"peers", f.peers != ""}} {
			if x.set {
				return c, fmt.Errorf("--%s needs --raft-addr (without it the node runs alone)", x.name)
			}
		}
	}
	set := 0
	for _, b := range []bool{f.bootstrap, f.join != "", f.peers != ""} {
		if b {
			set++
		}
	}
	if set > 1 {
		return c, errors.New("--bootstrap, --join and --peers are three ways to form a cluster: give one of them")
	}
	c.RaftAddr, c.RaftAdvertise, c.Bootstrap = f.raftAddr, f.raftAdvertise, f.bootstrap
	if c.RaftAddr != "" {
		if _, port, err := net.SplitHostPort(c.RaftAddr); err != nil || !decimalPort(port) {
			return c, fence.Invalid("--raft-addr", "HOST:PORT with a port 0-65535", c.RaftAddr)
		} else if port == "0" && c.RaftAdvertise == "" {
			// Other nodes dial the advertised address, which is this one.
			return c, fence.Invalid("--raft-addr", "a port other nodes can dial: not 0 (or give --raft-advertise)", c.RaftAddr)
		}
		if c.RaftAdvertise != "" {
			if err := cluster.ValidateRaftAddr("--raft-advertise", c.RaftAdvertise); err != nil {
				return c, err
			}
		} else if host, _, _ := net.SplitHostPort(c.RaftAddr); host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
			return c, fmt.Errorf("--raft-addr %s listens on every interface: give --raft-advertise, the HOST:PORT other nodes dial", c.RaftAddr)
		}
	}
	if f.join != "" {
		urls, err := cluster.ParseJoinURLs("--join", f.join)
		if err != nil {
			return c, err
		}
		c.Join = urls
		// With authentication on, adding a member needs an admin token:
		// the joining node sends FENCE_AUTH_TOKEN (never a flag: it would
		// show in ps).
		c.JoinAuthToken = os.Getenv("FENCE_AUTH_TOKEN")
	}
	if f.peers != "" {
		peers, err := cluster.ParsePeers("--peers", f.peers)
		if err != nil {
			return c, err
		}
		if err := checkPeers(peers, f.nodeID, c.RaftAdvertise, c.RaftAddr); err != nil {
			return c, err
		}
		c.Peers = peers
	}
	if err := checkTimeouts(f, c.RaftAddr != ""); err != nil {
		return c, err
	}
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout, c.CommitTimeout = f.heartbeat, f.election, f.leaderLease, f.commit
	return c, nil
}

// checkRestored refuses --join, --peers and --bootstrap on a data dir that
// fence restore made and that has not started yet (it still holds the
// node.RestoredFile marker, removed at its first start): a restored dir
// already holds a one-voter cluster of its own (the restored node, with a
// new cluster id), so --join would ask nobody ("already a member") and
// --peers or --bootstrap would be ignored — two dirs restored from one
// backup and started so would be two clusters granting the same locks.
func (f *clusterFlags) checkRestored(dataDir string) error {
	flag := ""
	switch {
	case f.join != "":
		flag = "--join"
	case f.peers != "":
		flag = "--peers"
	case f.bootstrap:
		flag = "--bootstrap"
	default:
		return nil
	}
	if _, err := os.Stat(filepath.Join(dataDir, node.RestoredFile)); err != nil {
		return nil // not a restored dir (or unreadable: the node's start says so)
	}
	return fmt.Errorf("%s: the data dir %s was made by fence restore (it holds %s) and forms a new cluster by itself, "+
		"with this node as its one voter: start it without --join, --peers or --bootstrap (same --data-dir, --node-id and --raft-addr "+
		"as given to fence restore); then start every other node with an EMPTY data dir and --join this node's URL "+
		"(they receive the state by snapshot). Never restore the same backup into a second node's dir", flag, dataDir, node.RestoredFile)
}

// checkPeers: --peers includes this node, at its own raft address (or
// the cluster would bootstrap with a member nobody reaches).
func checkPeers(peers []node.Peer, self, advertise, raftAddr string) error {
	own := advertise
	if own == "" {
		own = raftAddr
	}
	for _, p := range peers {
		if p.ID == self {
			if p.Addr != own {
				return fmt.Errorf("--peers gives %s the address %s, but its raft address is %s (--raft-advertise, or --raft-addr)", self, p.Addr, own)
			}
			return nil
		}
	}
	return fmt.Errorf("--peers must include this node (--node-id %s)", self)
}

// checkTimeouts applies raft's rules on its timeouts (raft.ValidateConfig)
// to the flags, after the defaults, so a bad combination is named by its
// flags instead of failing in raft.
func checkTimeouts(f *clusterFlags, clustered bool) error {
	hb, el, lease, commit := 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond, 5*time.Millisecond
	if clustered {
		hb, el, lease, commit = 500*time.Millisecond, time.Second, 500*time.Millisecond, 10*time.Millisecond
	}
	for _, x := range []struct {
		name string
		v    *time.Duration
		def  *time.Duration
		min  time.Duration
	}{{"heartbeat-timeout", &f.heartbeat, &hb, 5 * time.Millisecond}, {"election-timeout", &f.election, &el, 5 * time.Millisecond},
		{"leader-lease-timeout", &f.leaderLease, &lease, 5 * time.Millisecond}, {"commit-timeout", &f.commit, &commit, time.Millisecond}} {
		if *x.v < 0 || *x.v > 0 && *x.v < x.min {
			return fence.Invalid("--"+x.name, "at least "+x.min.String(), x.v.String())
		}
		if *x.v > 0 {
			*x.def = *x.v
		}
	}
	if lease > hb {
		return fmt.Errorf("--leader-lease-timeout (%s) must be at most --heartbeat-timeout (%s)", lease, hb)
	}
	if el < hb {
		return fmt.Errorf("--election-timeout (%s) must be at least --heartbeat-timeout (%s)", el, hb)
	}
	return nil
}

// testHooks reads the test-only environment variables. They are for
// tests (the chaos harness, system tests), never for production: a set
// one is logged at start.
func testHooks(getenv func(string) string) (daemon.Hooks, error) {
	var h daemon.Hooks
	if s := getenv(envDialMap); s != "" {
		m, err := raftstore.ParseDialMap(s)
		if err != nil {
			return h, fmt.Errorf("%s (test only): %w", envDialMap, err)
		}
		h.Dialer = raftstore.MapDialer(m)
	}
	var offset time.Duration
	var rate float64
	if s := getenv(envClockOffset); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return h, fmt.Errorf("%s (test only): want a signed duration such as +1h or -30m, got %q", envClockOffset, s)
		}
		offset = d
	}
	if s := getenv(envClockRate); s != "" {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || !(r > 0 && r <= daemon.MaxClockRate) {
			return h, fmt.Errorf("%s (test only): want a rate above 0 and at most %d such as 1.005, got %q", envClockRate, daemon.MaxClockRate, s)
		}
		rate = r
	}
	if offset != 0 || rate != 0 {
		c, err := daemon.NewSkewedClock(offset, rate)
		if err != nil {
			return h, fmt.Errorf("%s (test only): %w", envClockRate, err)
		}
		h.Clock = c
	}
	return h, nil
}

// testHooksSet names the test-only variables set in the environment.
func testHooksSet(getenv func(string) string) []string {
	var set []string
	for _, k := range []string{envDialMap, envClockOffset, envClockRate} {
		if getenv(k) != "" {
			set = append(set, k+"="+getenv(k))
		}
	}
	return set
}

// decimalPort: a port number 0-65535 written in decimal.
func decimalPort(p string) bool {
	n, err := strconv.ParseUint(p, 10, 16)
	return err == nil && n <= 65535
}
