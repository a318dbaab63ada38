package chaos

import (
	"context"
	"errors"
	"fmt"
	"github.com/fenceworks/fence/client"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/testkit/harness"
)

// NodeConfig is one Fence server process: `Bin serve --listen Listen
// --data-dir DataDir [--node-id ID --raft-addr RaftAddr] Formation... Args...`.
// The process itself (start, readiness, signals, restarts, its log) is an
// testkit/harness Server; what a Node adds is the chaos part: a data dir
// on a size-limited tmpfs, the proxy clients reach it through, and a wipe
// and rejoin for membership changes.
type NodeConfig struct {
	Bin     string // the fence binary
	DataDir string // the node's data dir (kept across restarts)
	// Listen is the node's own client address, 127.0.0.1:port, kept across
	// restarts so that its proxy's upstream stays valid. Empty: StartNode
	// picks a free port (and another one if the first start finds it taken).
	Listen string
	// ID is the raft server id (--node-id) of a cluster node, and the
	// node's name in logs. RaftAddr, set, makes the process a cluster node
	// (--raft-addr), kept across restarts.
	ID       string
	RaftAddr string
	// Formation are the flags that form the cluster (--peers ..., or
	// --join URL): on every start (a node with raft state ignores them),
	// replaced by --join when Rejoin re-adds a wiped node.
	Formation []string
	Args      []string // more `fence serve` flags, on every start
	Env       []string // added to the harness's environment
	// DiskBytes > 0 puts DataDir on a tmpfs of that size, mounted by
	// StartNode and unmounted by Close (FillDisk/FreeDisk resize it). raft-wal
	// preallocates 64 MiB segments: give it at least 256 MiB.
	DiskBytes int64
	// LogPath receives the process's stdout and stderr, appended across
	// restarts with a header line per start (empty: only the last 16 KiB
	// are kept in memory, for error messages).
	LogPath string
	// Name names the node in logs and its proxy (default ID, else
	// "node-PORT").
	Name string
	// ReadyTimeout bounds a start's wait for /readyz (default 60s).
	ReadyTimeout time.Duration
	// NoWait: StartNode returns once the process runs, before /readyz (a
	// cluster node with --peers is not ready alone; call WaitReady).
	NoWait bool
	// Security, set, serves the client port over TLS (its ServerArgs are
	// added to Args by the caller: StartCluster does).
	Security *Security
}

// Node is a Fence server process behind its Proxy. Its methods are safe for
// concurrent use.
type Node struct {
	cfg   NodeConfig
	proxy *Proxy

	mu     sync.Mutex
	srv    *harness.Server // replaced by Rejoin
	starts int             // of the servers Rejoin replaced
	// rejoin holds the join URLs of a Rejoin whose start failed: Restart
	// tries the rejoin again (the old process is gone for good).
	rejoin  []string
	mounted bool
	filled  bool
	closed  bool
}

// ErrNoDisk: FillDisk/FreeDisk on a node without a tmpfs (DiskBytes 0).
var ErrNoDisk = errors.New("chaos: node has no size-limited disk (NodeConfig.DiskBytes is 0)")

// nodeLogLimit is the output a node keeps in memory (the whole of it goes
// to LogPath): enough for the tail an error message quotes.
const nodeLogLimit = 16 << 10

// StartNode mounts the node's tmpfs (if DiskBytes > 0), starts the process,
// waits until GET /readyz answers 200 (unless NoWait) and starts its proxy.
// On an error nothing is left running or mounted.
func StartNode(ctx context.Context, cfg NodeConfig) (_ *Node, err error) {
	if cfg.Bin == "" || cfg.DataDir == "" {
		return nil, errors.New("chaos: NodeConfig needs Bin and DataDir")
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 60 * time.Second
	}
	n := &Node{cfg: cfg}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	if cfg.DiskBytes > 0 {
		if err := unix.Mount("tmpfs", cfg.DataDir, "tmpfs", 0, "size="+strconv.FormatInt(cfg.DiskBytes, 10)); err != nil {
			return nil, fmt.Errorf("chaos: mount a tmpfs of %d bytes at %s: %w", cfg.DiskBytes, cfg.DataDir, err)
		}
		n.mounted = true
	}
	srv, err := harness.Start(ctx, n.serverConfig(cfg.Formation))
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	n.srv = srv
	n.cfg.Listen = srv.Addr()
	if n.cfg.Name == "" {
		n.cfg.Name = srv.ID()
	}
	if n.proxy, err = NewProxy(n.cfg.Name, n.cfg.Listen); err != nil {
		return nil, err
	}
	return n, nil
}

// serverConfig is the harness configuration of the node's process with
// the given formation flags.
func (n *Node) serverConfig(formation []string) harness.Config {
	cfg := n.cfg
	id := cfg.ID
	if id == "" {
		id = cfg.Name
	}
	return harness.Config{
		Bin:          cfg.Bin,
		ID:           id,
		DataDir:      cfg.DataDir,
		Listen:       cfg.Listen,
		RaftAddr:     cfg.RaftAddr,
		Args:         append(append([]string(nil), formation...), cfg.Args...),
		Env:          nodeEnv(cfg),
		LogPath:      cfg.LogPath,
		LogLimit:     nodeLogLimit,
		ReadyTimeout: cfg.ReadyTimeout,
		NoWait:       cfg.NoWait,
		ClientTLS:    cfg.Security.tlsConfig(),
		AuthToken:    cfg.Security.token(),
	}
}

func (n *Node) server() *harness.Server {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv
}

// WaitReady waits until the node answers /readyz (within ReadyTimeout).
func (n *Node) WaitReady(ctx context.Context) error { return n.server().WaitReady(ctx) }

// Ready reports whether GET /readyz answers 200 now (one try, up to 1s).
func (n *Node) Ready(ctx context.Context) bool { return n.server().Ready(ctx) }

// Status is the node's own NodeStatus (ClusterService, never forwarded),
// asked directly (not through the proxy), bounded by a second.
func (n *Node) Status(ctx context.Context) (*fencev1.NodeStatusResponse, error) {
	return n.server().Status(ctx)
}

// Config is the node's configuration (Listen and Name filled in).
func (n *Node) Config() NodeConfig { return n.cfg }

// Name is the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// ID is the node's raft id (its name for a single node).
func (n *Node) ID() string { return n.server().ID() }

// RaftAddr is the node's raft address ("" for a single node).
func (n *Node) RaftAddr() string { return n.cfg.RaftAddr }

// URL is the node's base URL through its proxy (http://127.0.0.1:port):
// what clients use.
func (n *Node) URL() string { return n.cfg.Security.Scheme() + "://" + n.proxy.Addr() }

// DirectURL is the node's own base URL, bypassing the proxy.
func (n *Node) DirectURL() string { return n.cfg.Security.Scheme() + "://" + n.cfg.Listen }

// ClientOptions are the Go client options that reach this node (its TLS),
// then more.
func (n *Node) ClientOptions(more ...client.Option) []client.Option {
	return n.cfg.Security.ClientOptions(more...)
}

// Proxy is the proxy in front of the node's client port.
func (n *Node) Proxy() *Proxy { return n.proxy }

// Pid is the current process's id (0 before the first start).
func (n *Node) Pid() int { return n.server().Pid() }

// Starts counts the processes started (across rejoins).
func (n *Node) Starts() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.starts + n.srv.Starts()
}

// Args are the extra args of the current process (Restart's extraArgs).
func (n *Node) Args() []string { return n.server().Args() }

// Running reports whether the current process is alive (paused counts).
func (n *Node) Running() bool { return n.server().Running() }

// Paused reports whether the process was stopped by Pause and not resumed.
func (n *Node) Paused() bool { return n.server().Paused() }

// Exited reports whether the current process has exited, and its exit code
// (-1 when a signal ended it).
func (n *Node) Exited() (bool, int) {
	st := n.server().ExitState()
	if st == nil {
		return false, 0
	}
	return true, st.ExitCode()
}

// ExitState is the current process's state once it has exited (nil before).
func (n *Node) ExitState() *os.ProcessState { return n.server().ExitState() }

// Done is closed when the current process has exited and been reaped.
func (n *Node) Done() <-chan struct{} { return n.server().Done() }

// LogTail is the last 16 KiB of the node's output (all starts).
func (n *Node) LogTail() string { return n.server().LogTail(nodeLogLimit) }

// Kill sends SIGKILL to the process (paused or not) and waits until it is
// reaped. A process that has already exited is left as it is.
func (n *Node) Kill() error { return n.server().Kill() }

// Stop sends SIGTERM and waits for a graceful exit (a leader hands over
// its leadership first); see harness.Server.Stop.
func (n *Node) Stop() error { return n.server().Stop() }

// Restart starts the process again (after Kill, or after it exited) on the
// same addresses and data dir with cfg.Args+extraArgs, and waits until it
// is ready. It fails if the process is still running. The environment is
// the last RestartEnv's.
func (n *Node) Restart(ctx context.Context, extraArgs ...string) error {
	n.mu.Lock()
	rejoin := n.rejoin
	n.mu.Unlock()
	if rejoin != nil {
		return n.Rejoin(ctx, rejoin)
	}
	return n.server().Restart(ctx, extraArgs...)
}

// RestartEnv is Restart with env added to the node's environment for this
// and later starts, replacing the previous RestartEnv's (nil: none).
func (n *Node) RestartEnv(ctx context.Context, env []string, extraArgs ...string) error {
	return n.server().RestartEnv(ctx, env, extraArgs...)
}

// Pause stops the process with SIGSTOP.
func (n *Node) Pause() error { return n.server().Pause() }

// Resume continues a paused process with SIGCONT (a no-op for a process
// that is not running).
func (n *Node) Resume() error { return n.server().Resume() }

// Rejoin re-adds a node that was removed from the raft configuration: it
// kills the process, empties the data dir (the tmpfs stays mounted) and
// starts a fresh process on the same addresses and id with `--join URLs`
// in place of the formation flags, and waits until it is ready (raft has
// added it as a voter and it has caught up). The caller removes it from
// the configuration first (a wiped node that still is a member would come
// back with an empty log under a known id).
func (n *Node) Rejoin(ctx context.Context, joinURLs []string) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return errors.New("chaos: node closed")
	}
	old := n.srv
	n.mu.Unlock()
	if err := old.Close(); err != nil {
		return fmt.Errorf("chaos: rejoin %s: stop: %w", n.cfg.Name, err)
	}
	if err := wipeDir(n.cfg.DataDir); err != nil {
		return fmt.Errorf("chaos: rejoin %s: %w", n.cfg.Name, err)
	}
	formation := []string{"--join", strings.Join(joinURLs, ",")}
	cfg := n.serverConfig(formation)
	cfg.NoWait = false
	srv, err := harness.Start(ctx, cfg)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil {
		n.rejoin = joinURLs
		return fmt.Errorf("chaos: rejoin %s: %w", n.cfg.Name, err)
	}
	if n.closed { // closed meanwhile: Close did not see srv
		srv.Close()
		return errors.New("chaos: node closed")
	}
	n.starts += old.Starts()
	n.srv, n.rejoin = srv, nil
	n.cfg.Formation = formation
	return nil
}

// wipeDir removes what dir holds, not dir itself (it may be a mount point).
func wipeDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// DiskUsage is the tmpfs's used and total bytes.
func (n *Node) DiskUsage() (used, size int64, err error) {
	if !n.mounted {
		return 0, 0, ErrNoDisk
	}
	var st unix.Statfs_t
	if err := unix.Statfs(n.cfg.DataDir, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, int64(st.Blocks) * st.Bsize, nil
}

// DiskFull reports whether FillDisk shrank the disk and FreeDisk has not
// restored it.
func (n *Node) DiskFull() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.filled
}

// FillDisk shrinks the tmpfs to the bytes in use, so that any write needing
// a new page fails with ENOSPC. Writes into space already allocated still
// succeed: raft-wal preallocates its 64 MiB segment files, so the node
// fails only once its log needs a new segment or it writes a snapshot (see
// the nemesis's disk-full, which writes large values until then).
func (n *Node) FillDisk() error {
	if !n.mounted {
		return ErrNoDisk
	}
	var err error
	for i := 0; i < 20; i++ { // the use may grow between statfs and remount
		var used int64
		if used, _, err = n.DiskUsage(); err != nil {
			return err
		}
		if err = n.remount(max(used, 4096)); err == nil {
			n.mu.Lock()
			n.filled = true
			n.mu.Unlock()
			return nil
		}
	}
	return fmt.Errorf("chaos: fill the disk of %s: %w", n.Name(), err)
}

// FreeDisk gives the tmpfs its DiskBytes back.
func (n *Node) FreeDisk() error {
	if !n.mounted {
		return ErrNoDisk
	}
	if err := n.remount(n.cfg.DiskBytes); err != nil {
		return fmt.Errorf("chaos: free the disk of %s: %w", n.Name(), err)
	}
	n.mu.Lock()
	n.filled = false
	n.mu.Unlock()
	return nil
}

func (n *Node) remount(size int64) error {
	return unix.Mount("tmpfs", n.cfg.DataDir, "tmpfs", unix.MS_REMOUNT, "size="+strconv.FormatInt(size, 10))
}

// Close kills the process, closes the proxy and unmounts the tmpfs (its
// data is gone then). It is idempotent.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	srv := n.srv
	n.mu.Unlock()
	var errs []error
	if srv != nil {
		errs = append(errs, srv.Close())
	}
	if n.proxy != nil {
		errs = append(errs, n.proxy.Close())
	}
	if n.mounted {
		var err error
		for i := 0; i < 50; i++ {
			if err = unix.Unmount(n.cfg.DataDir, 0); err == nil || errors.Is(err, unix.EINVAL) {
				err = nil
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil { // still busy: detach it now, freed when unused
			err = unix.Unmount(n.cfg.DataDir, unix.MNT_DETACH)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("chaos: unmount %s: %w", n.cfg.DataDir, err))
		}
		n.mounted = false
	}
	return errors.Join(errs...)
}

// Cluster is the nodes of a run: one single node (no raft port), or 3 or 5
// raft nodes with a Proxy on every directed peer link. Everything here
// addresses nodes by index.
type Cluster struct {
	Nodes []*Node
	// links[a][b] is the proxy node a dials to reach node b's raft port
	// (nil on the diagonal, and for a single node).
	links [][]*Proxy
}

// ClusterConfig is StartCluster's input.
type ClusterConfig struct {
	// Nodes is how many (default 1). One node runs without --raft-addr
	// (the single-node server of `make run`); more form a raft cluster with
	// a static --peers list, ids fence-1 … fence-N.
	Nodes int
	Bin   string // the fence binary
	// Dir holds each node's data dir (node<i>-data) and log (node<i>.log).
	Dir          string
	Args, Env    []string // for every node, on every start
	DiskBytes    int64    // > 0: each data dir on a tmpfs of this size
	ReadyTimeout time.Duration
	// Security, set, serves every node's client port over TLS.
	Security *Security
}

// StartCluster starts the nodes (all at once: a cluster node is ready only
// once a leader is elected), each behind its client proxy, with a proxy on
// every directed peer link: node a's FENCE_TEST_DIAL_MAP maps node b's raft
// address to the proxy a→b, so a fault on that proxy cuts what a sends to b
// (raft RPCs and forwarded API calls alike). If a node finds its port taken
// (another process bound it after it was picked) the whole cluster is
// started once more on other ports. On an error nothing is left running.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if cfg.Nodes <= 0 {
		cfg.Nodes = 1
	}
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		var c *Cluster
		if c, err = startCluster(ctx, cfg); err == nil {
			return c, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, err
}

func startCluster(ctx context.Context, cfg ClusterConfig) (_ *Cluster, err error) {
	c := &Cluster{Nodes: make([]*Node, cfg.Nodes)}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	base := func(i int) NodeConfig {
		return NodeConfig{
			Bin:          cfg.Bin,
			DataDir:      filepath.Join(cfg.Dir, fmt.Sprintf("node%d-data", i)),
			Args:         append(cfg.Security.ServerArgs(), cfg.Args...),
			Env:          cfg.Env,
			LogPath:      filepath.Join(cfg.Dir, fmt.Sprintf("node%d.log", i)),
			DiskBytes:    cfg.DiskBytes,
			ReadyTimeout: cfg.ReadyTimeout,
			Security:     cfg.Security,
		}
	}
	if cfg.Nodes == 1 {
		ncfg := base(0)
		ncfg.Name = "node-0"
		if c.Nodes[0], err = StartNode(ctx, ncfg); err != nil {
			c.Nodes = nil
			return nil, err
		}
		return c, nil
	}
	n := cfg.Nodes
	raft := make([]string, n)
	var peers []string
	for i := range raft {
		if raft[i], err = harness.FreeAddr(); err != nil {
			return nil, err
		}
		peers = append(peers, harness.NodeID(i)+"="+raft[i])
	}
	c.links = make([][]*Proxy, n)
	for a := range n {
		c.links[a] = make([]*Proxy, n)
		for b := range n {
			if a == b {
				continue
			}
			if c.links[a][b], err = NewProxy(fmt.Sprintf("%s->%s", harness.NodeID(a), harness.NodeID(b)), raft[b]); err != nil {
				return nil, err
			}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		ncfg := base(i)
		ncfg.ID, ncfg.Name, ncfg.RaftAddr = harness.NodeID(i), harness.NodeID(i), raft[i]
		ncfg.Formation = []string{"--peers", strings.Join(peers, ",")}
		m := harness.DialMap{}
		for b := range n {
			if b != i {
				m[raft[b]] = c.links[i][b].Addr()
			}
		}
		ncfg.Env = append(append([]string(nil), cfg.Env...), m.Env())
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Nodes[i], errs[i] = StartNode(ctx, ncfg)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// Endpoints are the nodes' URLs through their proxies, in node order.
func (c *Cluster) Endpoints() []string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.URL()
	}
	return urls
}

// DirectURLs are the nodes' own URLs (no proxy), in node order.
func (c *Cluster) DirectURLs() []string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.DirectURL()
	}
	return urls
}

// Node is Nodes[i], or an error naming the bad index.
func (c *Cluster) Node(i int) (*Node, error) {
	if c == nil || i < 0 || i >= len(c.Nodes) {
		return nil, fmt.Errorf("chaos: no node %d", i)
	}
	return c.Nodes[i], nil
}

// Raft reports whether the nodes form a raft cluster (more than one node,
// with peer links).
func (c *Cluster) Raft() bool { return c != nil && c.links != nil }

// Close closes every node and every peer link proxy.
func (c *Cluster) Close() error {
	var errs []error
	for _, n := range c.Nodes {
		if n != nil {
			errs = append(errs, n.Close())
		}
	}
	for _, row := range c.links {
		for _, p := range row {
			if p != nil {
				errs = append(errs, p.Close())
			}
		}
	}
	return errors.Join(errs...)
}

// nodeEnv is the node's environment: with authentication on, the admin
// token too (a node started with --join asks with it).
func nodeEnv(cfg NodeConfig) []string {
	if tok := cfg.Security.token(); tok != "" {
		return append(append([]string(nil), cfg.Env...), "FENCE_AUTH_TOKEN="+tok)
	}
	return cfg.Env
}
