package system_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenceworks/fence/internal/testutil"
)

// hangGuard bounds every wait in the harness. It is not a timing assertion:
// it only turns a hung process into a failure with its log instead of a test
// binary killed by -timeout with nothing said.
const hangGuard = 90 * time.Second

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fence-system-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "system_test:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildMu   sync.Mutex
	built     = map[string]string{} // package path -> binary, or "" after a failed build
	buildErrs = map[string]error{}
)

// binary builds the main package pkg (relative to the module root) once per
// test run and returns the path of the executable. Under -race the program
// is built with -race as well (see checkRaces).
func binary(t testing.TB, pkg string) string {
	t.Helper()
	return build(t, pkg, raceEnabled)
}

// plainBinary is binary without -race, for the tests whose point is scale
// (tens of thousands of operations, which the race detector slows ~5x);
// the same code runs under -race in the package tests and the other
// system tests.
func plainBinary(t testing.TB, pkg string) string {
	t.Helper()
	return build(t, pkg, false)
}

func build(t testing.TB, pkg string, race bool) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	key := pkg
	if !race && raceEnabled {
		key += " (no race)"
	}
	if err, ok := buildErrs[key]; ok {
		t.Fatalf("build %s failed earlier: %v", key, err)
	}
	if path, ok := built[key]; ok {
		return path
	}
	out := filepath.Join(binDir, strings.ReplaceAll(strings.Trim(pkg, "./"), "/", "_"))
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	} else if raceEnabled {
		out += "-norace"
		args[2] = out
	}
	cmd := exec.Command(goTool(), append(args, pkg)...)
	cmd.Dir = moduleRoot(t)
	if msg, err := cmd.CombinedOutput(); err != nil {
		buildErrs[key] = fmt.Errorf("%v\n%s", err, msg)
		t.Fatalf("go build %s: %v\n%s", pkg, err, msg)
	}
	built[key] = out
	return out
}

// checkRaces fails the test if a program built with -race reported a data
// race in its output (a process killed with SIGKILL reports nothing of the
// races it had not yet printed).
func checkRaces(t testing.TB, name, output string) {
	t.Helper()
	if strings.Contains(output, "WARNING: DATA RACE") {
		t.Errorf("%s reported a data race", name)
	}
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// moduleRoot is the directory holding go.mod (the tests run in system_test/).
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", dir, err)
	}
	return dir
}

func fenceBinary(t testing.TB) string { return binary(t, "./cmd/fence") }

// fenceServer is one `fence serve` process and its data directory, which
// outlives the process so that the server can be restarted on it.
type fenceServer struct {
	t       testing.TB
	bin     string
	dataDir string
	addr    string
	log     testutil.Buffer
	starts  int
	// extraArgs are added to every `fence serve` start (e.g. --log-store).
	extraArgs []string

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	state  *os.ProcessState
}

// startServer starts `fence serve` on a free loopback port with a fresh data
// directory and waits until /readyz answers 200. The process is killed at the
// end of the test; its output is logged if the test failed.
func startServer(t testing.TB, extraArgs ...string) *fenceServer {
	t.Helper()
	return startServerIn(t, filepath.Join(t.TempDir(), "data"), extraArgs...)
}

// startServerIn is startServer with the data directory at dataDir.
func startServerIn(t testing.TB, dataDir string, extraArgs ...string) *fenceServer {
	t.Helper()
	return startServerWith(t, fenceBinary(t), dataDir, extraArgs...)
}

// startServerWith is startServerIn with the fence binary bin.
func startServerWith(t testing.TB, bin, dataDir string, extraArgs ...string) *fenceServer {
	t.Helper()
	s := &fenceServer{t: t, bin: bin, dataDir: dataDir, extraArgs: extraArgs}
	t.Cleanup(func() {
		if s.running() {
			s.cmd.Process.Kill()
			<-s.exited
		}
		checkRaces(t, "fence serve", s.log.String())
		if t.Failed() {
			t.Logf("fence serve output (%s):\n%s", s.dataDir, s.log.String())
		}
	})
	s.start()
	return s
}

// URL is the server's base URL, e.g. http://127.0.0.1:41234.
func (s *fenceServer) URL() string { return "http://" + s.addr }

func (s *fenceServer) running() bool {
	if s.exited == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// start runs the server on s.dataDir, on the previous address if it had one
// (so clients keep their URL across a restart), else on a fresh free port;
// a bind failure retries on another port.
func (s *fenceServer) start() {
	s.t.Helper()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		if s.addr == "" || attempt > 0 {
			s.addr = testutil.FreeAddr(s.t)
		}
		s.starts++
		fmt.Fprintf(&s.log, "=== start %d: serve --listen %s --data-dir %s %s\n", s.starts, s.addr, s.dataDir, strings.Join(s.extraArgs, " "))
		cmd := exec.Command(s.bin, append([]string{"serve", "--listen", s.addr, "--data-dir", s.dataDir}, s.extraArgs...)...)
		cmd.Stdout = &s.log
		cmd.Stderr = &s.log
		if err := cmd.Start(); err != nil {
			s.t.Fatalf("start fence serve: %v", err)
		}
		s.cmd, s.exited, s.state = cmd, make(chan struct{}), nil
		exited := s.exited
		go func() {
			cmd.Wait()
			s.state = cmd.ProcessState
			close(exited)
		}()
		if lastErr = s.waitReady(); lastErr == nil {
			return
		}
		if s.running() {
			s.t.Fatalf("fence serve on %s: %v\n%s", s.addr, lastErr, s.log.String())
		}
		// It exited before it was ready: most likely the port was taken.
	}
	s.t.Fatalf("fence serve did not start: %v\n%s", lastErr, s.log.String())
}

// waitReady polls /readyz until it answers 200, the process exits, or the
// hang guard runs out.
func (s *fenceServer) waitReady() error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(hangGuard)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("exited before ready: %v", s.state)
		default:
		}
		resp, err := client.Get(s.URL() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("/readyz did not answer 200")
}

// Stop sends SIGTERM and waits for the process to exit; a graceful shutdown
// must exit with status 0.
func (s *fenceServer) Stop() {
	s.t.Helper()
	if !s.running() {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.wait()
	if !s.state.Success() {
		s.t.Errorf("fence serve after SIGTERM: %v, want exit status 0", s.state)
	}
}

// Kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (s *fenceServer) Kill() {
	s.t.Helper()
	if !s.running() {
		s.t.Fatalf("Kill: fence serve is not running: %v", s.state)
	}
	s.cmd.Process.Kill()
	s.wait()
}

// Restart starts the server again on the same data directory.
func (s *fenceServer) Restart() {
	s.t.Helper()
	if s.running() {
		s.t.Fatal("Restart: fence serve is still running")
	}
	s.start()
}

func (s *fenceServer) wait() {
	s.t.Helper()
	select {
	case <-s.exited:
	case <-time.After(hangGuard):
		s.cmd.Process.Kill()
		<-s.exited
		s.t.Fatalf("fence serve did not exit; killed")
	}
}

// proc is a helper process (a worker, the CLI) whose stdout is read line by
// line, and whose stdin the test writes to.
type proc struct {
	t     testing.TB
	name  string
	cmd   *exec.Cmd
	stdin interface {
		Write([]byte) (int, error)
		Close() error
	}
	lines  chan string
	output testutil.Buffer // stdout and stderr, for the log
	exited chan struct{}
	state  *os.ProcessState
}

// startProc starts bin with args and env added to the environment. It is
// killed at the end of the test, and its output logged if the test failed.
func startProc(t testing.TB, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, lines: make(chan string, 100), exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = &p.output
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintf(&p.output, "%s\n", sc.Text())
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill() // works on a stopped process too
			if !p.drainUntilExited(time.After(hangGuard)) {
				t.Errorf("%s: its output did not end %v after SIGKILL (a child of it still holds stdout?)", name, hangGuard)
			}
		}
		checkRaces(t, name, p.output.String())
		if t.Failed() {
			t.Logf("%s %q output:\n%s", name, args, p.output.String())
		}
	})
	return p
}

// Line returns the next line the process printed; it fails the test if the
// process ends first.
func (p *proc) Line() string {
	p.t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			<-p.exited
			p.t.Fatalf("%s ended (%v) without printing the expected line; output:\n%s", p.name, p.state, p.output.String())
		}
		return line
	case <-time.After(hangGuard):
		p.t.Fatalf("%s printed nothing; output so far:\n%s", p.name, p.output.String())
	}
	return ""
}

// Send writes one line to the process's stdin.
func (p *proc) Send(line string) {
	p.t.Helper()
	if _, err := p.stdin.Write([]byte(line + "\n")); err != nil {
		p.t.Fatalf("write to %s: %v", p.name, err)
	}
}

// Signal delivers sig to the process.
func (p *proc) Signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v to %s: %v", sig, p.name, err)
	}
}

// Wait waits for the process to exit and returns its exit code. A process
// that does not exit within hangGuard is killed and fails the test.
func (p *proc) Wait() int {
	p.t.Helper()
	if !p.drainUntilExited(time.After(hangGuard)) {
		p.cmd.Process.Kill()
		p.t.Fatalf("%s did not exit within %v; killed; output:\n%s", p.name, hangGuard, p.output.String())
	}
	return p.state.ExitCode()
}

// drainUntilExited discards unread lines (so the reader can reach the end of
// the output) until the process has been waited for, and reports false if
// timeout fires first. The drain itself is bounded: the lines end only when
// the process and everything that inherited its stdout have exited.
func (p *proc) drainUntilExited(timeout <-chan time.Time) bool {
	lines := p.lines
	for {
		select {
		case _, ok := <-lines:
			if !ok {
				lines = nil
			}
		case <-p.exited:
			return true
		case <-timeout:
			return false
		}
	}
}

// field returns the value of key=value in a worker's output line.
func field(t testing.TB, line, key string) string {
	t.Helper()
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s= in %q", key, line)
	return ""
}

func fieldUint(t testing.TB, line, key string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(field(t, line, key), 10, 64)
	if err != nil {
		t.Fatalf("%s in %q: %v", key, line, err)
	}
	return n
}

// runCLI runs the fence CLI against srv to completion and returns its stdout,
// stderr and exit code. The server is given by FENCE_SERVER so the flag's
// position does not matter.
func runCLI(t testing.TB, srv *fenceServer, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, fenceBinary(t), args...)
	cmd.Env = append(os.Environ(), "FENCE_SERVER="+srv.URL())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("fence %q: %v", args, err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
