package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fenceworks/fence/client"
)

// runCmd holds lock NAME while CMD runs: CMD gets FENCE_LOCK and FENCE_TOKEN
// in its environment, the lease is kept alive, and if the lease is lost CMD
// gets SIGTERM, then SIGKILL after --grace. The lock is released at the end
// and fence exits with CMD's status (128+signal when a signal killed it; 1
// when CMD exited 0 but the lease had been lost, so that a run that lost its
// lock never reports success).
//
// CMD runs in its own process group, so that the signals reach its children
// too — unless stdin is a terminal, where CMD stays in the foreground group
// so that it can read the terminal; then only CMD itself is signalled.
func runCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", "NAME --ttl D [--wait D] [--grace D] [--owner S] -- CMD ARGS...", g, stderr)
	ttl := fs.Duration("ttl", 0, "lease TTL (required); renewed every TTL/3 while CMD runs")
	wait := fs.Duration("wait", 0, "queue for the lock up to this long (0: try once)")
	grace := fs.Duration("grace", 5*time.Second, "after SIGTERM, wait this long before SIGKILL")
	owner := fs.String("owner", "", "owner label (default hostname:pid)")
	pos, after, err := parseArgs(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(pos) < 1 || len(pos)+len(after) < 2 {
		fmt.Fprintln(stderr, "fence run: want NAME and a command: fence run NAME --ttl D -- CMD ARGS...")
		fs.Usage()
		return exitUsage
	}
	if !wasSet(fs, "ttl") {
		return fail(g, stdout, stderr, &usageError{"run: --ttl is required"})
	}
	name, argv := pos[0], append(pos[1:], after...)

	c, err := g.dial()
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	defer c.Close()
	opts := []client.AcquireOption{client.TTL(*ttl), client.Wait(*wait)}
	if *owner != "" {
		opts = append(opts, client.Owner(*owner))
	}
	actx, cancel := g.context(*wait)
	lease, err := c.Acquire(actx, name, opts...)
	cancel()
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	code := superviseChild(lease, argv, *grace, stdout, stderr)

	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	if err := lease.Release(rctx); err != nil && !errors.Is(err, client.ErrLeaseLost) {
		fmt.Fprintf(stderr, "fence run: release %s: %v\n", name, err)
	}
	return code
}

// superviseChild runs argv while lease is held and returns its exit code.
func superviseChild(lease *client.Lease, argv []string, grace time.Duration, stdout, stderr io.Writer) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "FENCE_LOCK="+lease.Name(), "FENCE_TOKEN="+lease.Token().String())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	group := !stdinIsTerminal()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: group}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "fence run: %v\n", err)
		return 127
	}
	kill := func(sig syscall.Signal) {
		if group {
			_ = syscall.Kill(-cmd.Process.Pid, sig)
		} else {
			_ = cmd.Process.Signal(sig)
		}
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()

	leaseDone := lease.Done()
	var killTimer <-chan time.Time
	lost := false
	for {
		select {
		case <-exited:
			return childStatus(cmd.ProcessState, lost)
		case s := <-sigs:
			kill(s.(syscall.Signal))
		case <-leaseDone:
			leaseDone = nil
			if errors.Is(lease.Err(), client.ErrLeaseLost) {
				lost = true
				fmt.Fprintf(stderr, "fence run: %v; stopping %s (SIGTERM, SIGKILL after %s)\n", lease.Err(), argv[0], grace)
				kill(syscall.SIGTERM)
				killTimer = time.After(grace)
			}
		case <-killTimer:
			kill(syscall.SIGKILL)
		}
	}
}

// childStatus is the exit code for a finished child: its status, or
// 128+signal; 1 when it exited 0 after the lease was lost.
func childStatus(ps *os.ProcessState, lost bool) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	code := ps.ExitCode()
	if code == 0 && lost {
		return exitError
	}
	return code
}

func stdinIsTerminal() bool {
	_, err := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS)
	return err == nil
}
