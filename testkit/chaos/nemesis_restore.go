package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/testkit/harness"
)

// FaultRestore backs the cluster up at a random time (client.Backup of one
// node: Fault.BackupLead before At), then, at At, cuts every client off
// (each client proxy drops every byte), reads the built-in store's resources
// directly (the end of the epoch the restore rolls back), kills every node,
// restores the backup with `fence restore` into node 0's emptied data dir —
// without a floor, or with --floor-from the run's PostgreSQL guard table,
// alternately — starts node 0 from it, wipes the other nodes and joins them
// to it (--join), reads the restored resources directly (the state the next
// epoch starts from), and opens the proxies again once the clients have been
// cut off for at least For (at least the longest lease or session TTL: every
// lease granted before the cut has ended by its holder's own clock before a
// restored node grants anything). The run goes on against the restored
// cluster. The nemesis records the backup, the restore and both reads in the
// history (KindBackup, KindRestore, KindFinal, KindRestored): the checkers
// scope the built-in store's checks to the epochs between restores.
const FaultRestore FaultKind = "restore"

// Kinds of the harness's own records of a restore (worker -1).
const (
	// KindBackup: a backup's call and return; Token is the header's
	// last_token, Version its applied_index, N the restore's number.
	KindBackup Kind = "backup"
	// KindRestore: Call is when every client was cut off (the epoch N-1
	// ends: no request reaches a node after it), Return when they were let
	// in again (epoch N begins); Token is the first token the restored
	// node issues as fence restore reported it (0: not known); Value is
	// the Call of the backup restored (its KindBackup record).
	KindRestore Kind = "restore"
	// KindRestored: a resource of the built-in store read directly from
	// the restored cluster before any client could reach it (the state the
	// backup held). N is the restore's number.
	KindRestored Kind = "restored"
)

// RestoreConfig is what the restore fault needs besides the cluster.
type RestoreConfig struct {
	Bin string // the fence binary (fence restore)
	Dir string // where the backup files go (the run's dir)
	// PostgresDSN and GuardTable: --floor-from of every other restore
	// (empty DSN: no --floor-from restores).
	PostgresDSN, GuardTable string
	Resources               int // the built-in store's resources (stock/sku-0..K-1)
	// MinCut is the shortest time every client is cut off by a restore
	// (the longest lease or session TTL and a margin): Fault.For is raised
	// to it.
	MinCut time.Duration
	// NoRaise is a PLANTED BUG for the harness's own test: the restore
	// does not raise the counter above the tokens issued after the backup
	// (backup.Restore in this process with --floor 1 and a wall clock of
	// 1970: the first token is the backup's counter + 1). The
	// tokens-regressed checker must fail the run.
	NoRaise bool
	// InProcess restores with package backup in this process instead of
	// `fence restore` (the same rule; for a fence binary without it).
	InProcess bool
}

// restoreDone is one restore the nemesis made: its records for the history.
type restoreDone struct {
	ops []Op
}

// Restores are the harness's records of the restores so far (KindBackup,
// KindRestore, KindFinal at the end of each epoch, KindRestored), for the
// history.
func (n *Nemesis) Restores() []Op {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []Op
	for _, r := range n.restores {
		out = append(out, r.ops...)
	}
	return out
}

// backupResult is a backup taken for a restore fault.
type backupResult struct {
	path string
	op   Op
	err  error
}

// takeBackup backs the cluster up into a file, retrying (a fault may leave
// it without a leader for a while) until it succeeds or until deadline.
func (n *Nemesis) takeBackup(ctx context.Context, i int, deadline time.Time) backupResult {
	rc := n.Restore
	path := filepath.Join(rc.Dir, fmt.Sprintf("restore-%d.backup", i))
	// Each restore asks the nodes in another order: a backup from a
	// follower (caught up to its commit index) as well as from the leader.
	eps := rotate(n.Cluster.DirectURLs(), i)
	var last error
	for attempt := 1; ; attempt++ {
		// never while a restore runs: a backup is of one epoch (taken
		// between an opening and the next cut)
		n.restoreMu.RLock()
		op := Op{Worker: -1, N: i, Kind: KindBackup, Call: nowNano(), Attempts: attempt}
		hdr, err := func() (string, error) {
			cl, err := client.New(strings.Join(eps, ","), n.Cluster.Nodes[0].ClientOptions(client.WithoutSession(), client.WithAttemptTimeout(3*time.Second))...)
			if err != nil {
				return "", err
			}
			defer cl.Close()
			f, err := os.Create(path)
			if err != nil {
				return "", err
			}
			bctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			h, err := cl.Backup(bctx, f)
			if cerr := f.Close(); err == nil && cerr != nil {
				err = cerr
			}
			if err != nil {
				return "", err
			}
			op.Return = nowNano()
			op.Token, op.Version, op.Role = h.GetLastToken(), h.GetAppliedIndex(), h.GetRole()
			return fmt.Sprintf("node %s (%s) applied index %d last token %d", h.GetNodeId(), h.GetRole(), h.GetAppliedIndex(), h.GetLastToken()), nil
		}()
		n.restoreMu.RUnlock()
		if err == nil {
			op.Out = OutcomeOK
			n.logf("fault #%d restore: backup taken from %s", i, hdr)
			return backupResult{path: path, op: op}
		}
		last = err
		if ctx.Err() != nil || time.Now().Add(time.Second).After(deadline) {
			return backupResult{err: fmt.Errorf("backup: %d attempts: %w", attempt, last)}
		}
		holdFor(ctx, 500*time.Millisecond)
	}
}

// restoreFault is FaultRestore: see there. The backup was taken (or tried)
// by the fault's goroutine before its lanes were taken.
func (n *Nemesis) restoreFault(ctx context.Context, i int, f Fault, b backupResult) (string, bool, error) {
	if n.Restore == nil {
		return "no RestoreConfig", false, nil
	}
	if b.err != nil {
		return "no backup: " + brief(b.err), false, nil
	}
	rc := n.Restore
	c := n.Cluster
	cut := max(f.For, rc.MinCut)
	n.restoreMu.Lock()
	defer n.restoreMu.Unlock()
	n.mu.Lock()
	n.nRestores++
	num := n.nRestores
	// Every third restore restores the previous restore's backup again
	// (the same old file twice, the second time from further back): its
	// first token must still be above everything issued since.
	again := ""
	if num%3 == 0 && n.lastBackup.path != "" {
		b, again = n.lastBackup, " (the previous restore's backup again)"
	}
	n.lastBackup = b
	n.mu.Unlock()
	floorFrom := ""
	if rc.PostgresDSN != "" && num%2 == 0 {
		floorFrom = rc.guardDSN()
	}

	// 1. Every client cut off: epoch num-1 ends. Nothing reaches a node
	// from now on (the nemesis's own reads go to the nodes' own ports).
	for _, node := range c.Nodes {
		if err := node.Proxy().Blackhole(Both); err != nil {
			n.healProxies()
			return "cut the clients off: " + err.Error(), false, nil
		}
	}
	rop := Op{Worker: -1, N: num, Kind: KindRestore, Call: nowNano(), Value: b.op.Call}
	t0 := time.Now()
	n.logf("fault #%d %s: restore #%d of %s%s (backup at applied index %d, last token %d); clients cut off",
		i, f, num, filepath.Base(b.path), again, b.op.Version, b.op.Token)
	records := []Op{b.op}

	// 2. The end of the epoch: requests that reached a node before the
	// cut are applied within milliseconds; the reply of any later apply
	// is dropped by the proxies (its outcome is unknown to its worker).
	holdFor(context.WithoutCancel(ctx), 300*time.Millisecond)
	hctx, cancel := n.healCtx(ctx)
	defer cancel()
	end, err := FinalReads(hctx, strings.Join(c.DirectURLs(), ","), "", "", rc.Resources, []string{StoreFence}, c.Nodes[0].ClientOptions()...)
	if err != nil {
		n.logf("restore #%d: end-of-epoch reads: %v", num, err)
	}
	records = append(records, end...)

	// The largest token any node reports (fence status lastToken): the
	// --floor an operator gives when the restore refuses a clock behind
	// the backup's (a backup taken by a node running with a clock-skew
	// fault's offset records that node's wall clock).
	var lastIssued uint64
	for _, node := range c.Nodes {
		if st, serr := node.Status(hctx); serr == nil {
			lastIssued = max(lastIssued, st.GetLastToken())
		}
	}

	// 3. Every node killed; node 0 restored from the backup; the others
	// wiped and joined to it.
	for _, node := range c.Nodes {
		node.Resume()
		if err := node.Kill(); err != nil {
			n.logf("restore #%d: kill %s: %v", num, node.Name(), err)
		}
	}
	node0 := c.Nodes[0]
	var report string
	err = node0.Reinit(hctx, nil, func(dir string) error {
		var rerr error
		report, rop.Token, rerr = rc.restoreInto(hctx, b.path, dir, node0, floorFrom)
		if rerr != nil && floorFrom != "" {
			// e.g. a guard table with no token yet (a control run's
			// PostgreSQL writes are plain): the refusal is right; go on
			// with the wall floor alone
			n.logf("restore #%d: with --floor-from refused (%s); again without", num, brief(rerr))
			floorFrom = ""
			if werr := wipeDir(dir); werr != nil {
				return werr
			}
			report, rop.Token, rerr = rc.restoreInto(hctx, b.path, dir, node0, "")
		}
		if rerr != nil && strings.Contains(rerr.Error(), "clock is behind") && lastIssued > 0 {
			// As the refusal tells an operator: --floor at least the
			// largest token issued (read from the nodes before the kill).
			n.logf("restore #%d: refused, clock behind the backup's (%s); again with --floor %d", num, brief(rerr), lastIssued)
			if werr := wipeDir(dir); werr != nil {
				return werr
			}
			report, rop.Token, rerr = rc.restoreInto(hctx, b.path, dir, node0, floorFrom, "--floor", strconv.FormatUint(lastIssued, 10))
		}
		return rerr
	})
	if err != nil {
		n.markDown(0, err)
		n.healProxies()
		return fmt.Sprintf("restore #%d FAILED: %s", num, brief(err)), true, nil
	}
	n.clearDown(0)
	n.logf("restore #%d: %s restored and started (%s)", num, node0.Name(), report)
	for j, node := range c.Nodes[1:] {
		if err := node.Rejoin(hctx, []string{node0.DirectURL()}); err != nil {
			n.markDown(j+1, err)
			n.logf("restore #%d: %s: join FAILED: %s", num, node.Name(), brief(err))
			continue
		}
		n.clearDown(j + 1) // a node left down by an earlier fault runs again
	}
	if c.Raft() {
		for j := 1; j < len(c.Nodes); j++ {
			n.logf("restore #%d: %s %s", num, c.Nodes[j].Name(), n.caughtUp(hctx, 0, j, 10*time.Second))
		}
	}

	// 4. The restored state, before any client can reach it.
	restored, err := FinalReads(hctx, strings.Join(c.DirectURLs(), ","), "", "", rc.Resources, []string{StoreFence}, c.Nodes[0].ClientOptions()...)
	if err != nil {
		n.logf("restore #%d: restored reads: %v", num, err)
	}
	for _, o := range restored {
		o.Kind, o.N = KindRestored, num
		records = append(records, o)
	}

	// 5. The clients back once they have been cut off for the cut.
	holdFor(context.WithoutCancel(ctx), cut-time.Since(t0))
	n.healProxies()
	rop.Return, rop.Out = nowNano(), OutcomeOK
	records = append(records, rop)
	n.mu.Lock()
	n.restores = append(n.restores, restoreDone{ops: records})
	n.mu.Unlock()
	how := "no floor"
	if floorFrom != "" {
		how = "--floor-from the guard table"
	}
	if rc.NoRaise {
		how = "PLANTED: not raised (--floor 1, wall clock of 1970)"
	}
	return fmt.Sprintf("restore #%d%s (%s): %s; clients cut off %s", num, again, how, report, time.Since(t0).Round(time.Millisecond)), true, nil
}

// clearDown forgets that node i could not be restarted (it runs again).
func (n *Nemesis) clearDown(i int) {
	n.mu.Lock()
	d := n.down[i]
	delete(n.down, i)
	n.mu.Unlock()
	if d != nil {
		n.logf("node %d is back (restored or joined) after %d failed restarts", i, d.attempts)
	}
}

// healProxies lets the clients in again (every client proxy healed).
func (n *Nemesis) healProxies() {
	for _, node := range n.Cluster.Nodes {
		node.Proxy().Heal()
	}
}

// guardDSN is PostgresDSN with ?table= the guard table.
func (rc *RestoreConfig) guardDSN() string {
	u, err := url.Parse(rc.PostgresDSN)
	if err != nil {
		return rc.PostgresDSN
	}
	q := u.Query()
	q.Set("table", rc.GuardTable)
	u.RawQuery = q.Encode()
	return u.String()
}

// restoreInto builds dir from the backup at path for node (its id and
// raft address when it is a cluster node): `fence restore`, or package
// backup in this process (InProcess, NoRaise). It returns a one-line
// summary and the first token the node will issue.
func (rc *RestoreConfig) restoreInto(ctx context.Context, path, dir string, node *Node, floorFrom string, extra ...string) (string, uint64, error) {
	if rc.NoRaise || rc.InProcess {
		return restoreInProcess(ctx, path, dir, node, floorFrom, rc.NoRaise)
	}
	args := append([]string{"restore", path, "--data-dir", dir, "--json"}, extra...)
	if node.RaftAddr() != "" {
		args = append(args, "--node-id", node.ID(), "--raft-addr", node.RaftAddr())
	}
	if floorFrom != "" {
		args = append(args, "--floor-from", floorFrom)
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, rc.Bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", 0, fmt.Errorf("fence %s: %w: %s%s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()), strings.TrimSpace(stdout.String()))
	}
	var rep struct {
		Old    uint64 `json:"oldCounter"`
		First  uint64 `json:"firstToken"`
		Chosen string `json:"chosen"`
		Floors []struct {
			Source string `json:"source"`
			Token  uint64 `json:"token"`
		} `json:"floors"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &rep); err != nil {
		// the report's form is the CLI's business: the restore worked
		return "fence restore: " + oneLine(stdout.String()), 0, nil
	}
	var fl []string
	for _, f := range rep.Floors {
		src := f.Source
		if strings.HasPrefix(src, "postgres") {
			src = "guard-table"
		}
		fl = append(fl, fmt.Sprintf("%s=%d", src, f.Token))
	}
	return fmt.Sprintf("fence restore: old counter %d, floors %s, first token %d (%s + 1)", rep.Old, strings.Join(fl, " "), rep.First, rep.Chosen), rep.First, nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// Reinit starts the node afresh from a data dir that prepare builds: the
// process must have exited (Kill); the data dir is emptied (a tmpfs stays
// mounted), prepare(dir) fills it, and a new process starts on the same
// addresses and id with formation as its formation flags (nil: none, for a
// data dir that holds raft state) and waits until it is ready.
func (n *Node) Reinit(ctx context.Context, formation []string, prepare func(dir string) error) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return errors.New("chaos: node closed")
	}
	old := n.srv
	n.mu.Unlock()
	if err := old.Close(); err != nil {
		return fmt.Errorf("chaos: reinit %s: stop: %w", n.cfg.Name, err)
	}
	if err := wipeDir(n.cfg.DataDir); err != nil {
		return fmt.Errorf("chaos: reinit %s: %w", n.cfg.Name, err)
	}
	if err := prepare(n.cfg.DataDir); err != nil {
		return fmt.Errorf("chaos: reinit %s: %w", n.cfg.Name, err)
	}
	cfg := n.serverConfig(formation)
	cfg.NoWait = false
	srv, err := harness.Start(ctx, cfg)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil {
		// the old server object stays (exited): Restart tries it again
		// with the restored dir and the old formation flags
		return fmt.Errorf("chaos: reinit %s: %w", n.cfg.Name, err)
	}
	if n.closed {
		srv.Close()
		return errors.New("chaos: node closed")
	}
	n.starts += old.Starts()
	n.srv, n.rejoin = srv, nil
	n.cfg.Formation = formation
	return nil
}
