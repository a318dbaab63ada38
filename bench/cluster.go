package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fenceworks/fence/testkit/harness"
)

// target is what the workloads run against: one server process, or a
// cluster of them. addr is what System.Open takes: host:port, or for a
// cluster every node's host:port, comma-separated.
type target interface {
	addr() string
	// cpu is the CPU-seconds used so far by every process of the target;
	// leaderCPU by the one that leads (a single server: the same).
	cpu() float64
	leaderCPU() float64
	// leaderPid is the process that leads (a single server: its own).
	leaderPid() int
	Stop()
}

func (s *Server) addr() string { return s.Addr }

func (s *Server) cpu() float64 {
	c, _ := CPUSeconds(s.Pid())
	return c
}

func (s *Server) leaderCPU() float64 { return s.cpu() }
func (s *Server) leaderPid() int     { return s.Pid() }

func (c *Cluster) leaderCPU() float64 {
	x, _ := CPUSeconds(c.leaderPid())
	return x
}

func (c *Cluster) leaderPid() int { return c.Pids[max(c.leader, 0)] }

// selfCPU is the CPU-seconds this process (the runner and the clients of
// the system being measured) has used so far.
func selfCPU() float64 {
	x, _ := CPUSeconds(os.Getpid())
	return x
}

// Cluster is n server processes of one kind forming one cluster on
// loopback: "fence" (fence serve with --node-id, --raft-addr and a static
// --peers) or "etcd" (bench/cmd/etcdserver with --initial-cluster).
type Cluster struct {
	Kind  string
	Addrs []string // node i's client address, host:port
	IDs   []string // node ids (fence --node-id, etcd member names)
	Pids  []int

	fence *harness.Cluster // Kind "fence": the nodes, run by testkit/harness
	etcd  []*Server        // Kind "etcd"
	dir   string           // data dirs, removed by Stop

	// leader is the node that led when the workloads' clients were
	// opened (-1: not asked); addr lists it first, or last with
	// viaFollower (a follower first: every Fence call is forwarded).
	leader      int
	viaFollower bool

	mu sync.Mutex
	// killed[i]: node i was killed (kill -9) and is gone.
	killed []bool
	// etcd: a status client per node, made on first use.
	etcdCli map[int]*clientv3.Client
}

// addr lists the leader first when it is known: the Fence client sticks to
// the first endpoint that works, and through a follower every call would be
// forwarded (one more hop); etcd's client balances over all endpoints
// whatever their order.
func (c *Cluster) addr() string {
	if c.viaFollower {
		return c.addrFrom(max(c.leader, 0) + 1)
	}
	return c.addrFrom(max(c.leader, 0))
}

// checkLeader returns "" while the node that led when the clients were
// opened still leads, else what changed (and lists the new leader first
// from now on).
func (c *Cluster) checkLeader(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	i, err := c.Leader(ctx)
	switch {
	case err != nil:
		return err.Error()
	case i != c.leader:
		old := c.leader
		c.leader = i
		return fmt.Sprintf("leader moved from %s to %s", c.IDs[old], c.IDs[i])
	}
	return ""
}

// addrFrom is the cluster's comma list starting at node first (the client
// tries its endpoints in order and sticks to the one that works).
func (c *Cluster) addrFrom(first int) string {
	var as []string
	for i := range c.Addrs {
		as = append(as, c.Addrs[(first+i)%len(c.Addrs)])
	}
	return strings.Join(as, ",")
}

func (c *Cluster) cpu() float64 {
	var sum float64
	for i, pid := range c.Pids {
		if c.isKilled(i) {
			continue
		}
		x, _ := CPUSeconds(pid)
		sum += x
	}
	return sum
}

func (c *Cluster) isKilled(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.killed[i]
}

// Kill ends node i with SIGKILL (no shutdown, no leadership transfer) and
// returns the time just before the signal was sent.
func (c *Cluster) Kill(i int) (time.Time, error) {
	c.mu.Lock()
	c.killed[i] = true
	c.mu.Unlock()
	t := time.Now()
	if c.fence != nil {
		return t, c.fence.Node(i).Kill()
	}
	return t, c.etcd[i].cmd.Process.Kill()
}

// Stop kills every node (SIGKILL) and removes their data dirs: nothing of
// a cluster is kept after its run.
func (c *Cluster) Stop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	for _, cli := range c.etcdCli {
		_ = cli.Close()
	}
	c.etcdCli = nil
	c.mu.Unlock()
	if c.fence != nil {
		_ = c.fence.Close() // kill -9 every node: nothing of it is kept
	}
	// etcd: SIGKILL too. The data is thrown away, and a member that
	// lost its peers can spend seconds in a graceful stop (a failover
	// run's survivors took ~10 s each).
	for _, n := range c.etcd {
		if n.cmd != nil && n.cmd.Process != nil {
			_ = n.cmd.Process.Kill()
			<-n.done
			n.log.Close()
		}
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

// Leader returns the index of the node that leads now, asking the nodes
// that are up; it retries until one reports itself the leader or ctx ends.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	var last error
	for {
		for i := range c.Addrs {
			if c.isKilled(i) {
				continue
			}
			lead, err := c.leads(ctx, i)
			if err != nil {
				last = err
				continue
			}
			if lead {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = ctx.Err()
			}
			return -1, fmt.Errorf("%s cluster: no leader: %w", c.Kind, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// leads asks node i whether it leads: fence's ClusterService.NodeStatus
// (answered by the node asked, never forwarded), etcd's Maintenance.Status
// (leader == the member's own id).
func (c *Cluster) leads(ctx context.Context, i int) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	switch c.Kind {
	case "fence":
		st, err := c.fence.Node(i).Status(ctx)
		if err != nil {
			return false, err
		}
		return st.GetRole() == "leader" && st.GetReady(), nil
	case "etcd":
		cli, err := c.etcdStatusClient(i)
		if err != nil {
			return false, err
		}
		st, err := cli.Status(ctx, c.Addrs[i])
		if err != nil {
			return false, err
		}
		return st.Leader != 0 && st.Leader == st.Header.GetMemberId(), nil
	}
	return false, fmt.Errorf("unknown cluster kind %q", c.Kind)
}

func (c *Cluster) etcdStatusClient(i int) (*clientv3.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cli := c.etcdCli[i]; cli != nil {
		return cli, nil
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Addrs[i]}, DialTimeout: 500 * time.Millisecond, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	if c.etcdCli == nil {
		c.etcdCli = map[int]*clientv3.Client{}
	}
	c.etcdCli[i] = cli
	return cli, nil
}

// ClusterFlags are extra flags given to every node of a cluster.
type ClusterFlags struct {
	Fence []string // after the runner's own `fence serve` flags
	Etcd  []string // after the runner's own etcdserver flags
}

// freePorts returns n distinct free loopback ports.
func freePorts(n int) ([]int, error) {
	seen := map[int]bool{}
	var ps []int
	for len(ps) < n {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			ps = append(ps, p)
		}
	}
	return ps, nil
}

// StartFenceCluster runs n `fence serve` processes from bin as one static
// cluster (testkit/harness: every node gets the same --peers) with the
// rules StartFence uses, and waits until every node's /readyz says it can
// serve (a leader is known and the node has applied what it knew
// committed).
func StartFenceCluster(bin, tmp string, n int, extra []string) (*Cluster, error) {
	return startFenceCluster(bin, tmp, n, extra, nil)
}

// StartFenceLeanCluster is StartFenceCluster with every node's lean
// session port (--session-addr) on a free loopback port, named in
// $FENCEBENCH_LEAN_ADDRS as API=LEAN pairs (fence-lean's clients map each
// endpoint to its node's lean port with it).
func StartFenceLeanCluster(bin, tmp string, n int, extra []string) (*Cluster, error) {
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	lean := map[string]string{}
	c, err := startFenceCluster(bin, tmp, n, extra, func(id string) []string {
		i, _ := strconv.Atoi(strings.TrimPrefix(id, "fence-"))
		a := fmt.Sprintf("127.0.0.1:%d", ports[(i-1)%n])
		lean[id] = a
		return []string{"--session-addr", a}
	})
	if err != nil {
		return nil, err
	}
	var pairs []string
	for i, a := range c.Addrs {
		pairs = append(pairs, a+"="+lean[c.IDs[i]])
	}
	if err := os.Setenv(LeanAddrsEnv, strings.Join(pairs, ",")); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func startFenceCluster(bin, tmp string, n int, extra []string, nodeArgs func(id string) []string) (*Cluster, error) {
	dir, err := os.MkdirTemp(tmp, "fence-cluster-")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	hc, err := harness.StartCluster(ctx, harness.ClusterConfig{N: n, Bin: bin, Dir: dir, LogDir: dir, LogLimit: 64 << 10,
		Args: append([]string{"--max-locks", "0", "--max-waiters", "0", "--max-waiters-per-lock", "0",
			"--max-ids", "4000000", "--min-id-retention", "1s", "--max-conns", "16384"}, extra...), NodeArgs: nodeArgs})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	c := &Cluster{Kind: "fence", fence: hc, dir: dir, leader: -1, killed: make([]bool, n)}
	for _, s := range hc.Nodes() {
		c.Addrs, c.IDs, c.Pids = append(c.Addrs, s.Addr()), append(c.IDs, s.ID()), append(c.Pids, s.Pid())
	}
	return c, nil
}

// StartEtcdCluster runs n etcdserver processes (bench/cmd/etcdserver) as one
// static cluster (--initial-cluster) and waits until each prints "ready"
// (etcd's ReadyNotify: the member has published itself through raft).
func StartEtcdCluster(bin, tmp string, n int, extra []string) (*Cluster, error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Kind: "etcd", leader: -1, killed: make([]bool, n)}
	if c.dir, err = os.MkdirTemp(tmp, "etcd-cluster-"); err != nil {
		return nil, err
	}
	var initial []string
	for i := range n {
		c.IDs = append(c.IDs, fmt.Sprintf("etcd-%d", i+1))
		initial = append(initial, fmt.Sprintf("%s=http://127.0.0.1:%d", c.IDs[i], ports[n+i]))
	}
	for i := range n {
		dir, err := os.MkdirTemp(c.dir, "etcd-"+strconv.Itoa(i+1)+"-")
		if err != nil {
			c.Stop()
			return nil, err
		}
		args := append([]string{"--name", c.IDs[i], "--client-port", strconv.Itoa(ports[i]), "--peer-port", strconv.Itoa(ports[n+i]),
			"--initial-cluster", strings.Join(initial, ","), "--data-dir", filepath.Join(dir, "data")}, extra...)
		s, err := startProc("etcd", dir, bin, args...)
		if err != nil {
			c.Stop()
			return nil, err
		}
		s.Addr = fmt.Sprintf("127.0.0.1:%d", ports[i])
		c.etcd = append(c.etcd, s)
		c.Addrs, c.Pids = append(c.Addrs, s.Addr), append(c.Pids, s.Pid())
	}
	for _, s := range c.etcd {
		logPath := filepath.Join(s.dir, "server.log")
		if err := s.waitFor(func() bool {
			b, _ := os.ReadFile(logPath)
			return strings.Contains(string(b), "ready\n")
		}); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

var errNoCluster = errors.New("no cluster of this kind")

// startCluster starts an n-node cluster of kind ("fence" or "etcd") and
// finds its leader.
func (c *Config) startCluster(kind string) (cl *Cluster, err error) {
	switch kind {
	case "fence":
		cl, err = StartFenceCluster(c.FenceBin, c.Tmp, c.Cluster, c.ClusterFlags.Fence)
	case "fence-lean":
		cl, err = StartFenceLeanCluster(c.FenceBin, c.Tmp, c.Cluster, c.ClusterFlags.Fence)
	case "etcd":
		cl, err = StartEtcdCluster(c.EtcdBin, c.Tmp, c.Cluster, c.ClusterFlags.Etcd)
	default:
		return nil, fmt.Errorf("%w: %q (clusters: fence, etcd)", errNoCluster, kind)
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if cl.leader, err = cl.Leader(ctx); err != nil {
		cl.Stop()
		return nil, err
	}
	cl.viaFollower = c.ViaFollower
	return cl, nil
}

// Clusterable reports whether the runner can run s against a cluster
// (Redis: no; its replication is asynchronous and it has no consensus).
func Clusterable(s System) bool {
	return s.Server() == "fence" || s.Server() == "fence-lean" || s.Server() == "etcd"
}

// perf returns the profiler of the run named name (nil without PerfDir):
// `perf record -e cpu-clock -g` of pid for dur, in the background, into
// PerfDir/name.data. perf must be installed and allowed to attach to the
// runner's own children (kernel.perf_event_paranoid ≤ 2).
func (c *Config) perf(name string) func(pid int, dur time.Duration) {
	if c.PerfDir == "" {
		return nil
	}
	return func(pid int, dur time.Duration) {
		out := filepath.Join(c.PerfDir, name+".data")
		hz := c.PerfHz
		if hz <= 0 {
			hz = 499
		}
		cmd := exec.Command("perf", "record", "-e", "cpu-clock", "-F", strconv.Itoa(hz), "-g", "-p", strconv.Itoa(pid), "-o", out, "--", "sleep", fmt.Sprintf("%.3f", dur.Seconds()))
		if b, err := cmd.CombinedOutput(); err != nil {
			c.logf("perf record %s: %v: %s", name, err, oneLine(string(b)))
		}
	}
}
