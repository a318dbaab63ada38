//go:build e2e

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/cluster"
	"github.com/fenceworks/fence/testkit/testutil"
)

// The paper cuts of a new user's first hour: a --server without a scheme,
// errors that stutter, status and members that disagree on exit codes and
// cannot wait for a leader, run and hold that do not wait for a held lock,
// a grandchild of fence run that outlives the lease, serve --help listing
// client flags, backup's summary on the other stream than restore's.

// TestProcessServerHostPort: --server and FENCE_SERVER take HOST:PORT as
// http://HOST:PORT in every command, and anything else that is not a URL is
// a usage error (exit 2) that every command words the same.
func TestProcessServerHostPort(t *testing.T) {
	srv := startServe(t)
	hostPort := strings.TrimPrefix(srv.url, "http://")
	tok := tokenOf(t, fenceRun(t, "", "--server", hostPort, "acquire", "hp", "--ttl", "1m").want(t, exitOK, "acquire --server HOST:PORT").stdout)
	fenceRun(t, "", "write", "hp", "--token", fmt.Sprint(tok), "--value", "1", "--server", hostPort).want(t, exitOK, "write --server HOST:PORT after the name")
	for _, args := range [][]string{
		{"read", "hp"}, {"locks"}, {"status"}, {"members"}, {"backup", t.TempDir() + "/b"},
		{"run", "hp-run", "--ttl", "5s", "--", "true"},
	} {
		fenceRun(t, "", append([]string{"--server", hostPort}, args...)...).want(t, exitOK, fmt.Sprintf("fence --server %s %q", hostPort, args))
		fenceRun(t, hostPort, args...).want(t, exitOK, fmt.Sprintf("FENCE_SERVER=%s fence %q", hostPort, args))
	}

	for _, bad := range []string{"127.0.0.1:notaport", "ftp://" + hostPort} {
		for _, from := range []string{"--server", "FENCE_SERVER"} {
			want := fmt.Sprintf("fence: %s %q: want a URL such as http://127.0.0.1:7420, or HOST:PORT (several: comma-separated)\n", from, bad)
			for _, args := range [][]string{
				{"acquire", "x", "--ttl", "5s"}, {"read", "x"}, {"locks"}, {"status"}, {"members"}, {"backup", t.TempDir() + "/b"},
				{"run", "x", "--ttl", "5s", "--", "true"}, {"hold", "x"}, {"release", "x", "--token", "1"},
			} {
				env := bad
				if from == "--server" { // after the command's name (before run's --)
					env, args = "", append([]string{args[0], "--server", bad}, args[1:]...)
				}
				r := fenceRun(t, env, args...)
				if r.code != exitUsage || r.stderr != want {
					t.Errorf("%s=%s fence %q: exit %d, stderr %q; want %d and %q", from, bad, args, r.code, r.stderr, exitUsage, want)
				}
			}
		}
	}
	// A command that talks to no server does not care.
	fenceRun(t, "ftp://x", "version").want(t, exitOK, "FENCE_SERVER=ftp://x fence version")
}

// leaderlessNode starts one node of a three-node --peers cluster whose
// other two never start: it serves clients, and knows no leader.
func leaderlessNode(t *testing.T) *serveProc {
	t.Helper()
	a, b, c := testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)
	return startServe(t, "--node-id", "a", "--raft-addr", a, "--peers", "a="+a+",b="+b+",c="+c)
}

// TestProcessErrorsSaidOnce: the line printed for an error says each thing
// once: no "fence: " inside, no "unavailable: unavailable", no Go sentinel
// repeating what the line says; refusals keep "REASON: message".
func TestProcessErrorsSaidOnce(t *testing.T) {
	lone := leaderlessNode(t)
	// Not retried: the node's answer, as is.
	r := fenceRun(t, lone.url, "members", "transfer").want(t, exitError, "members transfer without a leader")
	if want := "fence: members: unavailable: no leader known\n"; r.stderr != want {
		t.Errorf("members transfer without a leader: stderr %q, want %q", r.stderr, want)
	}
	// Retried until --timeout: the last attempt's error (an unavailable
	// answer, or the deadline if it ran out during one), said once.
	for _, args := range [][]string{{"acquire", "x", "--ttl", "5s"}, {"read", "x"}} {
		r := fenceRun(t, lone.url, append(args, "--timeout", "1s")...).want(t, exitError, fmt.Sprintf("%q without a leader", args))
		line := strings.TrimSuffix(r.stderr, "\n")
		if !strings.HasPrefix(line, "fence: "+args[0]+": ") || strings.Count(line, "fence: ") != 1 || strings.Contains(line, "\n") ||
			strings.Contains(line, "unavailable: unavailable") || strings.Contains(line, "node: ") {
			t.Errorf("fence %q without a leader printed %q: want one line, each thing said once", args, r.stderr)
		}
		j := fenceRun(t, lone.url, append(args, "--timeout", "1s", "--json")...)
		var out struct {
			Error struct{ Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(j.stdout), &out); err != nil || strings.Count(out.Error.Message, "fence: ") != 1 ||
			strings.Contains(out.Error.Message, "unavailable: unavailable") {
			t.Errorf("fence %q --json without a leader printed %q (%v): want the message said once", args, j.stdout, err)
		}
	}

	// Refusals: "REASON: message", one line, as before.
	srv := startServe(t)
	tok := tokenOf(t, fenceRun(t, srv.url, "acquire", "busy", "--ttl", "1m", "--owner", "a").want(t, exitOK, "acquire").stdout)
	b := fenceRun(t, srv.url, "acquire", "busy", "--ttl", "5s").want(t, exitBusy, "acquire a held lock")
	if !regexp.MustCompile(`^BUSY: lock "busy" is held by "a" \(token ` + fmt.Sprint(tok) + `, [0-9.]+m?s left\)\n$`).MatchString(b.stderr) {
		t.Errorf("BUSY printed %q", b.stderr)
	}
	tok2 := tokenOf(t, fenceRun(t, srv.url, "acquire", "other", "--ttl", "1m").want(t, exitOK, "acquire").stdout)
	fenceRun(t, srv.url, "write", "r", "--token", fmt.Sprint(tok2), "--value", "1").want(t, exitOK, "write")
	s := fenceRun(t, srv.url, "write", "r", "--token", fmt.Sprint(tok), "--value", "2").want(t, exitRefused, "stale write")
	if want := fmt.Sprintf("STALE_TOKEN: token %d is older than accepted token %d\n", tok, tok2); s.stderr != want {
		t.Errorf("stale write printed %q, want %q", s.stderr, want)
	}
}

// TestErrorLineKeepsTheError: errorLine rewrites only the text; the error
// keeps its chain.
func TestErrorLineKeepsTheError(t *testing.T) {
	err := fmt.Errorf("fence: %s: %w", "acquire", connect.NewError(connect.CodeUnavailable, cluster.ErrNoLeader))
	if got, want := errorLine("acquire", err), "fence: acquire: unavailable: no leader known"; got != want {
		t.Errorf("errorLine = %q, want %q (from %q)", got, want, err)
	}
	if !errors.Is(err, fence.ErrUnavailable) || !errors.Is(err, cluster.ErrNoLeader) {
		t.Errorf("the error lost its chain: %v", err)
	}
	if got := errorJSON(err)["message"]; got != "fence: acquire: unavailable: no leader known" {
		t.Errorf("--json message %q", got)
	}
}

// TestProcessNoLeaderExit: fence status and fence members follow one rule:
// exit 6 when no node that answered knows a leader (each prints what it
// got), and --wait D waits for a leader: started before the second node
// of a three-node cluster, it exits 0 once they elect one.
func TestProcessNoLeaderExit(t *testing.T) {
	a, b, c := testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)
	peers := "a=" + a + ",b=" + b + ",c=" + c
	na := startServe(t, "--node-id", "a", "--raft-addr", a, "--peers", peers)
	st := fenceRun(t, na.url, "status").want(t, exitNoLeader, "status without a leader")
	if !strings.Contains(st.stdout, "role:") || !strings.Contains(st.stderr, "no leader known") {
		t.Errorf("status without a leader: stdout %q stderr %q", st.stdout, st.stderr)
	}
	m := fenceRun(t, na.url, "members").want(t, exitNoLeader, "members without a leader")
	if !strings.Contains(m.stdout, "SUFFRAGE") || !strings.Contains(m.stderr, "no leader known") {
		t.Errorf("members without a leader: stdout %q stderr %q", m.stdout, m.stderr)
	}
	fenceRun(t, na.url, "members", "--json").want(t, exitNoLeader, "members --json without a leader")

	// fence members --wait and fence status --wait, started before a
	// leader can exist, end when one does.
	type proc struct {
		cmd  *exec.Cmd
		out  *testutil.Buffer
		done chan struct{}
	}
	start := func(args ...string) proc {
		cmd := exec.Command(fenceBin, args...)
		cmd.Env = append(os.Environ(), "FENCE_SERVER="+na.url)
		p := proc{cmd, &testutil.Buffer{}, make(chan struct{})}
		cmd.Stdout, cmd.Stderr = p.out, p.out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { cmd.Wait(); close(p.done) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-p.done })
		return p
	}
	pm := start("members", "--wait", "10m", "--timeout", "10m")
	ps := start("status", "--wait", "10m", "--timeout", "10m")
	startServe(t, "--node-id", "b", "--raft-addr", b, "--peers", peers)
	startServe(t, "--node-id", "c", "--raft-addr", c, "--peers", peers)
	for _, p := range []proc{pm, ps} {
		waitExited(t, p.done, fmt.Sprintf("fence %q", p.cmd.Args[1:]))
		if code := p.cmd.ProcessState.ExitCode(); code != exitOK || !strings.Contains(p.out.String(), "leader") {
			t.Errorf("fence %q: exit %d, output:\n%s\nwant 0 once a leader is elected", p.cmd.Args[1:], code, p.out.String())
		}
	}
}

// TestProcessRunAndHoldWait: fence run and fence hold wait for a held
// lock by default (as etcdctl lock and consul lock do): fence run runs its
// command once the holder releases; --wait 0 tries once; fence acquire
// still tries once.
func TestProcessRunAndHoldWait(t *testing.T) {
	srv := startServe(t)
	tok := tokenOf(t, fenceRun(t, srv.url, "acquire", "job", "--ttl", "10m").want(t, exitOK, "acquire").stdout)
	fenceRun(t, srv.url, "acquire", "job", "--ttl", "5s").want(t, exitBusy, "acquire tries once")
	fenceRun(t, srv.url, "run", "job", "--ttl", "5s", "--wait", "0", "--", "true").want(t, exitBusy, "run --wait 0 tries once")
	fenceRun(t, srv.url, "hold", "job", "--wait", "0").want(t, exitBusy, "hold --wait 0 tries once")

	for _, cmd := range []string{"run", "hold"} {
		args := []string{"run", "job", "--ttl", "5s", "--", "sh", "-c", `echo "child token=$FENCE_TOKEN"`}
		if cmd == "hold" {
			args = []string{"hold", "job", "--ttl", "5s"}
		}
		p := exec.Command(fenceBin, args...)
		p.Env = append(os.Environ(), "FENCE_SERVER="+srv.url)
		out, errb := &testutil.Buffer{}, &testutil.Buffer{}
		p.Stdout, p.Stderr = out, errb
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		t.Cleanup(func() { p.Process.Kill(); <-done })
		// The event: the server counts it as a waiter on the lock (or it
		// has already exited, which fails below).
		awaitWaiter(t, srv.url, "job", done)
		fenceRun(t, srv.url, "release", "job", "--token", fmt.Sprint(tok)).want(t, exitOK, "release")
		if cmd == "run" {
			waitExited(t, done, "fence run")
			if code := p.ProcessState.ExitCode(); code != exitOK || !strings.HasPrefix(out.String(), "child token=") || tokenOf(t, out.String()) <= tok {
				t.Fatalf("fence run on a held lock: exit %d, stdout %q, stderr %q; want the child run once the holder released", code, out.String(), errb.String())
			}
			tok = tokenOf(t, fenceRun(t, srv.url, "acquire", "job", "--ttl", "10m").want(t, exitOK, "acquire after run").stdout)
			continue
		}
		awaitOutput(t, out, "holding job token=", done)
		p.Process.Signal(syscall.SIGTERM)
		waitExited(t, done, "fence hold")
		if code := p.ProcessState.ExitCode(); code != exitOK || tokenOf(t, out.String()) <= tok {
			t.Fatalf("fence hold on a held lock: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
		}
	}
}

// awaitWaiter waits until lock name has a waiter, failing if done closes
// first.
func awaitWaiter(t *testing.T, url, name string, done <-chan struct{}) {
	t.Helper()
	giveUp := time.After(procLimit)
	for {
		var locks []struct {
			Name    string `json:"name"`
			Waiters int    `json:"waiters"`
		}
		var out struct {
			Locks json.RawMessage `json:"locks"`
		}
		r := fenceRun(t, url, "locks", "--json").want(t, exitOK, "locks --json")
		if err := json.Unmarshal([]byte(r.stdout), &out); err == nil {
			_ = json.Unmarshal(out.Locks, &locks)
		}
		for _, l := range locks {
			if l.Name == name && l.Waiters > 0 {
				return
			}
		}
		select {
		case <-done:
			t.Fatalf("the waiting process exited before the server counted it as a waiter on %s", name)
		case <-giveUp:
			t.Fatalf("no waiter on %s after %s: %s", name, procLimit, r.stdout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// awaitOutput waits until buf holds want, failing if done closes first.
func awaitOutput(t *testing.T, buf *testutil.Buffer, want string, done <-chan struct{}) string {
	t.Helper()
	giveUp := time.After(procLimit)
	for !strings.Contains(buf.String(), want) {
		select {
		case <-done:
			if strings.Contains(buf.String(), want) {
				return buf.String()
			}
			t.Fatalf("the process exited without printing %q: %q", want, buf.String())
		case <-giveUp:
			t.Fatalf("no %q after %s: %q", want, procLimit, buf.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return buf.String()
}

// grandchildScript starts a grandchild of fence run (a sleep in the
// background, its output away from fence run's pipes) and prints its pid
// and the token, then waits.
const grandchildScript = `sleep 1000 </dev/null >/dev/null 2>&1 & echo "gc=$!"; echo "token=$FENCE_TOKEN"; echo started; wait`

var gcRe = regexp.MustCompile(`gc=(\d+)`)

// grandchildPid reads the grandchild's pid from out; it is killed at
// cleanup whatever happens.
func grandchildPid(t *testing.T, out string) int {
	t.Helper()
	m := gcRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no gc= in %q", out)
	}
	pid, _ := strconv.Atoi(m[1])
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// waitGone waits until pid runs nothing: gone, or a zombie (reaped by
// init once the kernel killed it).
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	giveUp := time.After(procLimit)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(b), ") Z ") || strings.Contains(string(b), ") X ") {
			return
		}
		select {
		case <-giveUp:
			t.Fatalf("%s (pid %d) still runs %s after fence run ended: %s", what, pid, procLimit, b)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestProcessRunStopsGrandchild: fence run signals its command's whole
// process group, so a process the command started does not outlive the
// lease: neither when the lease is lost (SIGKILL), nor when the command
// exits and the lock is released, nor when fence run passes on a SIGTERM
// it got.
func TestProcessRunStopsGrandchild(t *testing.T) {
	srv := startServe(t)
	t.Run("lease lost", func(t *testing.T) {
		_, exited, stdout, stderr := startRun(t, srv.url, "run", "gc-lost", "--ttl", "1500ms", "--", "sh", "-c", grandchildScript)
		gc := grandchildPid(t, stdout.String())
		fenceRun(t, srv.url, "release", "gc-lost", "--token", fmt.Sprint(tokenOf(t, stdout.String()))).want(t, exitOK, "release behind run's back")
		waitExited(t, exited, "fence run")
		if !strings.Contains(stderr.String(), "lost") {
			t.Fatalf("fence run did not say the lease was lost: %q", stderr.String())
		}
		waitGone(t, gc, "the grandchild")
	})
	t.Run("command exits, leaving one behind", func(t *testing.T) {
		r := fenceRun(t, srv.url, "run", "gc-left", "--ttl", "5s", "--", "sh", "-c",
			`sleep 1000 </dev/null >/dev/null 2>&1 & echo "gc=$!"`).want(t, exitOK, "fence run whose command exits at once")
		waitGone(t, grandchildPid(t, r.stdout), "the process the command left running")
	})
	t.Run("SIGTERM passed on", func(t *testing.T) {
		cmd, exited, stdout, _ := startRun(t, srv.url, "run", "gc-term", "--ttl", "5s", "--", "sh", "-c", grandchildScript)
		gc := grandchildPid(t, stdout.String())
		cmd.Process.Signal(syscall.SIGTERM)
		waitExited(t, exited, "fence run")
		waitGone(t, gc, "the grandchild")
	})
}

// TestProcessRunOnTerminalStopsGrandchild: with stdin its controlling
// terminal (a pty here), fence run still signals the command's whole
// group — the group it makes the terminal's foreground group — and gives
// the terminal back to its own group once the command is gone. The
// session leader is a shell that outlives fence run, so that no SIGHUP of
// a session ending stops the grandchild in its place.
func TestProcessRunOnTerminalStopsGrandchild(t *testing.T) {
	srv := startServe(t)
	_, pts := openPTY(t)
	defer pts.Close()

	// The shell reports fence run's exit and whether its own group has the
	// terminal back, then waits on the terminal until the test is done (it
	// is killed last, after the grandchild was checked: its end would send
	// SIGHUP to the terminal's foreground group).
	script := `"$@"; echo "fence-exit=$?"; fg=$(ps -o tpgid= -p $$ | tr -d ' '); echo "fg=$fg pgid=$$"; read x`
	sh := exec.Command("sh", "-c", script, "sh", fenceBin, "run", "gc-tty", "--ttl", "1500ms", "--", "sh", "-c", grandchildScript)
	sh.Env = append(os.Environ(), "FENCE_SERVER="+srv.url)
	out := &testutil.Buffer{}
	sh.Stdin, sh.Stdout, sh.Stderr = pts, out, out
	sh.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { sh.Wait(); close(done) }()
	defer func() { sh.Process.Kill(); <-done }()

	awaitOutput(t, out, "started", done)
	gc := grandchildPid(t, out.String())
	fenceRun(t, srv.url, "release", "gc-tty", "--token", fmt.Sprint(tokenOf(t, out.String()))).want(t, exitOK, "release behind run's back")
	got := awaitOutput(t, out, "pgid=", done)
	if !strings.Contains(got, fmt.Sprintf("fence-exit=%d", 128+int(syscall.SIGKILL))) {
		t.Errorf("fence run's exit: %q, want %d (the command killed when the lease was lost)", got, 128+int(syscall.SIGKILL))
	}
	if m := regexp.MustCompile(`fg=(\d+) pgid=(\d+)`).FindStringSubmatch(got); m == nil || m[1] != m[2] {
		t.Errorf("after fence run the terminal's foreground group is not the shell's: %q", got)
	}
	waitGone(t, gc, "the grandchild")
}

// TestServeHelpOwnFlags: fence serve --help lists serve's own flags, not
// the client's --server, --json and --timeout; restore and version, which
// talk to no server, do not list --server.
func TestServeHelpOwnFlags(t *testing.T) {
	code, stdout, _ := runCLI("serve", "--help")
	if code != exitOK || !strings.Contains(stdout, "-listen") {
		t.Fatalf("fence serve --help: exit %d\n%s", code, stdout)
	}
	for _, f := range []string{"-server", "-json", "-timeout"} {
		if regexp.MustCompile(`(?m)^  ` + f + `\b`).MatchString(stdout) {
			t.Errorf("fence serve --help lists the client flag %s:\n%s", f, stdout)
		}
	}
	for _, cmd := range []string{"restore", "version"} {
		if _, stdout, _ := runCLI(cmd, "--help"); regexp.MustCompile(`(?m)^  -server\b`).MatchString(stdout) {
			t.Errorf("fence %s --help lists --server:\n%s", cmd, stdout)
		}
	}
	// (--max-ttl 1ms: a serve that took --server refuses to start too.)
	if code, _, stderr := runCLI("serve", "--server", "http://127.0.0.1:1", "--max-ttl", "1ms"); code != exitUsage ||
		!strings.Contains(stderr, "flag provided but not defined: -server") {
		t.Errorf("fence serve --server: exit %d, stderr %q; want %d, not a serve flag", code, stderr, exitUsage)
	}
}

// openPTY opens a new pseudo-terminal: its master (closed at the test's
// end) and its slave (the caller closes it once a process has it), with
// the master's output drained so that nothing blocks writing to it.
// It skips the test where no pty can be had.
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	t.Cleanup(func() { ptm.Close() })
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := ptm.Read(buf); err != nil {
				return
			}
		}
	}()
	return ptm, pts
}
