package node

import (
	"bytes"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// logLines is a slog handler's writer that tests can read while the node
// writes to it.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// A restart says what it spends its time on: the snapshot restore is
// logged when it starts and when it ends, with its size and duration, and
// the replay of the log after it with its entry count and the time the
// start took — a restart that went from 0.8 s to 5.7 s said nothing.
func TestRestartLogsRestoreAndReplay(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(Config{DataDir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	tok := mustApply(t, n, acquire("l", time.Hour)).Lease.Token
	for i := range 50 {
		mustApply(t, n, state.Command{Op: state.OpAdd, Name: "n", Token: tok, Delta: 1, OpID: "op-" + string(rune('a'+i%26)) + string(rune('a'+i/26))})
	}
	if err := n.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	for range 7 { // a tail to replay after the snapshot
		mustApply(t, n, state.Command{Op: state.OpAdd, Name: "n", Token: tok, Delta: 1})
	}
	want := machineBytes(t, n)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	lines := &logLines{}
	n, err = Open(Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(lines, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	// The snapshot and the replayed tail (read through the WAL's
	// read-ahead) give the state before the restart, byte for byte.
	if got := machineBytes(t, n); !bytes.Equal(got, want) {
		t.Fatalf("state after the restart differs from the state before it (%d and %d bytes)", len(got), len(want))
	}
	replayed := regexp.MustCompile(`msg="log replayed" entries=(\d+) to_index=\d+ took=\S+`)
	deadline := time.Now().Add(30 * time.Second) // hang guard: the replay log comes from a goroutine
	for !replayed.MatchString(lines.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no log replayed line:\n%s", lines)
		}
		time.Sleep(5 * time.Millisecond)
	}
	out := lines.String()
	for _, want := range []string{`msg="restoring snapshot"`, `msg="snapshot restored" bytes=[1-9]\d* took=\S+ remembered_op_ids=50 `} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Fatalf("restart log has no %s:\n%s", want, out)
		}
	}
	// 7 commands and a few of raft's own (elections, configuration), not
	// the 51 the snapshot holds.
	if k, _ := strconv.Atoi(replayed.FindStringSubmatch(out)[1]); k < 7 || k >= 51 {
		t.Fatalf("log replayed %d entries after a snapshot with 7 commands after it:\n%s", k, out)
	}
}

// The node says when an id memory is near its cap: at 90% of MaxOps it
// logs a warning naming the counts, the caps and the oldest id's age, once,
// and Status reports it (a metric).
func TestIDMemoryNearItsCapIsLoggedOnce(t *testing.T) {
	rules := state.DefaultConfig()
	rules.MaxOps = 10
	lines := &logLines{}
	n, err := Open(Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(lines, nil)), Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	tok := mustApply(t, n, acquire("l", time.Hour)).Lease.Token
	add := func(i int) {
		mustApply(t, n, state.Command{Op: state.OpAdd, Name: "n", Token: tok, Delta: 1, OpID: strconv.Itoa(i)})
	}
	for i := range 8 {
		add(i)
	}
	near := regexp.MustCompile(`level=WARN msg="the id memory is near its cap[^"]*" fill=(\d+)% op_ids=(\d+) max_ops=10 `)
	if st := n.Status(); st.IDMemoryNearCap || near.MatchString(lines.String()) || st.IDMemory.Ops != 8 {
		t.Fatalf("near the cap at 8 of 10 op_ids (status %v, %d op_ids):\n%s", st.IDMemoryNearCap, st.IDMemory.Ops, lines)
	}
	add(8)
	add(9)
	if st := n.Status(); !st.IDMemoryNearCap || st.IDMemory.Bytes <= 0 {
		t.Fatalf("status not near the cap at 10 of 10 op_ids: %+v", st.IDMemory)
	}
	m := near.FindAllStringSubmatch(lines.String(), -1)
	if len(m) != 1 || m[0][1] != "90" || m[0][2] != "9" {
		t.Fatalf("want one warning, at 9 op_ids (90%%): %q\n%s", m, lines)
	}
}

// A restart replays at most about Config.SnapshotReplay commands, however
// large the state: with a last snapshot so large that the share rule
// (a quarter of its bytes in log) waits, the replay bound still takes
// snapshots. The state the restart rebuilds (snapshot, then the log tail
// through the WAL's read-ahead) is the state before it, byte for byte.
func TestRestartReplayIsBounded(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Logger: quietLogger(), SnapshotThreshold: 16, SnapshotReplay: 100}
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tok := mustApply(t, n, acquire("l", time.Hour)).Lease.Token
	big := bytes.Repeat([]byte("x"), 16<<10)
	for i := range 24 { // ~400 KB of state: the share rule waits for ~100 KB of log
		mustApply(t, n, state.Command{Op: state.OpWrite, Name: "big-" + strconv.Itoa(i), Token: tok, Value: big})
	}
	if err := n.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	const tail = 300 // small adds: ~30 KB of log, a quarter of nothing like the state
	for i := range tail {
		mustApply(t, n, state.Command{Op: state.OpAdd, Name: "n", Token: tok, Delta: 1, OpID: "op-" + strconv.Itoa(i)})
	}
	for deadline := time.Now().Add(30 * time.Second); n.snap.due(); time.Sleep(5 * time.Millisecond) { // hang guard
		if time.Now().After(deadline) {
			t.Fatal("a snapshot the trigger asked for was not written")
		}
	}
	if n.snap.lastSize.Load() < 300<<10 {
		t.Fatalf("last snapshot %d bytes: the state is not large enough to hold the share rule back", n.snap.lastSize.Load())
	}
	want := machineBytes(t, n)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	lines := &logLines{}
	cfg.Logger = slog.New(slog.NewTextHandler(lines, nil))
	n, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if got := machineBytes(t, n); !bytes.Equal(got, want) {
		t.Fatalf("state after the restart differs from the state before it (%d and %d bytes)", len(got), len(want))
	}
	replayed := regexp.MustCompile(`msg="log replayed" entries=(\d+) to_index=\d+ took=\S+ storage=\S+ raft_start=\S+ wait=\S+ apply=\S+ since_open=\S+`)
	for deadline := time.Now().Add(30 * time.Second); !replayed.MatchString(lines.String()); time.Sleep(5 * time.Millisecond) { // hang guard
		if time.Now().After(deadline) {
			t.Fatalf("no log replayed line with its parts:\n%s", lines)
		}
	}
	// At most the bound (100 commands, each its own entry here) and a few
	// entries of raft's own; without the bound the whole tail of 300.
	if k, _ := strconv.Atoi(replayed.FindStringSubmatch(lines.String())[1]); k >= 150 {
		t.Fatalf("the restart replayed %d entries, over a replay bound of 100 commands:\n%s", k, lines)
	}
	if st := n.Status().LastStart; st == nil || st.Total <= 0 { // (the tail may be empty: a snapshot can end it)
		t.Fatalf("Status.LastStart after the replay: %+v", st)
	}
}
