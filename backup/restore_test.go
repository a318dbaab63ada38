package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/state"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func openNode(t *testing.T, dir string) *node.Node {
	t.Helper()
	n, err := node.Open(node.Config{DataDir: dir, Logger: quiet})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func apply(t *testing.T, n *node.Node, c state.Command) state.Result {
	t.Helper()
	r, err := n.Apply(context.Background(), c)
	if err != nil || r.Err != nil {
		t.Fatalf("%+v: %v %v", c, err, r.Err)
	}
	return r
}

func grant(t *testing.T, n *node.Node, name string) fence.Token {
	t.Helper()
	return apply(t, n, state.Command{Op: state.OpAcquire, Name: name, Owner: "t", TTL: time.Hour}).Lease.Token
}

// takeBackup backs n up into a file, as the server does: BackupView, then
// Write with the point's header.
func takeBackup(t *testing.T, n *node.Node, path string) node.BackupPoint {
	t.Helper()
	p, err := n.BackupView(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := Write(f, headerOf(p), p.View); err != nil {
		t.Fatal(err)
	}
	return p
}

func headerOf(p node.BackupPoint) Header {
	return Header{ClusterID: p.ClusterID, NodeID: p.NodeID, Role: p.Role, AppliedIndex: p.Applied, Term: p.Term,
		LastToken: p.LastToken, ServerTimeNS: p.ServerTime, WallUnixMS: p.WallUnixMS, Version: "test"}
}

// backedUpNode is a node with a lease held through a request_id, a
// resource written with an op_id, a session holding a lease, backed up to
// a file; then more tokens were granted (up to T) and it was closed.
type backedUpNode struct {
	file      string
	point     node.BackupPoint
	reqToken  fence.Token
	session   uint64
	T         fence.Token // the largest token issued before the restore
	S         uint64      // the largest session id issued before the restore
	clusterID string
}

func backUpNode(t *testing.T) backedUpNode {
	t.Helper()
	var b backedUpNode
	n := openNode(t, t.TempDir())
	b.reqToken = apply(t, n, state.Command{Op: state.OpAcquire, Name: "held", Owner: "a", TTL: time.Hour, RequestID: "rid-1"}).Lease.Token
	apply(t, n, state.Command{Op: state.OpWrite, Name: "res", Token: b.reqToken, Value: []byte("v1"), OpID: "op-1"})
	b.session = apply(t, n, state.Command{Op: state.OpSessionOpen, TTL: time.Hour, RequestID: "open-1"}).Session.ID
	apply(t, n, state.Command{Op: state.OpAcquire, Name: "sess", Owner: "s", Session: b.session, Seq: 1})
	for i := range 5 {
		grant(t, n, "before-"+strconv.Itoa(i))
	}
	apply(t, n, state.Command{Op: state.OpAcquire, Name: "ttl", Owner: "l", TTL: time.Minute})
	b.file = filepath.Join(t.TempDir(), "b.fence")
	b.point = takeBackup(t, n, b.file)
	b.clusterID = n.ClusterID()
	if b.clusterID == "" || b.point.ClusterID != b.clusterID {
		t.Fatalf("cluster id %q, backup point's %q", b.clusterID, b.point.ClusterID)
	}
	for i := range 20 {
		b.T = grant(t, n, "after-"+strconv.Itoa(i))
	}
	for i := range 3 {
		b.S = apply(t, n, state.Command{Op: state.OpSessionOpen, TTL: time.Hour, RequestID: "after-open-" + strconv.Itoa(i)}).Session.ID
	}
	if b.T <= b.point.LastToken {
		t.Fatalf("T %d not above the backup's counter %d", b.T, b.point.LastToken)
	}
	n.Close()
	return b
}

// checkBack checks that n (restored from b) has the backed-up state: the
// lease and its request_id, the resource and its op_id, the session and
// its lease; the locks granted after the backup are gone.
func (b backedUpNode) checkBack(t *testing.T, n *node.Node) {
	t.Helper()
	ctx := context.Background()
	r := apply(t, n, state.Command{Op: state.OpAcquire, Name: "held", Owner: "a", TTL: time.Hour, RequestID: "rid-1"})
	if !r.Replayed || r.Lease.Token != b.reqToken {
		t.Fatalf("retry of rid-1 after the restore: %+v, want its lease %d replayed", r, b.reqToken)
	}
	w := apply(t, n, state.Command{Op: state.OpWrite, Name: "res", Token: b.reqToken, Value: []byte("v1"), OpID: "op-1"})
	if !w.Replayed || string(w.Resource.Value) != "v1" {
		t.Fatalf("op-1 after the restore: %+v, want it replayed", w)
	}
	if info, ok, err := n.Session(ctx, b.session); err != nil || !ok || info.Leases != 1 {
		t.Fatalf("session %d after the restore: %+v %v %v", b.session, info, ok, err)
	}
	if li, err := n.Lock(ctx, "after-0"); err != nil || li.Lease != nil {
		t.Fatalf("a lock granted after the backup: %+v, %v; want it free (not in the backup)", li, err)
	}
	if n.ClusterID() == b.clusterID || len(n.ClusterID()) != 36 {
		t.Fatalf("cluster id %q after the restore, the backup's %q: want a new one", n.ClusterID(), b.clusterID)
	}
	// A lease held at backup time keeps its remaining TTL in server time:
	// the restored node's clock resumes at the backup's server time (the
	// leader clock when it was taken), so the lease has what it had then,
	// less the server time run since the start — however long the outage
	// was in wall time.
	m := stateOf(t, b.file)
	atBackup := m.Lock("ttl", b.point.ServerTime).Lease.Remaining
	li, err := n.Lock(ctx, "ttl")
	now, nerr := n.Now()
	if err != nil || nerr != nil || li.Lease == nil {
		t.Fatalf("lock ttl after the restore: %+v, %v, %v: want it still held", li, err, nerr)
	}
	if run := time.Duration(now - b.point.ServerTime); li.Lease.Remaining > atBackup || li.Lease.Remaining < atBackup-run {
		t.Fatalf("lease ttl: %s remaining after the restore, %s at the backup, server time since %s", li.Lease.Remaining, atBackup, run)
	}
}

// syncWriter serialises writes (the node logs from several goroutines).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.w)
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// stateOf loads a backup file's state.
func stateOf(t *testing.T, path string) *state.Machine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	m := state.New()
	if err := m.Restore(r); err != nil {
		t.Fatal(err)
	}
	return m
}

// A restore with --floor T (clock behind, so the wall floor is small):
// the first token is exactly T+1; the state is back; the marker is logged
// and removed at the first start. A second restore of the same old backup,
// after grants on the first, with the wall floor (real clock), continues
// above them; a third, a millisecond of wall clock later, above those too.
func TestRestoreTokensContinueAboveEveryFloor(t *testing.T) {
	b := backUpNode(t)
	ctx := context.Background()

	dir1 := filepath.Join(t.TempDir(), "r1")
	rep, err := Restore(ctx, b.file, RestoreOptions{DataDir: dir1, Floors: []Floor{{SourceFlag, b.T}}, Now: time.UnixMilli(0)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Old != b.point.LastToken || rep.First != b.T+1 || rep.Header != headerOfFile(t, b.file) || rep.RestoredFrom != b.clusterID || rep.ClusterID == b.clusterID {
		t.Fatalf("report %+v: want old %d, first %d", rep, b.point.LastToken, b.T+1)
	}
	if _, err := os.Stat(filepath.Join(dir1, RestoredFile)); err != nil {
		t.Fatalf("no restore marker: %v", err)
	}
	var logs bytes.Buffer
	sw := &syncWriter{w: &logs}
	n1, err := node.Open(node.Config{DataDir: dir1, Logger: slog.New(slog.NewTextHandler(sw, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n1.Close() })
	if s := sw.String(); !strings.Contains(s, `msg="state restored from backup"`) || !strings.Contains(s, "first_token="+strconv.FormatUint(uint64(b.T+1), 10)) {
		t.Fatalf("the first start of the restored dir did not log the restore:\n%s", s)
	}
	if got := grant(t, n1, "first"); got != b.T+1 {
		t.Fatalf("first token after the restore %d, want %d (T %d + 1)", got, b.T+1, b.T)
	}
	b.checkBack(t, n1)
	if n1.ClusterID() != rep.ClusterID {
		t.Fatalf("restored cluster id %q, the report's %q", n1.ClusterID(), rep.ClusterID)
	}
	if s := sw.String(); !strings.Contains(s, "restored_from="+b.clusterID) {
		t.Fatalf("the restore line does not name the backed-up cluster:\n%s", s)
	}
	// Session ids are not re-issued either: one opened after the backup
	// may still be held by a client.
	if s := apply(t, n1, state.Command{Op: state.OpSessionOpen, TTL: time.Hour}).Session.ID; s <= b.S {
		t.Fatalf("a session opened after the restore got id %d, issued before it (up to %d)", s, b.S)
	}
	if _, err := os.Stat(filepath.Join(dir1, RestoredFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the restore marker is still there after the first start: %v", err)
	}
	var T2 fence.Token
	for i := range 10 {
		T2 = grant(t, n1, "r1-"+strconv.Itoa(i))
	}
	n1.Close()

	now := time.Now()
	dir2 := filepath.Join(t.TempDir(), "r2")
	rep2, err := Restore(ctx, b.file, RestoreOptions{DataDir: dir2, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	n2 := openNode(t, dir2)
	first2 := grant(t, n2, "first")
	if first2 != rep2.First || first2 <= T2 || first2 != WallFloor(now)+1 {
		t.Fatalf("second restore: first token %d (report %d), want the wall floor %d + 1, above %d", first2, rep2.First, WallFloor(now), T2)
	}
	b.checkBack(t, n2)
	var T3 fence.Token
	for i := range 100 {
		T3 = grant(t, n2, "r2-"+strconv.Itoa(i))
	}
	n2.Close()

	dir3 := filepath.Join(t.TempDir(), "r3")
	rep3, err := Restore(ctx, b.file, RestoreOptions{DataDir: dir3, Now: now.Add(time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	n3 := openNode(t, dir3)
	if got := grant(t, n3, "first"); got != rep3.First || got <= T3 {
		t.Fatalf("third restore a millisecond later: first token %d, want above %d", got, T3)
	}
}

func headerOfFile(t *testing.T, path string) Header {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, _, err := Verify(f)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A restore of a corrupt or truncated file, into a non-empty dir, or with
// the clock behind and no --floor, is refused with its error, and the
// target is untouched: a dir that did not exist still does not, an empty
// one stays empty, a non-empty one keeps exactly what it held.
func TestRestoreRefusalsLeaveTheDirUntouched(t *testing.T) {
	b := backUpNode(t)
	good, err := os.ReadFile(b.file)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x04
	truncated := good[:len(good)-10]
	now := time.Now()
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "keep"), []byte("mine"), 0o644)
	cases := []struct {
		name string
		file string
		dir  string // "" = a dir that does not exist
		now  time.Time
		want error
	}{
		{"flipped byte", write("flipped", flipped), "", now, ErrCorrupt},
		{"flipped byte, empty dir", write("flipped", flipped), t.TempDir(), now, ErrCorrupt},
		{"truncated", write("truncated", truncated), "", now, ErrTruncated},
		{"truncated, empty dir", write("truncated", truncated), t.TempDir(), now, ErrTruncated},
		{"non-empty dir", b.file, full, now, ErrDirNotEmpty},
		{"clock behind", b.file, "", time.UnixMilli(b.point.WallUnixMS - 60_000), ErrClockBehind},
	}
	for _, c := range cases {
		dir := c.dir
		if dir == "" {
			dir = filepath.Join(t.TempDir(), "new")
		}
		before := listing(t, dir)
		_, err := Restore(context.Background(), c.file, RestoreOptions{DataDir: dir, Now: c.now})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if after := listing(t, dir); !slices.Equal(before, after) {
			t.Errorf("%s: the dir held %v, now %v", c.name, before, after)
		}
	}
	if b, err := os.ReadFile(filepath.Join(full, "keep")); err != nil || string(b) != "mine" {
		t.Fatalf("the non-empty dir's file: %q %v", b, err)
	}
}

// listing is every path under dir ("<absent>" if dir does not exist).
func listing(t *testing.T, dir string) []string {
	t.Helper()
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return []string{"<absent>"}
	}
	var out []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		out = append(out, p)
		return nil
	})
	return out
}

// gate is a writer that, at its first write, waits until the load has
// completed want more grants: if writing a backup held applies up, the
// grants could not complete and the backup would never be written.
type gate struct {
	w       io.Writer
	granted *atomic.Int64
	want    int64
	opened  bool
	stalled chan struct{}
	t       *testing.T
}

func (g *gate) Write(p []byte) (int, error) {
	if !g.opened {
		g.opened = true
		deadline := time.After(2 * time.Minute) // a hang guard, not a timing assertion
		for g.granted.Load() < g.want {
			select {
			case <-deadline:
				close(g.stalled)
				return 0, errors.New("grants stalled while the backup was written")
			case <-time.After(time.Millisecond):
			}
		}
	}
	return g.w.Write(p)
}

// A backup taken under load is consistent and stalls no grants: clients
// grant and release continuously; the backup's stream waits, at its first
// byte, for 200 more grants to complete (they complete: the copy is taken,
// the lock released); applies went on past the backup's index while it was
// written; every token acknowledged before the backup was asked for is at
// most its counter, which is the state's counter, and the header names the
// state's index and cluster id.
func TestBackupUnderLoadIsConsistentAndStallsNothing(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	var granted atomic.Int64
	var maxAcked atomic.Uint64
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				name := "load-" + strconv.Itoa(c) + "-" + strconv.Itoa(i%50)
				r, err := n.Apply(ctx, state.Command{Op: state.OpAcquire, Name: name, Owner: "o", TTL: time.Minute})
				if err != nil || r.Err != nil || r.Lease == nil {
					continue
				}
				for {
					old := maxAcked.Load()
					if uint64(r.Lease.Token) <= old || maxAcked.CompareAndSwap(old, uint64(r.Lease.Token)) {
						break
					}
				}
				granted.Add(1)
				n.Apply(ctx, state.Command{Op: state.OpRelease, Name: name, Token: r.Lease.Token})
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	for granted.Load() < 100 {
		time.Sleep(time.Millisecond)
	}
	ackedBefore := maxAcked.Load()
	bctx, bcancel := context.WithCancel(context.Background())
	p, err := n.BackupView(bctx)
	if err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	g := &gate{w: &file, granted: &granted, want: granted.Load() + 200, stalled: make(chan struct{}), t: t}
	err = Write(g, headerOf(p), p.View)
	bcancel()
	if err != nil {
		t.Fatalf("writing the backup: %v", err)
	}
	if st := n.Status(); st.AppliedIndex <= p.Applied {
		t.Fatalf("applied index %d after the backup was written, backup at %d: nothing was applied while it was written", st.AppliedIndex, p.Applied)
	}
	if uint64(p.LastToken) < ackedBefore {
		t.Fatalf("the backup's counter %d is below token %d acknowledged before it was asked for", p.LastToken, ackedBefore)
	}
	r, err := Read(bytes.NewReader(file.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	m := state.New()
	if err := m.Restore(r); err != nil { // refuses any lock or resource token above the counter
		t.Fatal(err)
	}
	h := r.Header()
	if m.LastToken() != h.LastToken || h.LastToken != p.LastToken || m.ClusterID() != h.ClusterID || h.ClusterID == "" ||
		h.AppliedIndex != p.Applied || h.AppliedIndex == 0 || m.Now() > h.ServerTimeNS || h.ServerTimeNS != p.ServerTime {
		t.Fatalf("header %+v vs state: counter %d, cluster id %q, server time %d", h, m.LastToken(), m.ClusterID(), m.Now())
	}
}

// Options a restore cannot use are refused before anything is read or
// written, naming the field.
func TestRestoreRefusesBadOptions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	for _, opts := range []RestoreOptions{
		{DataDir: ""},
		{DataDir: dir, LogStore: "rocks"},
		{DataDir: dir, RaftAddr: "no-port"},
		{DataDir: dir, RaftAddr: ":7000"},
	} {
		opts.Now = time.Now()
		_, err := Restore(context.Background(), "/nonexistent/file", opts)
		var inv *fence.InvalidError
		if !errors.As(err, &inv) {
			t.Errorf("%+v: %v, want an InvalidError naming the field", opts, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%+v: the dir was created", opts)
		}
	}
}
