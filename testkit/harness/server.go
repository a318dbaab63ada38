package harness

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config is one `fence serve` process:
//
//	Bin serve --listen Listen --data-dir DataDir [--node-id ID --raft-addr RaftAddr] Args... [restart args...]
//
// with Env added to the caller's environment.
type Config struct {
	// Bin is the fence binary (empty: FenceBinary()).
	Bin string
	// ID names the process in its log headers and errors; with RaftAddr
	// it is also the raft server id (--node-id).
	ID string
	// DataDir is the node's data directory, kept across restarts. Required
	// (tests use a t.TempDir; see StartT).
	DataDir string
	// Listen is the client address, 127.0.0.1:port. Empty: Start picks a
	// free port (another if the first is taken). Kept across restarts, so
	// clients keep their URL.
	Listen string
	// RaftAddr, when set, makes the process a cluster node (--raft-addr,
	// --node-id ID). "auto" picks a free port like Listen. Kept across
	// restarts (the raft configuration holds it).
	RaftAddr string
	// Args are more `fence serve` flags, given on every start.
	Args []string
	// Env is added to the environment on every start (e.g.
	// FENCE_TEST_DIAL_MAP, FENCE_TEST_CLOCK_OFFSET).
	Env []string
	// LogPath, when set, receives the output too, appended across starts.
	LogPath string
	// LogLimit > 0 keeps only the last LogLimit bytes of output in memory
	// (0: all of it — fine for a test, not for a 10-minute chaos run).
	LogLimit int
	// ReadyTimeout bounds a start's wait for /readyz (default 60s).
	ReadyTimeout time.Duration
	// StopTimeout bounds Stop's wait after SIGTERM, and Kill's after SIGKILL
	// (default 30s); a process still there after Stop's is killed.
	StopTimeout time.Duration
	// NoWait: Start and Restart return once the process runs, without
	// waiting for /readyz (call WaitReady): e.g. a node restarted into a
	// minority, which cannot be ready.
	NoWait bool
	// ClientTLS, when set, says the server serves its client port over
	// TLS (its Args carry --cert-file and --key-file): URL is https:// and
	// the /readyz checks use this configuration (its RootCAs trust the
	// server's CA).
	ClientTLS *tls.Config
	// AuthToken, when set, is sent as `Authorization: Bearer AuthToken`
	// on the harness's own calls (/readyz, NodeStatus, membership);
	// SetAuthToken changes it (a server whose auth is bootstrapped after
	// it started).
	AuthToken string
}

// Server is a `fence serve` process and its data directory, which outlives
// the process so it can be restarted. Its methods are safe for concurrent
// use.
type Server struct {
	cfg     Config
	log     *logBuffer
	logf    *os.File
	out     io.Writer
	pickL   bool // Listen was picked here (a bind failure may pick another)
	pickR   bool // RaftAddr likewise
	readyCl *http.Client

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed once cmd is reaped
	state    *os.ProcessState
	paused   bool
	starts   int
	closed   bool
	extra    []string // args of the last Restart
	extraEnv []string // env of the last RestartEnv
}

// startHeader begins the log line written before each start.
const startHeader = "=== "

// Start starts the process and (unless cfg.NoWait) waits until GET /readyz
// answers 200. On an error nothing is left running; the error carries the
// tail of the process's output.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.firstStart(ctx, !cfg.NoWait); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func newServer(cfg Config) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("harness: Config.DataDir is required")
	}
	if cfg.Bin == "" {
		bin, err := FenceBinary()
		if err != nil {
			return nil, err
		}
		cfg.Bin = bin
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 60 * time.Second
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 30 * time.Second
	}
	s := &Server{
		cfg:   cfg,
		log:   &logBuffer{max: cfg.LogLimit},
		pickL: cfg.Listen == "",
		pickR: cfg.RaftAddr == "auto",
	}
	s.readyCl = &http.Client{
		Timeout:   time.Second,
		Transport: &authTransport{&http.Transport{DisableKeepAlives: true, TLSClientConfig: cfg.ClientTLS}, s.authToken},
	}
	s.out = s.log
	if cfg.LogPath != "" {
		f, err := os.OpenFile(cfg.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		s.logf = f
		s.out = io.MultiWriter(f, s.log)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	return s, nil
}

// firstStart picks the ports it must and starts; a bind failure on a port
// it picked is retried on another (up to 5 tries).
func (s *Server) firstStart(ctx context.Context, wait bool) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if s.pickL {
			if s.cfg.Listen, err = FreeAddr(); err != nil {
				return err
			}
		}
		if s.pickR {
			if s.cfg.RaftAddr, err = FreeAddr(); err != nil {
				return err
			}
		}
		if s.cfg.ID == "" {
			s.cfg.ID = "fence-" + s.cfg.Listen[strings.LastIndexByte(s.cfg.Listen, ':')+1:]
		}
		err = s.start(ctx, wait)
		if err == nil || !(s.pickL || s.pickR) || !addrInUse(s.log.since(startHeader)) {
			return err
		}
	}
	return err
}

// args is the command line of the next start (s.mu held).
func (s *Server) args() []string {
	a := []string{"serve", "--listen", s.cfg.Listen, "--data-dir", s.cfg.DataDir}
	if s.cfg.RaftAddr != "" {
		a = append(a, "--node-id", s.cfg.ID, "--raft-addr", s.cfg.RaftAddr)
	}
	a = append(a, s.cfg.Args...)
	return append(a, s.extra...)
}

// start runs the process and, if wait, waits for it to be ready.
func (s *Server) start(ctx context.Context, wait bool) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("harness: %s is closed", s.cfg.ID)
	}
	if s.running() {
		s.mu.Unlock()
		return fmt.Errorf("harness: %s is still running", s.cfg.ID)
	}
	args := s.args()
	env := append(append([]string(nil), s.cfg.Env...), s.extraEnv...)
	s.starts++
	fmt.Fprintf(s.out, "%s%s start %d at %s: %s %s %s\n", startHeader, s.cfg.ID, s.starts,
		time.Now().UTC().Format("15:04:05.000"), strings.Join(env, " "), s.cfg.Bin, strings.Join(args, " "))
	cmd := exec.Command(s.cfg.Bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = s.out, s.out
	// The server dies with its parent, even one killed with -9.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("harness: start %s: %w", s.cfg.Bin, err)
	}
	done := make(chan struct{})
	s.cmd, s.done, s.state, s.paused = cmd, done, nil, false
	go func() {
		cmd.Wait()
		s.mu.Lock()
		s.state = cmd.ProcessState
		s.mu.Unlock()
		close(done)
	}()
	s.mu.Unlock()
	if !wait {
		return nil
	}
	return s.WaitReady(ctx)
}

// WaitReady polls GET /readyz until it answers 200, the process exits, ctx
// ends or ReadyTimeout passes.
func (s *Server) WaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer cancel()
	done := s.Done()
	for {
		select {
		case <-done:
			return fmt.Errorf("harness: %s exited before it was ready (%v); its output:\n%s",
				s.cfg.ID, s.ExitState(), tail(s.log.since(startHeader), 8<<10))
		default:
		}
		if s.Ready(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("harness: %s not ready: %w; its output:\n%s",
				s.cfg.ID, ctx.Err(), tail(s.log.since(startHeader), 8<<10))
		case <-done:
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// Ready reports whether GET /readyz answers 200 now (one try, up to 1s).
func (s *Server) Ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := s.readyCl.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// running: the current process was started and not reaped (s.mu held).
func (s *Server) running() bool {
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// ID is the node's id (Config.ID, or fence-PORT).
func (s *Server) ID() string { return s.cfg.ID }

// Config is the configuration with the picked addresses filled in.
func (s *Server) Config() Config { return s.cfg }

// Addr is the client address, 127.0.0.1:port.
func (s *Server) Addr() string { return s.cfg.Listen }

// HTTPClient is an HTTP client for this server's client port: its TLS
// configuration and bearer token (Config.ClientTLS, Config.AuthToken), no
// keep-alive, no timeout of its own (callers bound their calls).
func (s *Server) HTTPClient() *http.Client {
	return &http.Client{Transport: &authTransport{&http.Transport{DisableKeepAlives: true, TLSClientConfig: s.cfg.ClientTLS}, s.authToken}}
}

// authTransport adds the bearer token, if any, to every request.
type authTransport struct {
	base  *http.Transport
	token func() string
}

func (t *authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if tok := t.token(); tok != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	return t.base.RoundTrip(r)
}

// SetAuthToken sets the bearer token of the harness's own calls (see
// Config.AuthToken).
func (s *Server) SetAuthToken(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.AuthToken = tok
}

func (s *Server) authToken() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.AuthToken
}

// URL is the client base URL, http://127.0.0.1:port (https:// with
// Config.ClientTLS).
func (s *Server) URL() string {
	if s.cfg.ClientTLS != nil {
		return "https://" + s.cfg.Listen
	}
	return "http://" + s.cfg.Listen
}

// RaftAddr is the raft address ("" for a single node without one).
func (s *Server) RaftAddr() string { return s.cfg.RaftAddr }

// DataDir is the data directory.
func (s *Server) DataDir() string { return s.cfg.DataDir }

// Bin is the binary the process runs.
func (s *Server) Bin() string { return s.cfg.Bin }

// Pid is the current process's id (0 before the first start).
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Starts counts the processes started.
func (s *Server) Starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts
}

// Args are the extra args of the last Restart.
func (s *Server) Args() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.extra...)
}

// Running reports whether the current process is alive (a paused one is).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running()
}

// Paused reports whether the process was stopped by Pause and not resumed.
func (s *Server) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused && s.running()
}

// Done is closed when the current process has exited and been reaped
// (already closed before the first start).
func (s *Server) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.done
}

// ExitState is the current process's state once it has exited (nil before).
func (s *Server) ExitState() *os.ProcessState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Log is the output of every start, each after a "=== ID start N" header
// line (only the last LogLimit bytes if that is set).
func (s *Server) Log() string { return s.log.String() }

// LastLog is the output of the current (or last) start, its header included.
func (s *Server) LastLog() string { return s.log.since(startHeader) }

// LogTail is the last n bytes of Log, from a line start.
func (s *Server) LogTail(n int) string { return tail(s.log.String(), n) }

// Signal sends sig to the current process (nothing if it is not running).
func (s *Server) Signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running() {
		return nil
	}
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("harness: %v to %s: %w", sig, s.cfg.ID, err)
	}
	return nil
}

// Stop sends SIGTERM (resuming a paused process first) and waits up to
// StopTimeout for it to exit; a graceful shutdown exits 0, anything else is
// an error. A process that does not exit in time is killed (an error too).
// Stop on a process that is not running returns nil.
func (s *Server) Stop() error {
	s.mu.Lock()
	if !s.running() {
		s.mu.Unlock()
		return nil
	}
	cmd, done, paused := s.cmd, s.done, s.paused
	s.mu.Unlock()
	cmd.Process.Signal(syscall.SIGTERM)
	if paused {
		cmd.Process.Signal(syscall.SIGCONT)
	}
	select {
	case <-done:
	case <-time.After(s.cfg.StopTimeout):
		// SIGQUIT first: the Go runtime writes every goroutine's stack
		// to stderr (the node's log) and exits, so a hung shutdown
		// leaves the trace that says where it hung.
		cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		return fmt.Errorf("harness: %s did not exit %v after SIGTERM; SIGQUIT (its goroutines are in its log), then killed; its output:\n%s",
			s.cfg.ID, s.cfg.StopTimeout, tail(s.LastLog(), 8<<10))
	}
	s.mu.Lock()
	s.paused = false
	st := s.state
	s.mu.Unlock()
	if !st.Success() {
		return fmt.Errorf("harness: %s after SIGTERM: %v, want exit status 0; its output:\n%s",
			s.cfg.ID, st, tail(s.LastLog(), 8<<10))
	}
	return nil
}

// Kill sends SIGKILL (paused or not) and waits until the process is
// reaped. A process that is not running is left as it is.
func (s *Server) Kill() error {
	s.mu.Lock()
	if !s.running() {
		s.mu.Unlock()
		return nil
	}
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("harness: kill %s: %w", s.cfg.ID, err)
	}
	select {
	case <-done:
	case <-time.After(s.cfg.StopTimeout):
		return fmt.Errorf("harness: %s not reaped %v after SIGKILL", s.cfg.ID, s.cfg.StopTimeout)
	}
	s.mu.Lock()
	s.paused = false
	s.mu.Unlock()
	return nil
}

// Pause stops the process with SIGSTOP and waits (up to 2s) until /proc
// shows it stopped.
func (s *Server) Pause() error { return s.pause(true) }

// Resume continues a paused process with SIGCONT (nothing for a process
// that is not running).
func (s *Server) Resume() error { return s.pause(false) }

func (s *Server) pause(stop bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running() {
		if stop {
			return fmt.Errorf("harness: pause %s: not running (%v)", s.cfg.ID, s.state)
		}
		s.paused = false
		return nil
	}
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("harness: %v to %s: %w", sig, s.cfg.ID, err)
	}
	s.paused = stop
	// The signal is delivered asynchronously: wait until /proc agrees.
	for i := 0; i < 200; i++ {
		stopped, err := ProcStopped(s.cmd.Process.Pid)
		if err != nil || stopped == stop {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// ProcStopped reads from /proc whether pid is stopped (state T or t).
func ProcStopped(pid int) (bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return false, fmt.Errorf("harness: /proc/%d/stat: %q", pid, b)
	}
	return b[i+2] == 'T' || b[i+2] == 't', nil
}

// Restart starts the process again (after Stop, Kill or an exit) on the
// same addresses and data directory with Config.Args then extraArgs (which
// replace the previous Restart's; none: Config.Args alone), and waits until
// it is ready (unless NoWait). The environment is the last one
// (RestartEnv's, if any). A port taken for a moment is tried again until
// ReadyTimeout.
func (s *Server) Restart(ctx context.Context, extraArgs ...string) error {
	if err := s.setRestart(extraArgs, nil, false); err != nil {
		return err
	}
	return s.restart(ctx)
}

// setRestart records the args (and env, if setEnv) of the next start,
// unless the process is still running: a refused restart changes nothing.
func (s *Server) setRestart(args, env []string, setEnv bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running() {
		return fmt.Errorf("harness: %s is still running", s.cfg.ID)
	}
	s.extra = append([]string(nil), args...)
	if setEnv {
		s.extraEnv = append([]string(nil), env...)
	}
	return nil
}

// RestartEnv is Restart with env added to Config.Env for this and later
// starts (replacing the previous RestartEnv's): e.g. a node restarted with
// FENCE_TEST_CLOCK_OFFSET=1h.
func (s *Server) RestartEnv(ctx context.Context, env []string, extraArgs ...string) error {
	if err := s.setRestart(extraArgs, env, true); err != nil {
		return err
	}
	return s.restart(ctx)
}

// Launch is Restart without the wait for /readyz, whatever NoWait says:
// for a node that cannot be ready (restarted into a minority, or after its
// removal from the cluster). It returns once the process runs.
func (s *Server) Launch(ctx context.Context, extraArgs ...string) error {
	if err := s.setRestart(extraArgs, nil, false); err != nil {
		return err
	}
	return s.start(ctx, false)
}

func (s *Server) restart(ctx context.Context) error {
	deadline := time.Now().Add(s.cfg.ReadyTimeout)
	for {
		err := s.start(ctx, !s.cfg.NoWait)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) || !addrInUse(s.LastLog()) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Close kills the process and closes the log file. It is idempotent; the
// data directory is left (it belongs to the caller).
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	err := s.Kill()
	if s.logf != nil {
		err = errors.Join(err, s.logf.Close())
	}
	return err
}
