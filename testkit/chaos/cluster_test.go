//go:build e2e

package chaos

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/testkit/harness"
)

var (
	fenceBinOnce sync.Once
	fenceBinPath string
	fenceBinErr  error
)

// testFenceBin is the fence binary the node tests run: $FENCE_CHAOS_FENCE_BIN
// if set, else ./cmd/fence built once per test process (without -race: the
// server's races are the server tests' business, and this keeps it fast)
// next to the test binary (go test's work dir, removed after the run).
func testFenceBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FENCE_CHAOS_FENCE_BIN"); p != "" {
		return p
	}
	fenceBinOnce.Do(func() {
		// Next to the test binary: in go test's work dir, which it removes.
		dir := ""
		if exe, err := os.Executable(); err == nil {
			dir = filepath.Dir(exe)
		}
		fenceBinPath = filepath.Join(dir, "fence-for-chaos-tests")
		if f, err := os.Create(fenceBinPath); err != nil || f.Close() != nil {
			if dir, err = os.MkdirTemp("", "fence-chaos-bin-"); err != nil {
				fenceBinErr = err
				return
			}
			fenceBinPath = filepath.Join(dir, "fence")
		}
		cmd := exec.Command("go", "build", "-o", fenceBinPath, "./cmd/fence")
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			fenceBinErr = errors.New("go build ./cmd/fence: " + err.Error() + "\n" + string(out))
		}
	})
	if fenceBinErr != nil {
		t.Fatal(fenceBinErr)
	}
	return fenceBinPath
}

// startTestNode starts a node with a fresh data dir, closed at the end.
func startTestNode(t *testing.T, cfg NodeConfig) *Node {
	t.Helper()
	if cfg.Bin == "" {
		cfg.Bin = testFenceBin(t)
	}
	dir := t.TempDir()
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join(dir, "data")
	}
	if cfg.LogPath == "" {
		cfg.LogPath = filepath.Join(dir, "node.log")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := StartNode(ctx, cfg)
	if err != nil {
		if cfg.DiskBytes > 0 && errors.Is(err, syscall.EPERM) && os.Getenv("CI") == "" {
			t.Skipf("tmpfs not permitted here (CI runs it): %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if t.Failed() {
			t.Logf("node output:\n%s", n.LogTail())
		}
	})
	return n
}

func getStatus(url string, timeout time.Duration) (int, error) {
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func newTestClient(t *testing.T, url string) *client.Client {
	t.Helper()
	c, err := client.New(url, client.WithoutSession(), client.WithAttemptTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// acquireTestToken takes lock name once through url and returns its token.
func acquireTestToken(t *testing.T, url, name string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newTestClient(t, url)
	l, err := c.Acquire(ctx, name, client.TTL(time.Minute))
	if err != nil {
		t.Fatalf("acquire %s via %s: %v", name, url, err)
	}
	return uint64(l.Token())
}

// isStopped reads whether pid is stopped (state T) from /proc.
func isStopped(t *testing.T, pid int) bool {
	t.Helper()
	stopped, err := harness.ProcStopped(pid)
	if err != nil {
		t.Fatal(err)
	}
	return stopped
}

// The node's life: through its proxy, paused, killed and restarted with
// other flags on the same address and data, closed.
func TestNodeLifecycle(t *testing.T) {
	n := startTestNode(t, NodeConfig{})
	if n.URL() == n.DirectURL() || !strings.HasPrefix(n.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %s, DirectURL %s", n.URL(), n.DirectURL())
	}
	if code, err := getStatus(n.URL()+"/readyz", 5*time.Second); err != nil || code != 200 {
		t.Fatalf("readyz through the proxy: %d %v", code, err)
	}
	tok1 := acquireTestToken(t, n.URL(), "life-1")

	// Paused: no answer, through the proxy or directly; then it answers again.
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	if !n.Paused() || !isStopped(t, n.Pid()) {
		t.Fatalf("after Pause: Paused %v, stopped %v", n.Paused(), isStopped(t, n.Pid()))
	}
	if code, err := getStatus(n.DirectURL()+"/readyz", 500*time.Millisecond); err == nil {
		t.Fatalf("a paused node answered %d", code)
	}
	if err := n.Resume(); err != nil {
		t.Fatal(err)
	}
	if n.Paused() || isStopped(t, n.Pid()) {
		t.Fatal("still stopped after Resume")
	}
	if code, err := getStatus(n.URL()+"/readyz", 5*time.Second); err != nil || code != 200 {
		t.Fatalf("readyz after Resume: %d %v", code, err)
	}

	// Killed while paused: SIGKILL still ends it.
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	pid := n.Pid()
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if exited, code := n.Exited(); !exited || code != -1 || n.Running() || n.Paused() {
		t.Fatalf("after Kill: exited %v code %d running %v paused %v", exited, code, n.Running(), n.Paused())
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d after Kill: %v, want ESRCH (gone and reaped)", pid, err)
	}
	if err := n.Pause(); err == nil {
		t.Fatal("Pause of a dead node: no error")
	}
	direct := n.DirectURL()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := n.Restart(ctx, "--max-ttl", "1h"); err != nil {
		t.Fatal(err)
	}
	if err := n.Restart(ctx); err == nil {
		t.Fatal("Restart of a running node: no error")
	}
	if n.DirectURL() != direct || n.Pid() == pid || n.Starts() != 2 {
		t.Fatalf("after Restart: %s (was %s), pid %d (was %d), starts %d", n.DirectURL(), direct, n.Pid(), pid, n.Starts())
	}
	if got := n.Args(); strings.Join(got, " ") != "--max-ttl 1h" {
		t.Fatalf("Args after Restart: %q", got)
	}
	if exited, _ := n.Exited(); exited {
		t.Fatal("Exited after Restart")
	}
	// Same data: the new grant's token is above the one before the kill.
	if tok2 := acquireTestToken(t, n.URL(), "life-2"); tok2 <= tok1 {
		t.Fatalf("token after restart %d, not above %d", tok2, tok1)
	}
	// The restart with --max-ttl 1h took: a 2h lease is refused.
	c := newTestClient(t, n.URL())
	if _, err := c.Acquire(ctx, "life-3", client.TTL(2*time.Hour)); err == nil {
		t.Fatal("a 2h TTL was accepted after a restart with --max-ttl 1h")
	}
	log, _ := os.ReadFile(n.Config().LogPath)
	if bytes.Count(log, []byte("start ")) < 2 || !bytes.Contains(log, []byte("--max-ttl 1h")) {
		t.Fatalf("the log file does not show both starts:\n%s", log)
	}

	pid = n.Pid()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d after Close: %v", pid, err)
	}
	if _, err := getStatus(n.URL()+"/readyz", 500*time.Millisecond); err == nil {
		t.Fatal("the proxy answers after Close")
	}
}

// A start that fails (a bad flag) says why, and leaves nothing behind.
func TestStartNodeFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := StartNode(ctx, NodeConfig{Bin: testFenceBin(t), DataDir: t.TempDir(), Args: []string{"--no-such-flag"}})
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("StartNode with a bad flag: %v", err)
	}
}

func isMountPoint(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(b, []byte(" "+dir+" "))
}

// The tmpfs data dir: mounted at the size asked, shrunk by FillDisk so that
// a new page cannot be had, given back by FreeDisk, unmounted by Close.
func TestNodeDisk(t *testing.T) {
	const size = 256 << 20
	n := startTestNode(t, NodeConfig{DiskBytes: size})
	dir := n.Config().DataDir
	if !isMountPoint(t, dir) {
		t.Fatalf("%s is not a mount point", dir)
	}
	used, total, err := n.DiskUsage()
	if err != nil {
		t.Fatal(err)
	}
	// raft-wal preallocates its first 64 MiB segment.
	if total != size || used < 64<<20 {
		t.Fatalf("disk: %d used of %d, want a 64 MiB segment of %d", used, total, size)
	}
	if err := n.FillDisk(); err != nil {
		t.Fatal(err)
	}
	if !n.DiskFull() {
		t.Fatal("DiskFull false after FillDisk")
	}
	used, total, _ = n.DiskUsage()
	if total-used > 64<<10 {
		t.Fatalf("after FillDisk: %d of %d used, %d free", used, total, total-used)
	}
	probe := filepath.Join(dir, "probe")
	err = os.WriteFile(probe, make([]byte, 1<<20), 0o644)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a 1 MiB write on the full disk: %v, want ENOSPC", err)
	}
	os.Remove(probe)
	if err := n.FreeDisk(); err != nil {
		t.Fatal(err)
	}
	if _, total, _ = n.DiskUsage(); total != size || n.DiskFull() {
		t.Fatalf("after FreeDisk: size %d, full %v", total, n.DiskFull())
	}
	if err := os.WriteFile(probe, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatalf("a write after FreeDisk: %v", err)
	}
	os.Remove(probe)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if isMountPoint(t, dir) {
		t.Fatalf("%s still mounted after Close", dir)
	}
}

// A 3-node raft cluster: started with a proxy on every directed peer link
// and each node behind its client proxy; the leader is found; isolating it
// elects another and leaves the old one unable to grant; a one-way cut
// blackholes the two right proxies; leadership moves where it is asked; a
// follower removed, wiped and re-added is a voter again with the state.
func TestCluster(t *testing.T) {
	bin := testFenceBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	t0 := time.Now()
	c, err := StartCluster(ctx, ClusterConfig{Nodes: 3, Bin: bin, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("%s output:\n%s", n.Name(), n.LogTail())
			}
		}
		c.Close()
	}()
	if !c.Raft() || len(c.Nodes) != 3 {
		t.Fatalf("Raft %v, %d nodes", c.Raft(), len(c.Nodes))
	}
	eps := c.Endpoints()
	for i, n := range c.Nodes {
		if eps[i] != n.URL() || n.RaftAddr() == "" || n.ID() != harness.NodeID(i) {
			t.Fatalf("node %d: endpoint %s url %s raft %q id %s", i, eps[i], n.URL(), n.RaftAddr(), n.ID())
		}
		for j := range c.Nodes {
			if l := c.Link(i, j); (l == nil) != (i == j) || l != nil && l.Upstream() != c.Nodes[j].RaftAddr() {
				t.Fatalf("link %d->%d: %v", i, j, l)
			}
		}
		// the dial map routes every peer through its link's proxy
		env := strings.Join(n.Config().Env, " ")
		for j := range c.Nodes {
			if j != i && !strings.Contains(env, c.Nodes[j].RaftAddr()+"="+c.Link(i, j).Addr()) {
				t.Fatalf("node %d env %q lacks the link to node %d", i, env, j)
			}
		}
	}
	t.Logf("%s started", time.Since(t0).Round(time.Millisecond))
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s leader", time.Since(t0).Round(time.Millisecond))
	// any node serves (a follower forwards); tokens from one counter
	tok1 := acquireTestToken(t, c.Nodes[(leader+1)%3].URL(), "cl-1")

	// The leader cut off from its peers: another is elected; the old one
	// grants nothing (its clients see it unavailable).
	if err := c.Partition([]int{leader}); err != nil {
		t.Fatal(err)
	}
	if got := len(c.LinkFaults()); got != 4*2 { // 4 links, each blackholed both ways
		t.Fatalf("link faults after isolating the leader: %v", c.LinkFaults())
	}
	next, err := c.WaitLeader(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	old := newTestClient(t, c.Nodes[leader].URL())
	actx, acancel := context.WithTimeout(ctx, 2*time.Second)
	if l, err := old.Acquire(actx, "cl-2", client.TTL(time.Minute)); err == nil {
		t.Fatalf("the isolated old leader granted token %d", l.Token())
	}
	acancel()
	t.Logf("%s isolated", time.Since(t0).Round(time.Millisecond))
	tok2 := acquireTestToken(t, c.Nodes[next].URL(), "cl-3")
	if err := c.HealLinks(); err != nil || len(c.LinkFaults()) != 0 {
		t.Fatalf("HealLinks: %v, left %v", err, c.LinkFaults())
	}
	// One way: only the requests of a->b and the replies of b->a.
	a, b := (next+1)%3, (next+2)%3
	if err := c.CutOneWay(a, b); err != nil {
		t.Fatal(err)
	}
	if got := c.Link(a, b).Toxics(); len(got) != 1 || got[0] != "blackhole_upstream" {
		t.Fatalf("link a->b: %v", got)
	}
	if got := c.Link(b, a).Toxics(); len(got) != 1 || got[0] != "blackhole_downstream" {
		t.Fatalf("link b->a: %v", got)
	}
	if len(c.LinkFaults()) != 2 {
		t.Fatalf("one-way cut touched other links: %v", c.LinkFaults())
	}
	c.HealLinks()

	t.Logf("%s oneway", time.Since(t0).Round(time.Millisecond))
	// Leadership moves to the node asked.
	target := (leader + 1) % 3
	if err := c.Transfer(ctx, target); err != nil {
		t.Fatal(err)
	}
	if l, err := c.Leader(ctx); err != nil || l != target {
		t.Fatalf("after Transfer to %d: leader %d, %v", target, l, err)
	}
	t.Logf("%s transferred", time.Since(t0).Round(time.Millisecond))
	// A follower removed, wiped and re-added: a voter again, with the state.
	f := (target + 1) % 3
	if err := c.RemoveMember(ctx, f); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Voters(ctx, target); err != nil || len(v) != 2 || slices.Contains(v, c.Nodes[f].ID()) {
		t.Fatalf("voters after removing %s: %v %v", c.Nodes[f].ID(), v, err)
	}
	starts := c.Nodes[f].Starts()
	var urls []string
	for _, j := range c.others([]int{f}) {
		urls = append(urls, c.Nodes[j].DirectURL())
	}
	if err := c.Nodes[f].Rejoin(ctx, urls); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Voters(ctx, target); err != nil || len(v) != 3 {
		t.Fatalf("voters after re-adding %s: %v %v", c.Nodes[f].ID(), v, err)
	}
	if c.Nodes[f].Starts() != starts+1 || !strings.Contains(strings.Join(c.Nodes[f].Config().Formation, " "), "--join") {
		t.Fatalf("after Rejoin: starts %d (was %d), formation %v", c.Nodes[f].Starts(), starts, c.Nodes[f].Config().Formation)
	}
	// It catches up (a snapshot or the log): its own state reaches the
	// token granted before it was removed. (It may say it is ready a
	// moment before: a fresh follower knows no commit index until the
	// leader's first successful append.)
	for {
		st, err := c.Nodes[f].Status(ctx)
		if err == nil && st.LastToken >= tok2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the re-added node's status: %v %v (last token before: %d)", st, err, tok2)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s rejoined", time.Since(t0).Round(time.Millisecond))
	if tok3 := acquireTestToken(t, c.Nodes[f].URL(), "cl-4"); tok3 <= tok2 || tok2 <= tok1 {
		t.Fatalf("tokens %d, %d, %d: not increasing", tok1, tok2, tok3)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if n.Running() {
			t.Fatal("a node runs after Cluster.Close")
		}
	}
}
