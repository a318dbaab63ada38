package harness

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ClusterConfig is N `fence serve` processes forming one raft cluster.
type ClusterConfig struct {
	// N is the number of nodes started (ids fence-1 … fence-N).
	N int
	// Bin is the fence binary (empty: FenceBinary()).
	Bin string
	// Dir holds the nodes' data directories, Dir/<id>. Required.
	Dir string
	// Join: start fence-1 with --bootstrap and the others with --join
	// (fence-1's URL). Default: every node gets the same static --peers.
	Join bool
	// Args are `fence serve` flags for every node (e.g. raft timeouts);
	// NodeArgs, if set, adds flags per node.
	Args     []string
	NodeArgs func(id string) []string
	// Env is added to every node's environment; NodeEnv, if set, per node.
	Env     []string
	NodeEnv func(id string) []string
	// Link, if set, gives the address node `from` dials to reach node
	// `to`'s raft address (e.g. a chaos.Proxy in front of it): every node
	// gets FENCE_TEST_DIAL_MAP with one entry per other node, spares
	// included. It may be called again for the same pair if the cluster is
	// started again after a port clash.
	Link func(from, to, toRaftAddr string) (string, error)
	// Spares reserves raft addresses for nodes AddNode will add later
	// (fence-N+1 …), so that the dial maps of the first N already route
	// through Link to them. Without spares an added node's inbound links
	// are direct.
	Spares int
	// LogDir, if set, receives each node's output in LogDir/<id>.log.
	LogDir string
	// ClientTLS and AuthToken: as in Config, for every node.
	ClientTLS *tls.Config
	AuthToken string
	// LogLimit, ReadyTimeout, StopTimeout: as in Config.
	LogLimit     int
	ReadyTimeout time.Duration
	StopTimeout  time.Duration
}

// Cluster is the nodes of one raft cluster. Nodes are addressed by index
// (0 is fence-1) or id; a node stays in the list when it is killed or
// removed from the raft configuration (see MarkRemoved).
type Cluster struct {
	cfg       ClusterConfig
	raftAddrs []string // by index, spares included

	mu      sync.Mutex
	nodes   []*Server
	removed map[string]bool
}

// NodeID is the id of the node at index i: fence-(i+1).
func NodeID(i int) string { return "fence-" + strconv.Itoa(i+1) }

// StartCluster starts the nodes and waits until each is ready (/readyz:
// a leader is known and the node has caught up). On an error nothing is
// left running. If a node finds its port taken, the whole cluster is
// started again once on other ports.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if cfg.N < 1 || cfg.Dir == "" {
		return nil, errors.New("harness: ClusterConfig needs N >= 1 and Dir")
	}
	if cfg.Bin == "" {
		bin, err := FenceBinary()
		if err != nil {
			return nil, err
		}
		cfg.Bin = bin
	}
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		var c *Cluster
		c, err = startCluster(ctx, cfg, attempt)
		if err == nil {
			return c, nil
		}
		if !addrInUse(err.Error()) {
			break
		}
	}
	return nil, err
}

func startCluster(ctx context.Context, cfg ClusterConfig, attempt int) (_ *Cluster, err error) {
	c := &Cluster{cfg: cfg, removed: map[string]bool{}}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	for i := 0; i < cfg.N+cfg.Spares; i++ {
		a, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		c.raftAddrs = append(c.raftAddrs, a)
	}
	var peers []string
	for i := 0; i < cfg.N; i++ {
		peers = append(peers, NodeID(i)+"="+c.raftAddrs[i])
	}
	for i := 0; i < cfg.N; i++ {
		var args []string
		switch {
		case !cfg.Join:
			args = []string{"--peers", strings.Join(peers, ",")}
		case i == 0:
			args = []string{"--bootstrap"}
		default:
			args = []string{"--join", c.nodes[0].URL()}
		}
		s, err := c.newNode(i, attempt, args)
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, s)
		if err := s.firstStart(ctx, false); err != nil {
			return nil, err
		}
		if cfg.Join && i == 0 {
			if err := s.WaitReady(ctx); err != nil {
				return nil, err
			}
		}
	}
	// Every node started must become ready: one that exited (a failed
	// bootstrap, a port clash) is an error here, not a node to skip.
	var errs []error
	for _, n := range c.nodes {
		errs = append(errs, n.WaitReady(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// newNode makes (does not start) the node at index i with args before
// cfg.Args. The cluster starts every node before it waits for any
// (firstStart without waiting): with --peers none is ready alone.
func (c *Cluster) newNode(i, attempt int, args []string) (*Server, error) {
	cfg := c.cfg
	id := NodeID(i)
	dir := filepath.Join(cfg.Dir, id)
	if attempt > 0 {
		dir += "-" + strconv.Itoa(attempt)
	}
	sc := Config{
		Bin:          cfg.Bin,
		ID:           id,
		DataDir:      dir,
		RaftAddr:     c.raftAddrs[i],
		Args:         append(args, cfg.Args...),
		Env:          append([]string(nil), cfg.Env...),
		LogLimit:     cfg.LogLimit,
		ReadyTimeout: cfg.ReadyTimeout,
		StopTimeout:  cfg.StopTimeout,
		ClientTLS:    cfg.ClientTLS,
		AuthToken:    cfg.AuthToken,
	}
	if cfg.NodeArgs != nil {
		sc.Args = append(sc.Args, cfg.NodeArgs(id)...)
	}
	if cfg.NodeEnv != nil {
		sc.Env = append(sc.Env, cfg.NodeEnv(id)...)
	}
	if cfg.LogDir != "" {
		sc.LogPath = filepath.Join(cfg.LogDir, id+".log")
	}
	if cfg.Link != nil {
		m := DialMap{}
		for j, addr := range c.raftAddrs {
			if j == i {
				continue
			}
			to, err := cfg.Link(id, NodeID(j), addr)
			if err != nil {
				return nil, err
			}
			m[addr] = to
		}
		sc.Env = append(sc.Env, m.Env())
	}
	return newServer(sc)
}

// AddNode starts a new node (the next id, on a spare raft address if one is
// left) with --join and the URLs of the running member nodes, plus
// extraArgs, and waits until it is ready: raft has added it as a voter and
// it has caught up.
func (c *Cluster) AddNode(ctx context.Context, extraArgs ...string) (*Server, error) {
	c.mu.Lock()
	i := len(c.nodes)
	if i >= len(c.raftAddrs) {
		a, err := FreeAddr()
		if err != nil {
			c.mu.Unlock()
			return nil, err
		}
		c.raftAddrs = append(c.raftAddrs, a)
	}
	var urls []string
	for _, n := range c.nodes {
		if !c.removed[n.ID()] && n.Running() {
			urls = append(urls, n.URL())
		}
	}
	c.mu.Unlock()
	if len(urls) == 0 {
		return nil, errors.New("harness: AddNode: no running member to join")
	}
	s, err := c.newNode(i, 0, append([]string{"--join", strings.Join(urls, ",")}, extraArgs...))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.nodes = append(c.nodes, s)
	c.mu.Unlock()
	if err := s.firstStart(ctx, false); err != nil {
		return s, err
	}
	return s, s.WaitReady(ctx)
}

// MarkRemoved records that s is no longer in the raft configuration (after
// a RemoveMember): Leader no longer counts it, and AddNode does not join
// through it.
func (c *Cluster) MarkRemoved(s *Server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removed[s.ID()] = true
}

// Members are the nodes not marked removed, in index order.
func (c *Cluster) Members() []*Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var m []*Server
	for _, n := range c.nodes {
		if !c.removed[n.ID()] {
			m = append(m, n)
		}
	}
	return m
}

// Nodes are all the nodes started, in index order.
func (c *Cluster) Nodes() []*Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.nodes)
}

// Node is the node at index i (0 is fence-1).
func (c *Cluster) Node(i int) *Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// ByID is the node with id, or nil.
func (c *Cluster) ByID(id string) *Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.ID() == id {
			return n
		}
	}
	return nil
}

// ByRaftAddr is the node with that raft address, or nil.
func (c *Cluster) ByRaftAddr(addr string) *Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.RaftAddr() == addr {
			return n
		}
	}
	return nil
}

// URLs are the member nodes' client URLs, in index order.
func (c *Cluster) URLs() []string {
	var urls []string
	for _, n := range c.Members() {
		urls = append(urls, n.URL())
	}
	return urls
}

// Endpoints is URLs joined with commas: FENCE_SERVER or --server for a
// client that fails over.
func (c *Cluster) Endpoints() string { return strings.Join(c.URLs(), ",") }

// WaitReady waits until every running member node answers /readyz (a
// member that is down is not waited for).
func (c *Cluster) WaitReady(ctx context.Context) error {
	var errs []error
	for _, n := range c.Members() {
		if n.Running() {
			errs = append(errs, n.WaitReady(ctx))
		}
	}
	return errors.Join(errs...)
}

// Close kills every node (their data directories stay).
func (c *Cluster) Close() error {
	var errs []error
	for _, n := range c.Nodes() {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}

// String lists the nodes: id, raft address, client URL, state.
func (c *Cluster) String() string {
	var b strings.Builder
	for _, n := range c.Nodes() {
		st := "running"
		switch {
		case n.Paused():
			st = "paused"
		case !n.Running():
			st = fmt.Sprint("down (", n.ExitState(), ")")
		}
		c.mu.Lock()
		if c.removed[n.ID()] {
			st += ", removed"
		}
		c.mu.Unlock()
		fmt.Fprintf(&b, "%s raft=%s url=%s %s\n", n.ID(), n.RaftAddr(), n.URL(), st)
	}
	return b.String()
}
