//go:build e2e

package system_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenceworks/fence/testkit/harness"
	"github.com/fenceworks/fence/testkit/testutil"
)

// hangGuard bounds every wait in the harness. It is not a timing assertion:
// it only turns a hung process into a failure with its log instead of a test
// binary killed by -timeout with nothing said.
const hangGuard = 90 * time.Second

func TestMain(m *testing.M) {
	code := m.Run()
	harness.RemoveBuilds()
	os.Exit(code)
}

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
	bin, err := harness.Build(pkg, race)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// checkRaces fails the test if a program built with -race reported a data
// race in its output (a process killed with SIGKILL reports nothing of the
// races it had not yet printed).
func checkRaces(t testing.TB, name, output string) {
	t.Helper()
	if harness.HasRace(output) {
		t.Errorf("%s reported a data race", name)
	}
}

// moduleRoot is the directory holding go.mod (the tests run in system_test/).
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := harness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func fenceBinary(t testing.TB) string { return binary(t, "./cmd/fence") }

// fenceServer is one `fence serve` process (testkit/harness) and its data
// directory, which outlives the process so that the server can be
// restarted on it. Its Stop, Kill and Restart fail the test instead of
// returning errors.
type fenceServer struct {
	*harness.Server
	t testing.TB
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
	s := harness.StartT(t, harness.Config{
		Bin:          bin,
		DataDir:      dataDir,
		Args:         extraArgs,
		ReadyTimeout: hangGuard,
		StopTimeout:  hangGuard,
	})
	return &fenceServer{Server: s, t: t}
}

// Stop sends SIGTERM and waits for the process to exit; a graceful shutdown
// must exit with status 0.
func (s *fenceServer) Stop() {
	s.t.Helper()
	if err := s.Server.Stop(); err != nil {
		s.t.Error(err)
	}
}

// Kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (s *fenceServer) Kill() {
	s.t.Helper()
	if !s.Running() {
		s.t.Fatalf("Kill: fence serve is not running: %v", s.ExitState())
	}
	if err := s.Server.Kill(); err != nil {
		s.t.Fatal(err)
	}
}

// Restart starts the server again on the same data directory and address,
// with the flags of the last start.
func (s *fenceServer) Restart() {
	s.t.Helper()
	s.RestartWith(s.Args()...)
}

// RestartWith is Restart with extraArgs added to the first start's flags
// (and kept for later Restarts).
func (s *fenceServer) RestartWith(extraArgs ...string) {
	s.t.Helper()
	if err := s.Server.Restart(context.Background(), extraArgs...); err != nil {
		s.t.Fatal(err)
	}
}

// wait waits for the process to exit on its own; one still running after
// hangGuard is killed and fails the test.
func (s *fenceServer) wait() {
	s.t.Helper()
	select {
	case <-s.Done():
	case <-time.After(hangGuard):
		s.Server.Kill()
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
