//go:build e2e

package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fenceworks/fence/testkit/testutil"
)

// TestProcessRunJobControl: Ctrl-Z on the terminal of a fence run in its
// foreground stops CMD's group (the terminal's foreground group) — and
// fence run stops too, as a job does, with the terminal taken back, so
// that the shell gets its prompt and the lock is not renewed for a command
// that does not run. Continued before the lease ran out, fence run gives
// the terminal back to CMD and continues it; continued after it ran out
// (another client was granted the lock meanwhile), CMD is killed without
// running another instant.
func TestProcessRunJobControl(t *testing.T) {
	srv := startServe(t)

	t.Run("continued while the lease holds", func(t *testing.T) {
		// CMD reads a line from the terminal after the stop: it gets it
		// only if fence run gave the terminal back to CMD's group.
		fr := startRunOnPty(t, srv.url, "jc-held", "1m", `echo started; read x; echo "got=$x"`)
		fr.suspend(t)
		if err := syscall.Kill(-fr.cmd.Process.Pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		if _, err := fr.ptm.Write([]byte("line\n")); err != nil {
			t.Fatal(err)
		}
		waitExited(t, fr.exited, "fence run")
		if code := fr.cmd.ProcessState.ExitCode(); code != exitOK || !strings.Contains(fr.out.String(), "got=line") {
			t.Fatalf("fence run continued while its lease holds: exit %d, output %q; want CMD continued, reading the terminal, exit 0", code, fr.out.String())
		}
		fenceRun(t, srv.url, "acquire", "jc-held", "--ttl", "5s", "--wait", "0").want(t, exitOK, "acquire after fence run (the lock released)")
	})

	t.Run("continued after the lease ran out", func(t *testing.T) {
		// CMD was stopped reading the terminal, and its line is typed
		// before fence run is continued: were CMD continued (with the
		// terminal, as after a stop the lease outlived), it would write
		// the marker at once.
		fr := startRunOnPty(t, srv.url, "jc-lost", "1s", `echo started; read x; echo MARKER`)
		fr.suspend(t)
		// The server's own proof that the lease ran out: another client
		// is granted the lock.
		fenceRun(t, srv.url, "acquire", "jc-lost", "--ttl", "1m", "--wait", "1m").want(t, exitOK, "acquire while fence run is stopped")
		if _, err := fr.ptm.Write([]byte("line\n")); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(-fr.cmd.Process.Pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		waitExited(t, fr.exited, "fence run")
		if code := fr.cmd.ProcessState.ExitCode(); code == exitOK || strings.Contains(fr.out.String(), "MARKER") {
			t.Fatalf("fence run continued after its lease ran out: exit %d, output %q; want CMD killed, never continued, and a non-zero exit", code, fr.out.String())
		}
	})
}

// ptyRun is a fence run whose stdin is a pty, its controlling terminal,
// with fence run the session leader and its group the foreground group.
type ptyRun struct {
	cmd    *exec.Cmd
	exited chan struct{}
	ptm    *os.File
	out    *testutil.Buffer
}

// startRunOnPty starts `fence run NAME --ttl TTL -- sh -c SCRIPT` on a new
// pty and waits until SCRIPT prints "started".
func startRunOnPty(t *testing.T, url, name, ttl, script string) *ptyRun {
	t.Helper()
	ptm, pts := openPTY(t)
	defer pts.Close()
	fr := &ptyRun{ptm: ptm, out: &testutil.Buffer{}, exited: make(chan struct{})}
	fr.cmd = exec.Command(fenceBin, "run", name, "--ttl", ttl, "--", "sh", "-c", script)
	fr.cmd.Env = append(os.Environ(), "FENCE_SERVER="+url)
	fr.cmd.Stdin, fr.cmd.Stdout, fr.cmd.Stderr = pts, fr.out, fr.out
	fr.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := fr.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { fr.cmd.Wait(); close(fr.exited) }()
	t.Cleanup(func() {
		syscall.Kill(-fr.cmd.Process.Pid, syscall.SIGKILL)
		<-fr.exited
	})
	awaitOutput(t, fr.out, "started", fr.exited)
	return fr
}

// suspend types Ctrl-Z on the terminal and waits until fence run itself is
// stopped (state T), with the terminal back in its own group.
func (fr *ptyRun) suspend(t *testing.T) {
	t.Helper()
	if _, err := fr.ptm.Write([]byte{0x1a}); err != nil {
		t.Fatal(err)
	}
	pid := fr.cmd.Process.Pid
	giveUp := time.After(procLimit)
	for {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if strings.Contains(string(b), ") T ") {
			break
		}
		select {
		case <-fr.exited:
			t.Fatalf("fence run exited after Ctrl-Z instead of stopping: %q", fr.out.String())
		case <-giveUp:
			t.Fatalf("fence run not stopped %s after Ctrl-Z: %s", procLimit, b)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if fg, err := unix.IoctlGetInt(int(fr.ptm.Fd()), unix.TIOCGPGRP); err != nil || fg != pid {
		t.Fatalf("fence run stopped with the terminal's foreground group %d (%v), want its own, %d", fg, err, pid)
	}
}
