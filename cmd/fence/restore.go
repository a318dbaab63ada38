package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/backup"
	"github.com/fenceworks/fence/cluster"
	"github.com/fenceworks/fence/node"
)

const restoreUsage = `FILE --data-dir DIR [--floor N]... [--floor-from DSN]... [--table T]
                     [--node-id ID] [--raft-addr HOST:PORT] [--log-store wal] [--json]

Builds a fresh data dir DIR from the backup FILE (written by fence backup);
fence serve --data-dir DIR then starts with the backed-up state: resources,
locks and their leases (their remaining TTL continues in server time),
sessions and remembered ids. It runs offline: no server is involved.
FILE is read twice (checked whole before anything is written), so it must
be a file, not - (save a stream first: fence backup - > f).

The token counter never goes back. The first token the restored node will
issue is 1 + the largest of:
  - the backup's counter (the last token issued before the backup),
  - every --floor N (a token known to have been issued or accepted),
  - every --floor-from DSN: the largest token that guard store has accepted,
  - the wall-clock floor unix_ms(now) × 1024 (docs/design.md §3: above every
    token issued before, if fewer than 1024 were issued per millisecond on
    average and this clock is not behind the one that restored last).
It prints the old counter, each floor considered and the first token.
A first token above 2^53 − 2^40 (9006099743113216) is refused (exit 2):
it leaves 2^40 tokens of headroom below the largest token Fence issues
(2^53 − 1); a floor that high is most likely mistyped or corrupt.

--floor-from DSN, repeatable:
  postgres://user@host:5432/db?table=T    (postgresql:// too; table default fence_guard)
  mysql://user@host:3306/db?table=T       (mariadb:// too; or the driver's user@tcp(host:3306)/db)
  sqlite:/path/to/guard.db?table=T         (sqlite://PATH too; opened read-only)
  redis://host:6379/0?prefix=P             (rediss:// too; prefix default "fence")
--table T is the table of a SQL DSN without ?table=. A store where no token
is found (an empty table, a mistyped table or prefix) is an error, not 0.

The restore is all-or-nothing: DIR is built in a staging directory
(DIR.restoring beside an absent DIR, DIR/.restoring inside an existing empty
one), fsynced, and then made DIR in one step. Killed before that step, it
leaves DIR as it was and the staging directory: fence serve refuses to start
on DIR while it is there, and so does the next fence restore into DIR (exit
4, naming it): remove it once no fence restore runs, and restore again.

Refused, with DIR left untouched: a corrupt or truncated FILE (checksum), a
DIR that exists and is not an empty directory (an empty lost+found in it,
as at a fresh ext4 volume's root, counts as empty), and — unless --floor is given — a clock
behind the wall-clock time the backup recorded.

Like fence serve, --node-id, --raft-addr and --log-store are read from
FENCE_NODE_ID, FENCE_RAFT_ADVERTISE (or else FENCE_RAFT_ADDR: the address
other nodes dial) and FENCE_LOG_STORE when not given; a flag wins.

A cluster is re-formed from one restored node: restore into the first
node's new data dir with --node-id and --raft-addr (the address the other
nodes dial), start it with fence serve --data-dir DIR --node-id ID
--raft-addr ..., then start the others with empty data dirs and --join.

Exit codes: 0 restored, 1 error (FILE unreadable, a guard store
unreachable or empty), 2 usage, 4 refused (corrupt or truncated FILE, DIR
not empty or not a directory, an unfinished restore's staging directory,
clock behind).

FENCE_TEST_CLOCK_OFFSET and FENCE_TEST_RESTORE_HALT are test-only hooks: set,
each is named in a warning line on stderr.
`

// floorList is a repeatable --floor N.
type floorList []fence.Token

func (l *floorList) String() string {
	s := make([]string, len(*l))
	for i, t := range *l {
		s[i] = t.String()
	}
	return strings.Join(s, ",")
}

func (l *floorList) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || fence.Token(n) > fence.MaxTokenJSONInt {
		return fmt.Errorf("want a token from 1 to %d, got %q", uint64(fence.MaxTokenJSONInt), s)
	}
	*l = append(*l, fence.Token(n))
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, " ") }
func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// restoreEnv fills --node-id, --raft-addr and --log-store, where not given
// on the command line, from the variables fence serve reads for them:
// FENCE_NODE_ID, FENCE_RAFT_ADVERTISE or else FENCE_RAFT_ADDR (the address
// other nodes dial, as serve advertises it), FENCE_LOG_STORE. An empty
// variable counts as unset. It returns which flags it set (for messages).
func restoreEnv(fs *flag.FlagSet, getenv func(string) string) (envSource, error) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	src := envSource{}
	for _, e := range []struct{ flag, env string }{
		{"node-id", "FENCE_NODE_ID"}, {"raft-addr", "FENCE_RAFT_ADVERTISE"}, {"raft-addr", "FENCE_RAFT_ADDR"}, {"log-store", "FENCE_LOG_STORE"},
	} {
		v := getenv(e.env)
		if given[e.flag] || src[e.flag] != "" || v == "" {
			continue
		}
		if err := fs.Set(e.flag, v); err != nil {
			return nil, &usageError{fmt.Sprintf("restore: %s=%q: invalid value for --%s: %v", e.env, v, e.flag, err)}
		}
		src[e.flag] = e.env + "=" + v
	}
	return src, nil
}

// restoreNow is the restore's wall clock: time.Now, moved by
// FENCE_TEST_CLOCK_OFFSET (test only, as for fence serve).
func restoreNow() (time.Time, error) {
	now := time.Now()
	if s := os.Getenv(envClockOffset); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return now, &usageError{fmt.Sprintf("%s (test only): want a signed duration such as +1h or -30m, got %q", envClockOffset, s)}
		}
		now = now.Add(d)
	}
	return now, nil
}

// envRestoreHalt (test only) names a step of the restore's data dir
// building (backup.RestoreOptions.Hook: staged, built, synced, moved,
// renamed) at which fence restore prints "fence restore: halted at STEP"
// on stderr and waits to be killed: the system tests kill -9 it there.
const envRestoreHalt = "FENCE_TEST_RESTORE_HALT"

// restoreSteps are the values envRestoreHalt takes.
var restoreSteps = []string{backup.RestoreStaged, backup.RestoreBuilt, backup.RestoreSynced, backup.RestoreMoved, backup.RestoreRenamed}

// restoreTestHooks names the test-only variables fence restore reads that
// are set: FENCE_TEST_CLOCK_OFFSET and FENCE_TEST_RESTORE_HALT.
func restoreTestHooks(getenv func(string) string) []string {
	var set []string
	for _, k := range []string{envClockOffset, envRestoreHalt} {
		if v := getenv(k); v != "" {
			set = append(set, k+"="+v)
		}
	}
	return set
}

// haltHook is the Hook of FENCE_TEST_RESTORE_HALT=step: at that step it
// says so on stderr and blocks until the process is killed.
func haltHook(step string, stderr io.Writer) func(string) {
	if step == "" {
		return nil
	}
	return func(s string) {
		if s != step {
			return
		}
		fmt.Fprintf(stderr, "fence restore: halted at %s (%s, test only): waiting to be killed\n", s, envRestoreHalt)
		if f, ok := stderr.(*os.File); ok {
			f.Sync()
		}
		for {
			time.Sleep(time.Hour) // not a test's wait: the test kills this process
		}
	}
}

// restoreCmd is `fence restore FILE --data-dir DIR ...`.
func restoreCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newLocalFlagSet("restore", restoreUsage, g, stderr)
	var (
		floors                         floorList
		floorFrom                      stringList
		dataDir, table, nodeID, raftAd string
		logStore                       string
	)
	fs.StringVar(&dataDir, "data-dir", "", "the data `DIR` to create (must not exist, or be empty)")
	fs.Var(&floors, "floor", "a token `N` issued or accepted before: the first token is above it (repeatable)")
	fs.Var(&floorFrom, "floor-from", "a guard store `DSN` whose largest accepted token is a floor (repeatable)")
	fs.StringVar(&table, "table", "", "the guard `table` of a SQL --floor-from DSN without ?table= (default fence_guard)")
	fs.StringVar(&nodeID, "node-id", "fence-1", "the restored node's `ID` (fence serve --node-id)")
	fs.StringVar(&raftAd, "raft-addr", "", "for a cluster node: the `HOST:PORT` other nodes dial (fence serve --raft-advertise, or --raft-addr)")
	fs.StringVar(&logStore, "log-store", node.LogStoreWAL, "raft log store of the new data dir: wal (the only one)")
	pos, err := parseExact(fs, args, "FILE")
	if err != nil {
		return usageExit(err)
	}
	path := pos[0]
	src, err := restoreEnv(fs, os.Getenv)
	if err != nil {
		return usageExit(err)
	}
	usage := func(e error) int {
		if src.explain(e.Error()) != e.Error() {
			e = &usageError{src.explain(e.Error())}
		}
		return restoreFail(g, stdout, stderr, e)
	}
	switch {
	case path == "":
		return usage(&usageError{"restore: FILE is empty (want the path of a backup file)"})
	case path == "-":
		return usage(&usageError{"restore: FILE is -: fence restore reads FILE twice (it checks the whole file before writing anything): save the stream to a file first, e.g. fence backup - > f"})
	case dataDir == "":
		return usage(&usageError{"restore: --data-dir is required (the new data dir to create)"})
	case logStore != node.LogStoreWAL:
		return usage(fence.Invalid("--log-store", "wal", logStore))
	}
	if err := cluster.ValidateID("--node-id", nodeID); err != nil {
		return usage(err)
	}
	if raftAd != "" {
		if err := cluster.ValidateRaftAddr("--raft-addr", raftAd); err != nil {
			return usage(err)
		}
	}
	var stores []guardStore
	for _, dsn := range floorFrom {
		s, err := parseFloorFrom(dsn, table)
		if err != nil {
			return usage(err)
		}
		stores = append(stores, s)
	}
	for _, v := range restoreTestHooks(os.Getenv) {
		fmt.Fprintf(stderr, "fence restore: warning: test-only hook set in the environment (never in production): %s\n", v)
	}
	now, err := restoreNow()
	if err != nil {
		return usage(err)
	}

	// A data dir that is not empty, or that an unfinished restore left
	// its staging directory in or beside, is refused before any store is
	// asked.
	if err := node.CheckRestoreLeftover(dataDir); err != nil {
		return restoreFail(g, stdout, stderr, fmt.Errorf("restore refused: %w", err))
	}
	if err := node.CheckEmptyDir(dataDir); err != nil {
		return restoreFail(g, stdout, stderr, fmt.Errorf("restore refused: %w", err))
	}
	if step := os.Getenv(envRestoreHalt); step != "" && !slices.Contains(restoreSteps, step) {
		// A typo would let a crash test pass without halting anywhere.
		return restoreFail(g, stdout, stderr, &usageError{fmt.Sprintf("%s=%q: not a step of the restore (%s)", envRestoreHalt, step, strings.Join(restoreSteps, ", "))})
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := backup.RestoreOptions{DataDir: dataDir, NodeID: nodeID, RaftAddr: raftAd, LogStore: logStore, Now: now,
		Hook: haltHook(os.Getenv(envRestoreHalt), stderr)}
	for _, n := range floors {
		opts.Floors = append(opts.Floors, backup.Floor{Source: backup.SourceFlag, Token: n})
	}
	for _, s := range stores {
		sctx, cancel := ctx, context.CancelFunc(func() {})
		if g.timeout > 0 {
			sctx, cancel = context.WithTimeout(ctx, g.timeout)
		}
		max, err := s.maxToken(sctx, false)
		cancel()
		if err != nil {
			return restoreFail(g, stdout, stderr, fmt.Errorf("--floor-from: %w (nothing was written)", err))
		}
		opts.Floors = append(opts.Floors, backup.Floor{Source: s.String(), Token: max})
	}
	restrictUmask() // the restored data dir holds the signing key seeds, as serve's does
	rep, err := backup.Restore(ctx, path, opts)
	if err != nil {
		return restoreFail(g, stdout, stderr, err) // backup.Restore's errors name the file or the dir
	}
	res := restoreResult{path: path, opts: opts, rep: rep}
	if g.json {
		for _, w := range rep.Warnings { // the human report has them on stdout
			fmt.Fprintf(stderr, "warning: %s\n", w)
		}
		emit(g, stdout, "", res.json())
	} else {
		fmt.Fprint(stdout, res.human())
	}
	return exitOK
}

// restoreRefused: the refusals that protect the operator (a bad file, a
// data dir in use, a clock behind) exit 4, as the server's refusals do.
func restoreRefused(err error) (kind string, ok bool) {
	for _, k := range []struct {
		err  error
		kind string
	}{
		{backup.ErrCorrupt, "corrupt"}, {backup.ErrTruncated, "truncated"}, {backup.ErrFormat, "format"},
		{backup.ErrDirNotEmpty, "dir_not_empty"}, {backup.ErrNotDirectory, "not_a_directory"}, {backup.ErrClockBehind, "clock_behind"},
		{node.ErrRestoreIncomplete, "restore_incomplete"},
	} {
		if errors.Is(err, k.err) {
			return k.kind, true
		}
	}
	return "", false
}

// restoreFail reports err: "fence restore: message" on stderr, with --json
// also {"error": {...}} on stdout (refused: its kind; a file's: offset).
func restoreFail(g *globals, stdout, stderr io.Writer, err error) int {
	code := exitCodeOf(err)
	kind, refused := restoreRefused(err)
	if refused {
		code = exitRefused
	}
	var empty *EmptyStoreError
	if errors.As(err, &empty) {
		kind = "store_empty"
	}
	if r := fence.ReasonOf(err); r != "" {
		fmt.Fprintf(stderr, "%s: fence restore: %v\n", r, err)
	} else {
		fmt.Fprintf(stderr, "fence restore: %v\n", err)
	}
	if g.json {
		e := errorJSON(err)
		if kind != "" {
			e["kind"] = kind
		}
		var fe *backup.FileError
		if errors.As(err, &fe) {
			e["offset"] = fe.Offset
		}
		var he *backup.HeaderError
		if errors.As(err, &he) {
			e["field"] = he.Field
		}
		if empty != nil {
			e["where"] = empty.Where
		}
		emit(g, stdout, "", map[string]any{"error": e})
	}
	return code
}

// restoreResult is what fence restore reports.
type restoreResult struct {
	path string
	opts backup.RestoreOptions
	rep  backup.Report
}

// chosen is the floor the first token is above (the first of the largest).
func (r restoreResult) chosen() backup.Floor {
	var top backup.Floor
	for i, f := range r.rep.Floors {
		if i == 0 || f.Token > top.Token {
			top = f
		}
	}
	return top
}

func (r restoreResult) human() string {
	var b strings.Builder
	h := r.rep.Header
	mode := "a single node"
	if r.opts.RaftAddr != "" {
		mode = "a cluster's first node at raft address " + r.opts.RaftAddr
	}
	cluster := h.ClusterID
	if cluster == "" {
		cluster = "(none recorded)"
	}
	fmt.Fprintf(&b, "restored %s into %s (node %s, %s)\n", r.path, r.opts.DataDir, r.opts.NodeID, mode)
	fmt.Fprintf(&b, "  backup:       cluster %s, taken by %s (%s) at %s\n", cluster, h.NodeID, h.Role, wallTime(h.WallUnixMS))
	fmt.Fprintf(&b, "                applied index %d, term %d, server time %s, fence %s\n", h.AppliedIndex, h.Term, time.Duration(h.ServerTimeNS), h.Version)
	from := r.rep.RestoredFrom
	if from == "" {
		from = "a backup without a cluster id"
	}
	fmt.Fprintf(&b, "  new cluster:  %s (restored from %s)\n", r.rep.ClusterID, from)
	fmt.Fprintf(&b, "                the old cluster's nodes are not its members: their raft connections are refused\n")
	fmt.Fprintf(&b, "  signing key:  %s (new; the backup's keys are kept to verify only, without their private seeds: give the guards this cluster's key set, fence keys --json)\n", r.rep.SigningKey)
	fmt.Fprintf(&b, "  raft term:    %d (the restored log starts here, above every term the old cluster reached)\n", r.rep.Term)
	fmt.Fprintf(&b, "  old counter:  %d (the last token issued before the backup)\n", uint64(r.rep.Old))
	fmt.Fprintf(&b, "  floors (the first token is above every one):\n")
	ws, wt := 0, 0
	for _, f := range r.rep.Floors {
		ws, wt = max(ws, len(f.Source)), max(wt, len(f.Token.String()))
	}
	for _, f := range r.rep.Floors {
		fmt.Fprintf(&b, "    %-*s  %*d  %s\n", ws, f.Source, wt, uint64(f.Token), floorNote(f, r.opts.Now))
	}
	top := r.chosen()
	fmt.Fprintf(&b, "  first token:  %d (%s + 1)\n", uint64(r.rep.First), top.Source)
	for _, w := range r.rep.Warnings {
		fmt.Fprintf(&b, "  warning:      %s\n", w)
	}
	start := "fence serve --data-dir " + r.opts.DataDir
	if r.opts.RaftAddr != "" {
		start += " --node-id " + r.opts.NodeID + " --raft-addr " + r.opts.RaftAddr
		fmt.Fprintf(&b, "  start it:     %s\n", start)
		fmt.Fprintf(&b, "                (with --raft-advertise if it listens on another address), then start\n")
		fmt.Fprintf(&b, "                the other nodes with empty data dirs and --join this node's URL\n")
	} else {
		if r.opts.NodeID != "fence-1" {
			start += " --node-id " + r.opts.NodeID
		}
		fmt.Fprintf(&b, "  start it:     %s\n", start)
	}
	return b.String()
}

// floorNote explains a floor's number in the report.
func floorNote(f backup.Floor, now time.Time) string {
	switch f.Source {
	case backup.SourceWall:
		return fmt.Sprintf("unix_ms %d × %d (%s)", now.UnixMilli(), backup.WallFloorPerMS, now.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	case backup.SourceBackup:
		return "the backup's counter"
	case backup.SourceFlag:
		return "given"
	}
	return "the largest token the store accepted"
}

func wallTime(ms int64) string {
	if ms <= 0 || ms > math.MaxInt64/int64(time.Millisecond) {
		return fmt.Sprintf("unix ms %d", ms)
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

// json is the --json object (field names in the API's camelCase; tokens as
// numbers).
func (r restoreResult) json() map[string]any {
	h := r.rep.Header
	floors := make([]map[string]any, len(r.rep.Floors))
	for i, f := range r.rep.Floors {
		floors[i] = map[string]any{"source": f.Source, "token": uint64(f.Token)}
	}
	warnings := r.rep.Warnings
	if warnings == nil {
		warnings = []string{}
	}
	return map[string]any{
		"backup": r.path, "dataDir": r.opts.DataDir, "nodeId": r.opts.NodeID, "raftAddr": r.opts.RaftAddr,
		"header": map[string]any{
			"format": h.Format, "clusterId": h.ClusterID, "nodeId": h.NodeID, "role": h.Role,
			"appliedIndex": h.AppliedIndex, "term": h.Term, "lastToken": uint64(h.LastToken),
			"serverTime": jsonDuration(time.Duration(h.ServerTimeNS)), "wallUnixMs": h.WallUnixMS, "version": h.Version,
		},
		"oldCounter": uint64(r.rep.Old), "floors": floors, "firstToken": uint64(r.rep.First),
		"chosen": r.chosen().Source, "warnings": warnings, "nowUnixMs": r.opts.Now.UnixMilli(),
		"clusterId": r.rep.ClusterID, "restoredFrom": r.rep.RestoredFrom, "term": r.rep.Term, "signingKey": r.rep.SigningKey,
	}
}

var _ flag.Value = (*floorList)(nil)
