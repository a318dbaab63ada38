package chaos

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// The fault kinds of a raft cluster (3 or 5 nodes). Each picks its nodes by
// role when it is applied — the leader as the cluster agrees on it at that
// moment (Cluster.Leader: NodeStatus of every node, a majority naming it),
// followers by Fault.Target — and holds every node's lane while it runs.
const (
	// FaultLeaderIsolate cuts the leader off from every other node (its
	// peer links, both ways; its clients still reach it): the others elect
	// a new leader, the old one must stop granting.
	FaultLeaderIsolate FaultKind = "leader-isolate"
	// FaultSplitMajority splits the nodes into a minority of (n-1)/2 and a
	// majority, the leader on the minority side (Fault.LeaderInMinority)
	// or the majority side: the minority must grant nothing and accept no
	// write; after the heal state converges.
	FaultSplitMajority FaultKind = "split-majority"
	// FaultPeerOneWay drops the messages of one direction between the
	// leader and a follower (Fault.FromLeader: the leader's to it, else its
	// to the leader); the other direction flows.
	FaultPeerOneWay FaultKind = "peer-oneway"
	// FaultLeaderPause stops the leader's process (SIGSTOP) for For, then
	// continues it: a deposed leader wakes up believing it leads.
	FaultLeaderPause FaultKind = "leader-pause"
	// FaultLeaderKill kills the leader with SIGKILL and restarts it after
	// For (it rejoins with its data dir).
	FaultLeaderKill FaultKind = "leader-kill"
	// FaultFollowerKill kills a follower with SIGKILL and restarts it
	// after For.
	FaultFollowerKill FaultKind = "follower-kill"
	// FaultClockSkew restarts a follower with FENCE_TEST_CLOCK_OFFSET
	// (±1h on every wall-clock reading) and FENCE_TEST_CLOCK_RATE (its
	// leader clock's elapsed time scaled, within the documented 1% drift),
	// moves leadership onto it (ClusterService.TransferLeadership), holds
	// For, and restarts it unskewed (SIGTERM: it hands leadership over).
	FaultClockSkew FaultKind = "clock-skew"
	// FaultMemberChange removes a follower from the raft configuration
	// (ClusterService.RemoveMember), wipes its data dir and re-adds it
	// with --join (same id and addresses, empty log: it catches up from a
	// snapshot or the log), then holds For.
	FaultMemberChange FaultKind = "member-change"
)

// ClusterFaults are the kinds that need a raft cluster (Config.Nodes ≥ 3).
// A cluster run's default is AllFaults and these.
var ClusterFaults = []FaultKind{
	FaultLeaderIsolate, FaultSplitMajority, FaultPeerOneWay, FaultLeaderPause,
	FaultLeaderKill, FaultFollowerKill, FaultClockSkew, FaultMemberChange,
}

// clusterFault reports whether k is one of ClusterFaults.
func (k FaultKind) clusterFault() bool { return slices.Contains(ClusterFaults, k) }

// scheduleClusterFault draws f's length and parameters (f.Kind one of
// ClusterFaults; false otherwise). Partitions and pauses of the leader run
// 1.5–4 s and 0.5–3 s, around the LAN election timeout of 1 s (some end
// before an election, most after); a killed node stays down 0.5–2 s (the
// leader) or 0.2–2 s; a skewed leader serves 3–6 s; a re-added member is
// held 1–3 s.
func scheduleClusterFault(f *Fault, between func(lo, hi time.Duration) time.Duration) bool {
	ms := func(lo, hi time.Duration) time.Duration { return between(lo, hi).Round(time.Millisecond) }
	coin := func() bool { return between(0, 1) == 1 }
	switch f.Kind {
	case FaultLeaderIsolate:
		f.For = ms(1500*time.Millisecond, 4*time.Second)
	case FaultSplitMajority:
		f.For = ms(1500*time.Millisecond, 4*time.Second)
		// two in three with the leader cut off in the minority
		f.LeaderInMinority = between(0, 2) != 0
	case FaultPeerOneWay:
		f.For = ms(time.Second, 3*time.Second)
		f.FromLeader = coin()
	case FaultLeaderPause:
		f.For = ms(500*time.Millisecond, 3*time.Second)
	case FaultLeaderKill:
		f.For = ms(500*time.Millisecond, 2*time.Second)
	case FaultFollowerKill:
		f.For = ms(200*time.Millisecond, 2*time.Second)
	case FaultClockSkew:
		f.For = ms(3*time.Second, 6*time.Second)
		f.ClockOffset = time.Hour
		if coin() {
			f.ClockOffset = -time.Hour
		}
		// 0.990–1.010 in steps of 0.001: within the documented drift
		f.ClockRate = 1 + float64(between(0, 20)-10)/1000
	case FaultMemberChange:
		f.For = ms(time.Second, 3*time.Second)
	default:
		return false
	}
	return true
}

func formatRate(r float64) string { return strconv.FormatFloat(r, 'f', 3, 64) }

// clusterFault applies one of ClusterFaults; see apply.
func (n *Nemesis) clusterFault(ctx context.Context, i int, f Fault) (note string, applied bool, err error) {
	c := n.Cluster
	if !c.Raft() || len(c.Nodes) < 3 {
		return fmt.Sprintf("%s needs a raft cluster of 3 or more nodes", f.Kind), false, nil
	}
	start := func(format string, args ...any) {
		n.logf("fault #%d %s: %s", i, f, fmt.Sprintf(format, args...))
	}
	// The leader as the cluster agrees on it now; after a heal the nodes
	// may need an election first.
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	leader, lerr := c.WaitLeader(lctx)
	cancel()
	if lerr != nil {
		return "no leader: " + lerr.Error(), false, nil
	}
	followers := c.Followers(leader)
	pick := func(k int) int { return followers[(f.Target+k)%len(followers)] }
	name := func(j int) string { return c.Nodes[j].Name() }

	switch f.Kind {
	case FaultLeaderIsolate:
		if err := c.Partition([]int{leader}); err != nil {
			c.HealLinks()
			return err.Error(), false, nil
		}
		start("leader %s cut off from every peer", name(leader))
		t0 := time.Now()
		next := n.electedWithin(ctx, f.For, leader)
		holdFor(ctx, f.For-time.Since(t0))
		return "healed; " + next, true, c.HealLinks()

	case FaultSplitMajority:
		size := (len(c.Nodes) - 1) / 2
		var minority []int
		k := 0
		if f.LeaderInMinority {
			minority = append(minority, leader)
		}
		for len(minority) < size {
			minority = append(minority, pick(k))
			k++
		}
		if err := c.Partition(minority); err != nil {
			c.HealLinks()
			return err.Error(), false, nil
		}
		start("minority %v | majority %v (leader %s)", c.names(minority), c.names(c.others(minority)), name(leader))
		t0 := time.Now()
		next := "leader kept"
		if f.LeaderInMinority {
			next = n.electedWithin(ctx, f.For, leader)
		}
		holdFor(ctx, f.For-time.Since(t0))
		return "healed; " + next, true, c.HealLinks()

	case FaultPeerOneWay:
		from, to := pick(0), leader
		if f.FromLeader {
			from, to = leader, pick(0)
		}
		if err := c.CutOneWay(from, to); err != nil {
			c.HealLinks()
			return err.Error(), false, nil
		}
		start("messages %s → %s dropped (leader %s)", name(from), name(to), name(leader))
		holdFor(ctx, f.For)
		after, _ := c.Leader(context.WithoutCancel(ctx))
		note := "healed; leader then: none agreed"
		if after >= 0 {
			note = "healed; leader then: " + name(after)
		}
		return note, true, c.HealLinks()

	case FaultLeaderPause:
		node := c.Nodes[leader]
		if err := node.Pause(); err != nil {
			return err.Error(), false, nil
		}
		start("SIGSTOP leader %s (pid %d)", name(leader), node.Pid())
		t0 := time.Now()
		next := n.electedWithin(ctx, f.For, leader)
		holdFor(ctx, f.For-time.Since(t0))
		if err := node.Resume(); err != nil {
			return "", true, err
		}
		return "SIGCONT; " + next, true, nil

	case FaultLeaderKill, FaultFollowerKill:
		target := leader
		if f.Kind == FaultFollowerKill {
			target = pick(0)
		}
		node := c.Nodes[target]
		pid := node.Pid()
		if err := node.Kill(); err != nil {
			return err.Error(), false, nil
		}
		start("SIGKILL %s (pid %d; leader %s)", name(target), pid, name(leader))
		t0 := time.Now()
		next := ""
		if target == leader {
			next = "; " + n.electedWithin(ctx, f.For, leader)
		}
		holdFor(ctx, f.For-time.Since(t0))
		t1 := time.Now()
		if err := n.restart(ctx, target, node, nil); err != nil {
			return fmt.Sprintf("restart FAILED: %s%s", brief(err), next), true, nil
		}
		return fmt.Sprintf("restarted pid %d, ready in %s%s", node.Pid(), time.Since(t1).Round(time.Millisecond), next), true, nil

	case FaultClockSkew:
		return n.clockSkew(ctx, f, pick(0), start)

	case FaultMemberChange:
		return n.memberChange(ctx, f, leader, pick(0), start)
	}
	return fmt.Sprintf("unknown cluster fault kind %q", f.Kind), false, nil
}

// electedWithin waits up to d for the cluster to agree on a leader other
// than old, and says when that happened (or that it did not in d).
func (n *Nemesis) electedWithin(ctx context.Context, d time.Duration, old int) string {
	t0 := time.Now()
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	l, err := n.Cluster.WaitLeader(wctx, old)
	if err != nil {
		return fmt.Sprintf("no new leader within %s", d.Round(time.Millisecond))
	}
	return fmt.Sprintf("%s led after %s", n.Cluster.Nodes[l].Name(), time.Since(t0).Round(time.Millisecond))
}

// clockSkew restarts follower target with a skewed clock, moves leadership
// onto it, holds f.For and restarts it unskewed. A graceful stop that does
// not exit 0 is a crash (SIGTERM must shut a node down cleanly, handing its
// leadership over first).
func (n *Nemesis) clockSkew(ctx context.Context, f Fault, target int, start func(string, ...any)) (string, bool, error) {
	c := n.Cluster
	node := c.Nodes[target]
	env := []string{
		"FENCE_TEST_CLOCK_OFFSET=" + f.ClockOffset.String(),
		"FENCE_TEST_CLOCK_RATE=" + formatRate(f.ClockRate),
	}
	n.stopGracefully(target, node, "clock-skew")
	hctx, cancel := n.healCtx(ctx)
	err := node.RestartEnv(hctx, env)
	cancel()
	if err != nil {
		n.markDown(target, err)
		return "restart with a skewed clock FAILED: " + brief(err), true, nil
	}
	start("%s restarted with %v", node.Name(), env)
	tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	terr := c.Transfer(tctx, target)
	cancel()
	led := "it leads"
	if terr != nil {
		led = "transfer FAILED: " + brief(terr)
		n.logf("clock-skew: %s", led)
	} else {
		n.logf("clock-skew: %s leads with %v", node.Name(), env)
	}
	holdFor(ctx, f.For)
	// Unskewed again: SIGTERM (a leader hands over first), then start
	// without the clock variables.
	note := fmt.Sprintf("%s ran with offset %s rate %s; %s", node.Name(), f.ClockOffset, formatRate(f.ClockRate), led)
	n.stopGracefully(target, node, "clock-skew heal")
	hctx, cancel = n.healCtx(ctx)
	defer cancel()
	if err := node.RestartEnv(hctx, nil); err != nil {
		n.markDown(target, err)
		return note + "; restart unskewed FAILED: " + brief(err), true, nil
	}
	return note + "; restarted unskewed", true, nil
}

// stopGracefully sends SIGTERM and waits for the exit; an exit other than
// 0 is recorded as a crash (the process is gone either way).
func (n *Nemesis) stopGracefully(i int, node *Node, why string) {
	if err := node.Stop(); err != nil {
		note := fmt.Sprintf("node %d (%s) did not stop cleanly on SIGTERM (%s): %s", i, node.Name(), why, brief(err))
		n.mu.Lock()
		n.crashes = append(n.crashes, note)
		n.mu.Unlock()
		n.logf("CRASH %s", note)
		if node.Running() {
			node.Kill()
		}
	}
}

// markDown records that node i could not be started (ensureRunning retries
// it every 5s, Run reports it unrecovered if it stays down).
func (n *Nemesis) markDown(i int, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	d := n.down[i]
	if d == nil {
		d = &downNode{since: time.Now()}
		n.down[i] = d
	}
	d.last, d.err = time.Now(), err
	d.attempts++
}

// memberChange removes follower target from the configuration, then wipes
// and re-adds it (Node.Rejoin through the other nodes' client ports), and
// holds f.For.
func (n *Nemesis) memberChange(ctx context.Context, f Fault, leader, target int, start func(string, ...any)) (string, bool, error) {
	c := n.Cluster
	node := c.Nodes[target]
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := c.RemoveMember(rctx, target)
	cancel()
	if err != nil {
		return "remove FAILED: " + brief(err), false, nil
	}
	start("%s removed (leader %s); wiping and re-adding it", node.Name(), c.Nodes[leader].Name())
	var urls []string
	for _, j := range c.others([]int{target}) {
		urls = append(urls, c.Nodes[j].DirectURL())
	}
	t0 := time.Now()
	hctx, cancel := n.healCtx(ctx)
	err = node.Rejoin(hctx, urls)
	cancel()
	if err != nil {
		n.markDown(target, err)
		return "re-add FAILED: " + brief(err), true, nil
	}
	note := fmt.Sprintf("%s removed, wiped and re-added, ready in %s", node.Name(), time.Since(t0).Round(time.Millisecond))
	note += "; " + n.caughtUp(ctx, leader, target, 10*time.Second)
	vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	voters, verr := c.Voters(vctx, leader) // a follower answers from its own latest configuration
	cancel()
	if verr == nil {
		note += fmt.Sprintf("; voters %v", voters)
	}
	holdFor(ctx, f.For)
	return note, true, nil
}

// caughtUp waits up to d until node target has applied what the leader had
// committed when it was asked (a fresh follower may say it is ready before
// its first append: it knows no commit index yet), and says how long that
// took.
func (n *Nemesis) caughtUp(ctx context.Context, leader, target int, d time.Duration) string {
	c := n.Cluster
	t0 := time.Now()
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	lst, err := c.Nodes[leader].Status(wctx)
	if err != nil {
		return "leader status: " + brief(err)
	}
	for {
		st, err := c.Nodes[target].Status(wctx)
		if err == nil && st.AppliedIndex >= lst.CommitIndex {
			return fmt.Sprintf("applied index %d (the leader's commit index %d) after %s", st.AppliedIndex, lst.CommitIndex, time.Since(t0).Round(time.Millisecond))
		}
		select {
		case <-wctx.Done():
			return fmt.Sprintf("NOT caught up with the leader's commit index %d in %s (%v)", lst.CommitIndex, d, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// names are the nodes' names.
func (c *Cluster) names(idx []int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, c.Nodes[i].Name())
	}
	return out
}

// others are the node indexes not in idx.
func (c *Cluster) others(idx []int) []int {
	var out []int
	for i := range c.Nodes {
		if !slices.Contains(idx, i) {
			out = append(out, i)
		}
	}
	return out
}
