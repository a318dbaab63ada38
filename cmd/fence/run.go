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

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

const runUsage = `NAME... --ttl D [--wait D] [--grace D] [--owner S] [--shared] [--permits N] [--shared-lock NAME]... -- CMD ARGS...

Several NAMEs before "--" are one set, taken all at once or not at all under
one lease and one token (CMD also gets FENCE_LOCKS and FENCE_PROOFS: the
set's names, sorted, and each one's signed token, as JSON arrays);
--shared, --permits N and --shared-lock NAME as for fence acquire.
Takes lock NAME — waiting while it is held, up to --wait (default 24h, the
longest wait the server allows; --wait 0 tries once and exits 3 when it is
held) — runs CMD with FENCE_LOCK, FENCE_TOKEN and FENCE_SIGNED_TOKEN (the
token with its proof, for guards) in its environment, keeps
the lease alive while CMD runs, releases it when CMD exits, and exits with
CMD's status. CMD runs in a process group of its own and every signal goes
to the whole group, so nothing CMD started outlives the lease: SIGINT,
SIGTERM and SIGHUP that fence run gets; SIGTERM --grace before a SIGKILL
just before the lease's safe deadline while renewals fail; SIGKILL at once
when the lease is lost; SIGKILL to whatever CMD left running when it exits.
On a terminal, when CMD is stopped (Ctrl-Z) fence run stops too, as a job
does, and nothing renews the lease while it is stopped; when it is continued
(fg), CMD is continued only if the lease is still held, else it is killed.
`

// runCmd holds lock NAME while CMD runs: CMD gets FENCE_LOCK and FENCE_TOKEN
// in its environment and the lease is kept alive. CMD is gone by the
// lease's safe deadline (G8): SIGKILL goes out just before that deadline,
// and when renewals fail SIGTERM goes out --grace before the SIGKILL (see
// superviseChild). The lock is
// released at the end and fence exits with CMD's status (128+signal when a
// signal killed it; 1 when CMD exited 0 after it was told to stop, so that a
// run that lost, or was about to lose, its lock never reports success).
//
// CMD runs in a process group of its own, and every signal goes to that
// group, so that the processes CMD started (sh -c 'worker & wait') are
// stopped with it and none outlives the lease. When stdin is fence run's
// controlling terminal, that group is made the terminal's foreground group,
// as a shell does for a job, so that CMD can read the terminal and gets
// Ctrl-C; fence run takes the terminal back once CMD has exited. What CMD
// leaves running in its group when it exits is killed (SIGKILL) before the
// lock is released.
func runCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", runUsage, g, stderr)
	ttl := duration(fs, "ttl", 0, "lease TTL (required); renewed every TTL/3 while CMD runs")
	wait := duration(fs, "wait", fence.MaxWait, "while the lock is held, queue for it up to this long (the default is the longest wait the server allows), then exit 3 (BUSY); 0: try once")
	grace := duration(fs, "grace", 5*time.Second, "when renewals fail, SIGTERM goes out this long before the SIGKILL that ends CMD just before the lease's safe deadline")
	owner := fs.String("owner", "", "owner label (default hostname:pid)")
	lf := addLockFlags(fs)
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
	if *ttl < fence.MinTTL { // 0 would read as "not set" once in a request
		return fail(g, stdout, stderr, fence.Invalid("ttl", "at least "+fence.MinTTL.String(), ttl.String()))
	}
	if *grace < 0 { // no SIGTERM would ever go out
		return fail(g, stdout, stderr, fence.Invalid("grace", "at least 0s (0: SIGKILL with no SIGTERM first)", grace.String()))
	}
	names, argv := runSplit(pos, after)
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "fence run: want a command after the lock names: fence run NAME... --ttl D -- CMD ARGS...")
		fs.Usage()
		return exitUsage
	}
	specs, err := lf.specs(names)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}

	c, lease, err := g.acquireKept(specs, *ttl, *wait, *owner)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	defer c.Close()
	code := superviseChild(lease, argv, *grace, stdout, stderr)

	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	if err := lease.Release(rctx); err != nil && !errors.Is(err, client.ErrLeaseLost) {
		fmt.Fprintf(stderr, "fence run: release %s: %v\n", nameHuman(lease.Name()), err)
	}
	return code
}

// runSplit splits run's arguments into lock names and the command: with a
// "--", every argument before it is a lock name (a set when several);
// without one, the first is the lock and the rest the command.
func runSplit(pos, after []string) (names, argv []string) {
	if len(after) > 0 {
		return pos, after
	}
	if len(pos) == 0 {
		return nil, nil
	}
	return pos[:1], pos[1:]
}

// superviseChild runs argv while lease is held and returns its exit code.
//
// G8: the child is gone by the lease's safe deadline (Lease.Deadline,
// counted from the send time of the last successful grant or renew): SIGKILL
// goes out killMargin before it, or grace after a SIGTERM if that is
// earlier. While renewals fail (Lease.RenewErr), SIGTERM goes out grace
// before that SIGKILL (at once if the failure is known later). A renew
// refused by the server (the lease is lost before its deadline: it was
// released with its token, or expired, and may be granted again already)
// sends SIGKILL at once, with no grace. Signals fence itself gets are
// passed on to the child.
func superviseChild(lease *client.Lease, argv []string, grace time.Duration, stdout, stderr io.Writer) int {
	foreground := inForeground()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "FENCE_LOCK="+lease.Name(), "FENCE_TOKEN="+lease.Token().String(),
		// The token with its proof, for a guard holding the key set; the
		// numeric FENCE_TOKEN stays (scripts compare it).
		"FENCE_SIGNED_TOKEN="+lease.SignedToken().String())
	cmd.Env = append(cmd.Env, leaseLocksEnv(lease)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	// Setpgid: CMD leads a process group of its own, which kill signals as
	// a whole. Pdeathsig: if fence run itself dies (kill -9, a crash), the
	// kernel kills CMD too, instead of leaving it to run on past the lease;
	// it reaches only CMD, not processes it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL,
		Foreground: foreground, Ctty: int(os.Stdin.Fd())}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	// Job control (see stopWithChild): SIGCHLD tells that CMD may have
	// stopped, SIGCONT that fence run was continued after it stopped too.
	chld, cont := make(chan os.Signal, 1), make(chan os.Signal, 1)
	if foreground {
		signal.Notify(chld, syscall.SIGCHLD)
		signal.Notify(cont, syscall.SIGCONT)
		defer signal.Stop(chld)
		defer signal.Stop(cont)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "fence run: %v\n", err)
		return 127
	}
	if foreground {
		// fence run is in the background of its terminal now: a write to
		// it (with stty tostop) or taking it back would get SIGTTOU and
		// stop the watchdog. Ignored from here (after Start, so that CMD
		// does not inherit it) until fence run is done.
		signal.Ignore(syscall.SIGTTOU)
		defer signal.Reset(syscall.SIGTTOU)
	}
	kill := func(sig syscall.Signal) { _ = syscall.Kill(-cmd.Process.Pid, sig) }
	exited := make(chan struct{})
	go func() {
		// Once CMD has exited — before it is reaped, so that its pid
		// still names its group — whatever it left running in its group
		// is killed: the lock is released next, and nothing CMD started
		// may run on without it.
		var info unix.Siginfo
		for unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
		}
		// The terminal is taken back only from CMD's group (asked while
		// CMD is unreaped and its pid still names the group): not from the
		// shell, after a bg that left fence run in the background.
		hasTerminal := foreground && terminalGroup() == cmd.Process.Pid
		kill(syscall.SIGKILL)
		_ = cmd.Wait()
		if hasTerminal {
			takeTerminal()
		}
		close(exited)
	}()

	p := stopPlan{grace: grace, margin: killMargin(lease.TTL())}
	tick := pollInterval(lease.TTL())
	leaseDone := lease.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		switch act, why := p.next(time.Now(), lease.Deadline(), lease.RenewErr(), lease.Err()); act {
		case sendTerm:
			fmt.Fprintf(stderr, "fence run: %s; stopping %s: SIGTERM now, SIGKILL in %s at the latest\n",
				why, argv[0], p.killAt(lease.Deadline()).Sub(time.Now()).Round(time.Millisecond))
			kill(syscall.SIGTERM)
			kill(syscall.SIGCONT) // a stopped CMD could not act on the SIGTERM
		case sendKill:
			fmt.Fprintf(stderr, "fence run: %s; killing %s (SIGKILL)\n", why, argv[0])
			kill(syscall.SIGKILL)
		}
		timer.Reset(max(min(time.Until(p.wake(lease.Deadline())), tick), 0))
		select {
		case <-exited:
			return childStatus(cmd.ProcessState, p.stopping())
		case s := <-sigs:
			kill(s.(syscall.Signal))
			if !p.killed {
				// As bash does for a stopped job: a stopped CMD could not
				// act on the signal until continued.
				kill(syscall.SIGCONT)
			}
		case <-chld:
			if childStopped(cmd.Process.Pid) {
				stopWithChild(lease, &p, cmd.Process.Pid, cont, kill, argv[0], stderr)
			}
		case <-leaseDone:
			leaseDone = nil
		case <-timer.C:
		}
	}
}

// childStopped reports whether CMD (pid) has stopped, consuming the
// kernel's report of the stop (WSTOPPED without WNOWAIT: each stop is
// reported once; an exit is left for the waiter of superviseChild, which
// waits for WEXITED only).
func childStopped(pid int) bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		return err == nil && info.Signo == int32(syscall.SIGCHLD)
	}
}

// stopWithChild does what a shell's job does when CMD (leader of group
// pgid) was stopped from the terminal (Ctrl-Z sends SIGTSTP to CMD's
// group only, the terminal's foreground group): fence run takes the
// terminal back and stops its own group, so that the shell gets its prompt
// and sees the job stopped. While fence run is stopped nothing renews the
// lease: it runs out and the lock is freed. When fence run is continued
// (fg, or kill -CONT), CMD is continued only if the lease is still held
// with time left before the SIGKILL the plan would send; else it is
// killed while still stopped, and never runs without the lease.
func stopWithChild(lease *client.Lease, p *stopPlan, pgid int, cont <-chan os.Signal, kill func(syscall.Signal), name string, stderr io.Writer) {
	if terminalGroup() == pgid {
		takeTerminal()
	}
	select { // a SIGCONT from before this stop is not the one awaited
	case <-cont:
	default:
	}
	_ = syscall.Kill(0, syscall.SIGSTOP)
	// The SIGSTOP may reach another thread of fence run first; the stop is
	// over only once SIGCONT came.
	<-cont
	if err := lease.Err(); err != nil || !time.Now().Before(p.killAt(lease.Deadline())) {
		why := "the lease ran out while stopped"
		if err != nil {
			why = err.Error()
		}
		fmt.Fprintf(stderr, "fence run: %s; killing %s (SIGKILL) instead of continuing it\n", why, name)
		p.killed = true
		if p.termAt.IsZero() {
			p.termAt = time.Now()
		}
		kill(syscall.SIGKILL)
		return
	}
	if inForeground() { // fg gave fence run the terminal: CMD gets it
		_ = unix.IoctlSetPointerInt(int(os.Stdin.Fd()), unix.TIOCSPGRP, pgid)
	}
	kill(syscall.SIGCONT)
}

// terminalGroup is the foreground group of fence run's terminal (stdin),
// -1 if there is none.
func terminalGroup() int {
	pgrp, err := unix.IoctlGetInt(int(os.Stdin.Fd()), unix.TIOCGPGRP)
	if err != nil {
		return -1
	}
	return pgrp
}

// killMargin is how long before the safe deadline SIGKILL goes out, so that
// the kernel has ended the child by the deadline itself: 100ms, or TTL/10
// for shorter TTLs.
func killMargin(ttl time.Duration) time.Duration { return min(100*time.Millisecond, ttl/10) }

// pollInterval bounds how long the supervisor goes without looking at the
// lease (a renew that shortened the deadline, a failure that started):
// TTL/20 within [5ms, 100ms].
func pollInterval(ttl time.Duration) time.Duration {
	return min(max(ttl/20, 5*time.Millisecond), 100*time.Millisecond)
}

// action is what the supervisor does to the child now.
type action int

const (
	nothing action = iota
	sendTerm
	sendKill
)

// stopPlan decides when the child of fence run gets SIGTERM and SIGKILL.
// It is pure: next is called with the lease's state at each wake.
type stopPlan struct {
	grace, margin time.Duration
	termAt        time.Time // when SIGTERM went out (zero: not yet)
	killed        bool
}

// killAt is when SIGKILL goes out: margin before deadline, or grace after
// SIGTERM if that is earlier.
func (p *stopPlan) killAt(deadline time.Time) time.Time {
	at := deadline.Add(-p.margin)
	if !p.termAt.IsZero() && p.termAt.Add(p.grace).Before(at) {
		at = p.termAt.Add(p.grace)
	}
	return at
}

// next returns the action due at now for a lease with this deadline,
// renewal failure (nil while renewals succeed) and end (nil while held), and
// why.
func (p *stopPlan) next(now, deadline time.Time, renewErr, ended error) (action, string) {
	if p.killed {
		return nothing, ""
	}
	// lost: the server refused a renewal (NOT_HOLDER, STALE_TOKEN,
	// LEASE_EXPIRED) or the deadline passed. Either way the lock may already
	// be someone else's, so there is no grace left to give: SIGKILL now.
	lost := errors.Is(ended, client.ErrLeaseLost)
	if !now.Before(p.killAt(deadline)) || lost {
		p.killed = true
		if p.termAt.IsZero() {
			p.termAt = now
		}
		if lost {
			return sendKill, ended.Error()
		}
		return sendKill, fmt.Sprintf("the lease's safe deadline is %s away", deadline.Sub(now).Round(time.Millisecond))
	}
	if !p.termAt.IsZero() {
		return nothing, ""
	}
	switch {
	case renewErr != nil && !now.Before(deadline.Add(-p.margin-p.grace)):
		p.termAt = now
		return sendTerm, fmt.Sprintf("renewals of the lease are failing (%v); it is lost at its safe deadline in %s unless one succeeds",
			renewErr, deadline.Sub(now).Round(time.Millisecond))
	}
	return nothing, ""
}

// wake is the next moment next may act, if the lease does not change.
func (p *stopPlan) wake(deadline time.Time) time.Time {
	at := p.killAt(deadline)
	if p.termAt.IsZero() {
		if t := deadline.Add(-p.margin - p.grace); t.Before(at) {
			at = t
		}
	}
	return at
}

// stopping reports whether the child was told to stop because of the lease.
func (p *stopPlan) stopping() bool { return !p.termAt.IsZero() }

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

// takeTerminal makes fence run's process group the foreground group of
// its terminal (stdin) again, after CMD's group had it (SIGTTOU, which a
// background tcsetpgrp gets, is ignored by superviseChild meanwhile).
func takeTerminal() {
	_ = unix.IoctlSetPointerInt(int(os.Stdin.Fd()), unix.TIOCSPGRP, unix.Getpgrp())
}

// inForeground reports whether stdin is fence run's controlling terminal
// and fence run's process group is its foreground group: only then is CMD
// given the terminal (a fence run started in the background with & leaves
// the terminal to the shell).
func inForeground() bool {
	pgrp, err := unix.IoctlGetInt(int(os.Stdin.Fd()), unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}
