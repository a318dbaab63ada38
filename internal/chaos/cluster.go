package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// NodeConfig is one Fence server process: `Bin serve --listen Listen
// --data-dir DataDir Args...`.
type NodeConfig struct {
	Bin     string // the fence binary
	DataDir string // the node's data dir (kept across restarts)
	// Listen is the node's own address, 127.0.0.1:port, kept across
	// restarts so that its proxy's upstream stays valid. Empty: StartNode
	// picks a free port (and another one if the first start finds it taken).
	Listen string
	Args   []string // more `fence serve` flags, on every start
	Env    []string // added to the harness's environment
	// DiskBytes > 0 puts DataDir on a tmpfs of that size, mounted by
	// StartNode and unmounted by Close (FillDisk/FreeDisk resize it). raft-wal
	// preallocates 64 MiB segments: give it at least 256 MiB.
	DiskBytes int64
	// LogPath receives the process's stdout and stderr, appended across
	// restarts with a header line per start (empty: only the last 16 KiB
	// are kept in memory, for error messages).
	LogPath string
	// Name names the node in logs and its proxy (default "node-PORT").
	Name string
	// ReadyTimeout bounds a start's wait for /readyz (default 60s).
	ReadyTimeout time.Duration
}

// Node is a Fence server process behind its Proxy. Its methods are safe for
// concurrent use.
type Node struct {
	cfg   NodeConfig
	proxy *Proxy
	log   io.Writer // file (if any) and tail
	logf  *os.File
	tail  *tailBuffer

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed once cmd is reaped
	state   *os.ProcessState
	paused  bool
	starts  int
	mounted bool
	filled  bool
	closed  bool
	args    []string // the extra args of the current process
}

// ErrNoDisk: FillDisk/FreeDisk on a node without a tmpfs (DiskBytes 0).
var ErrNoDisk = errors.New("chaos: node has no size-limited disk (NodeConfig.DiskBytes is 0)")

// StartNode mounts the node's tmpfs (if DiskBytes > 0), starts the process,
// waits until GET /readyz answers 200 and starts its proxy. On an error
// nothing is left running or mounted.
func StartNode(ctx context.Context, cfg NodeConfig) (_ *Node, err error) {
	if cfg.Bin == "" || cfg.DataDir == "" {
		return nil, errors.New("chaos: NodeConfig needs Bin and DataDir")
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 60 * time.Second
	}
	n := &Node{cfg: cfg, tail: &tailBuffer{max: 16 << 10}}
	n.log = n.tail
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	if cfg.LogPath != "" {
		f, err := os.OpenFile(cfg.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		n.logf = f
		n.log = io.MultiWriter(f, n.tail)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	if cfg.DiskBytes > 0 {
		if err := unix.Mount("tmpfs", cfg.DataDir, "tmpfs", 0, "size="+strconv.FormatInt(cfg.DiskBytes, 10)); err != nil {
			return nil, fmt.Errorf("chaos: mount a tmpfs of %d bytes at %s: %w", cfg.DiskBytes, cfg.DataDir, err)
		}
		n.mounted = true
	}
	pickPort := cfg.Listen == ""
	for attempt := 0; ; attempt++ {
		if pickPort {
			if n.cfg.Listen, err = freeLoopbackAddr(); err != nil {
				return nil, err
			}
		}
		err = n.start(ctx, nil)
		if err == nil || !pickPort || attempt == 4 || !strings.Contains(n.tail.lastStart(), "address already in use") {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if n.cfg.Name == "" {
		n.cfg.Name = "node-" + n.cfg.Listen[strings.LastIndexByte(n.cfg.Listen, ':')+1:]
	}
	if n.proxy, err = NewProxy(n.cfg.Name, n.cfg.Listen); err != nil {
		return nil, err
	}
	return n, nil
}

func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// start runs the process with cfg.Args+extra and waits until it is ready.
func (n *Node) start(ctx context.Context, extra []string) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return errors.New("chaos: node closed")
	}
	if n.running() {
		n.mu.Unlock()
		return fmt.Errorf("chaos: %s is still running", n.name())
	}
	args := append([]string{"serve", "--listen", n.cfg.Listen, "--data-dir", n.cfg.DataDir}, n.cfg.Args...)
	args = append(args, extra...)
	n.starts++
	fmt.Fprintf(n.log, "=== %s start %d at %s: %s %s\n", n.name(), n.starts,
		time.Now().UTC().Format(time.RFC3339Nano), n.cfg.Bin, strings.Join(args, " "))
	cmd := exec.Command(n.cfg.Bin, args...)
	cmd.Env = append(os.Environ(), n.cfg.Env...)
	cmd.Stdout, cmd.Stderr = n.log, n.log
	// The server dies with the harness, even a harness killed with -9.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		n.mu.Unlock()
		return fmt.Errorf("chaos: start %s: %w", n.cfg.Bin, err)
	}
	done := make(chan struct{})
	n.cmd, n.done, n.state, n.paused, n.args = cmd, done, nil, false, extra
	go func() {
		cmd.Wait()
		n.mu.Lock()
		n.state = cmd.ProcessState
		n.mu.Unlock()
		close(done)
	}()
	n.mu.Unlock()
	return n.waitReady(ctx, done)
}

func (n *Node) name() string {
	if n.cfg.Name != "" {
		return n.cfg.Name
	}
	return "node " + n.cfg.Listen
}

// running: the current process has been started and not reaped (n.mu held).
func (n *Node) running() bool {
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

var readyClient = &http.Client{
	Timeout:   time.Second,
	Transport: &http.Transport{DisableKeepAlives: true},
}

func (n *Node) waitReady(ctx context.Context, done chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ReadyTimeout)
	defer cancel()
	url := n.DirectURL() + "/readyz"
	for {
		select {
		case <-done:
			n.mu.Lock()
			st := n.state
			n.mu.Unlock()
			return fmt.Errorf("chaos: %s exited before it was ready (%v); its output:\n%s", n.name(), st, n.tail.lastStart())
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := readyClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: %s not ready: %w; its output:\n%s", n.name(), ctx.Err(), n.tail.lastStart())
		case <-done:
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// Ready reports whether GET /readyz answers 200 now (one try, up to 1s).
func (n *Node) Ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.DirectURL()+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := readyClient.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Config is the node's configuration (Listen and Name filled in).
func (n *Node) Config() NodeConfig { return n.cfg }

// Name is the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// URL is the node's base URL through its proxy (http://127.0.0.1:port):
// what clients use.
func (n *Node) URL() string { return "http://" + n.proxy.Addr() }

// DirectURL is the node's own base URL, bypassing the proxy.
func (n *Node) DirectURL() string { return "http://" + n.cfg.Listen }

// Proxy is the proxy in front of the node.
func (n *Node) Proxy() *Proxy { return n.proxy }

// Pid is the current process's id (0 before the first start).
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Starts counts the processes started.
func (n *Node) Starts() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.starts
}

// Args are the extra args of the current process (Restart's extraArgs).
func (n *Node) Args() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.args...)
}

// Running reports whether the current process is alive (paused counts).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.running()
}

// Paused reports whether the process was stopped by Pause and not resumed.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused && n.running()
}

// Exited reports whether the current process has exited, and its exit code
// (-1 when a signal ended it).
func (n *Node) Exited() (bool, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state == nil {
		return false, 0
	}
	return true, n.state.ExitCode()
}

// ExitState is the current process's state once it has exited (nil before).
func (n *Node) ExitState() *os.ProcessState {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state
}

// Done is closed when the current process has exited and been reaped.
func (n *Node) Done() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return n.done
}

// LogTail is the last 16 KiB of the node's output (all starts).
func (n *Node) LogTail() string { return n.tail.String() }

// Kill sends SIGKILL to the process (paused or not) and waits until it is
// reaped. A process that has already exited is left as it is.
func (n *Node) Kill() error {
	n.mu.Lock()
	if !n.running() {
		n.mu.Unlock()
		return nil
	}
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("chaos: kill %s: %w", n.name(), err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("chaos: %s not reaped 30s after SIGKILL", n.name())
	}
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
	return nil
}

// Restart starts the process again (after Kill, or after it exited) on the
// same address and data dir with cfg.Args+extraArgs, and waits until it is
// ready. It fails if the process is still running. If the port is briefly
// taken, it tries again for up to ReadyTimeout.
func (n *Node) Restart(ctx context.Context, extraArgs ...string) error {
	deadline := time.Now().Add(n.cfg.ReadyTimeout)
	for {
		err := n.start(ctx, extraArgs)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) ||
			!strings.Contains(n.tail.lastStart(), "address already in use") {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Pause stops the process with SIGSTOP.
func (n *Node) Pause() error { return n.signal(syscall.SIGSTOP, true) }

// Resume continues a paused process with SIGCONT (a no-op for a process
// that is not running).
func (n *Node) Resume() error { return n.signal(syscall.SIGCONT, false) }

func (n *Node) signal(sig syscall.Signal, pause bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.running() {
		if pause {
			return fmt.Errorf("chaos: pause %s: not running (%v)", n.name(), n.state)
		}
		n.paused = false
		return nil
	}
	if err := n.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("chaos: %v to %s: %w", sig, n.name(), err)
	}
	n.paused = pause
	// The signal is delivered asynchronously: wait (up to 2s) until the
	// process is seen stopped, or running again.
	for i := 0; i < 200; i++ {
		stopped, err := procStopped(n.cmd.Process.Pid)
		if err != nil || stopped == pause {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// procStopped reads from /proc whether pid is stopped (state T).
func procStopped(pid int) (bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return false, fmt.Errorf("chaos: /proc/%d/stat: %q", pid, b)
	}
	return b[i+2] == 'T' || b[i+2] == 't', nil
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
	return fmt.Errorf("chaos: fill the disk of %s: %w", n.name(), err)
}

// FreeDisk gives the tmpfs its DiskBytes back.
func (n *Node) FreeDisk() error {
	if !n.mounted {
		return ErrNoDisk
	}
	if err := n.remount(n.cfg.DiskBytes); err != nil {
		return fmt.Errorf("chaos: free the disk of %s: %w", n.name(), err)
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
	n.mu.Unlock()
	errs := []error{n.Kill()}
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
	if n.logf != nil {
		errs = append(errs, n.logf.Close())
	}
	return errors.Join(errs...)
}

// Cluster is the nodes of a run. It has one node today; the cluster issue
// gives it more (and the nemesis faults between them): everything here
// addresses nodes by index.
type Cluster struct {
	Nodes []*Node
}

// StartCluster starts a node per config; on an error the nodes started are
// closed.
func StartCluster(ctx context.Context, cfgs []NodeConfig) (*Cluster, error) {
	c := &Cluster{}
	for _, cfg := range cfgs {
		n, err := StartNode(ctx, cfg)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
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

// Node is Nodes[i], or an error naming the bad index.
func (c *Cluster) Node(i int) (*Node, error) {
	if c == nil || i < 0 || i >= len(c.Nodes) {
		return nil, fmt.Errorf("chaos: no node %d", i)
	}
	return c.Nodes[i], nil
}

// Close closes every node.
func (c *Cluster) Close() error {
	var errs []error
	for _, n := range c.Nodes {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// lastStart is the output since the last start header (its line included).
func (t *tailBuffer) lastStart() string {
	s := t.String()
	if i := strings.LastIndex(s, "\n=== "); i >= 0 {
		return s[i+1:]
	}
	return s
}
