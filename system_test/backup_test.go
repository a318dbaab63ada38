//go:build e2e

package system_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/backup"
	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/state"
	"github.com/fenceworks/fence/testkit/harness"
	"github.com/fenceworks/fence/testkit/testutil"
)

// Backups (MaintenanceService.Backup, client.Backup) against real `fence
// serve` processes. No test here measures time: a backup that stalled
// applies would leave a wait below unfinished, and the test fails at its
// hang guard.

// backupClient is a client of the given nodes for backups and grants.
func backupClient(t *testing.T, urls ...string) *client.Client {
	t.Helper()
	c, err := client.New(strings.Join(urls, ","), client.WithAttemptTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// backupGrant takes lock name, writes its token to resource name, and releases
// it; it returns the token.
func backupGrant(ctx context.Context, c *client.Client, name string) (fence.Token, error) {
	l, err := c.Acquire(ctx, name, client.TTL(time.Minute))
	if err != nil {
		return 0, err
	}
	if _, err := c.Write(ctx, name, l.Token(), []byte(fmt.Sprint(l.Token()))); err != nil {
		return 0, err
	}
	return l.Token(), l.Release(ctx)
}

// backupFill writes n resources of size random bytes (one lock each, token
// written; four at a time), so that a backup of the state is larger than
// the socket buffers between the node and the client: a paused reader
// holds the node mid-stream.
func backupFill(t *testing.T, ctx context.Context, c *client.Client, n, size int) {
	t.Helper()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				name := fmt.Sprintf("fill-%d", i)
				l, err := c.Acquire(ctx, name, client.TTL(time.Minute))
				if err != nil {
					errs <- err
					return
				}
				v := make([]byte, size)
				rand.Read(v)
				if _, err := c.Write(ctx, name, l.Token(), v); err != nil {
					errs <- err
					return
				}
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// loadBackup verifies a backup file and loads its state; it checks the
// header against the one the stream carried and returns both.
func loadBackup(t *testing.T, file []byte, streamed *fencev1.BackupHeader) (backup.Header, *state.Machine) {
	t.Helper()
	h, tr, err := backup.Verify(bytes.NewReader(file))
	if err != nil {
		t.Fatalf("the backup does not verify: %v", err)
	}
	if tr.StateBytes <= 0 {
		t.Fatalf("trailer %+v: no state", tr)
	}
	if h.NodeID != streamed.GetNodeId() || h.AppliedIndex != streamed.GetAppliedIndex() || uint64(h.LastToken) != streamed.GetLastToken() ||
		h.ClusterID != streamed.GetClusterId() || h.Term != streamed.GetTerm() || h.Role != streamed.GetRole() || h.WallUnixMS != streamed.GetWallUnixMs() {
		t.Fatalf("file header %+v differs from the streamed one %v", h, streamed)
	}
	r, err := backup.Read(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	m := state.New()
	if err := m.Restore(r); err != nil {
		t.Fatalf("the backup's state does not load: %v", err)
	}
	if m.LastToken() != h.LastToken {
		t.Fatalf("the state's counter is %d, the header says %d", m.LastToken(), h.LastToken)
	}
	return h, m
}

// pausingWriter passes writes to buf; its first Write returns only once
// release is closed (or fails with the error failWith, when set, instead).
type pausingWriter struct {
	buf      bytes.Buffer
	paused   chan struct{} // closed when the first write arrived
	release  chan struct{}
	failWith error
	once     sync.Once
}

func newPausingWriter() *pausingWriter {
	return &pausingWriter{paused: make(chan struct{}), release: make(chan struct{})}
}

func (w *pausingWriter) Write(p []byte) (int, error) {
	first := false
	w.once.Do(func() { first = true; close(w.paused) })
	if first {
		<-w.release
		if w.failWith != nil {
			return 0, w.failWith
		}
	}
	return w.buf.Write(p)
}

// One node, its state over 12 MiB (more than the socket buffers between
// it and the client hold, so that a paused reader holds the node
// mid-stream): a backup under load (backupUnderLoad), then one at a time
// and a client gone mid-stream (backupClientGone). The server is built
// without -race (plainBinary): under -race writing the 12 MiB took 21 s
// of the test's 41 (0.5 s without); the backup's node side runs under
// -race in package node's tests (core's), the handler in package server's
// (TestBackupHandler).
func TestBackupSingleNode(t *testing.T) {
	t.Parallel() // own processes, ports and dirs: safe beside the other parallel tests (docs/testing.md)
	srv := startServerWith(t, plainBinary(t, "./cmd/fence"), filepath.Join(t.TempDir(), "data"))
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	c := backupClient(t, srv.URL())
	backupFill(t, ctx, c, 12, 1<<20)
	t.Run("UnderLoad", func(t *testing.T) { backupUnderLoad(t, ctx, srv, c) })
	t.Run("OneAtATimeClientGone", func(t *testing.T) { backupClientGone(t, ctx, srv, c) })
}

// A backup taken under a load of grants is consistent — its counter is at
// least every token in its state, and equal to the header's — and does not
// stall applies: the reader stops after the first message until 50 more
// grants have completed, which they could not if the stream held applies
// back (the test would hang to its guard). The node's counter after the
// stream is at least 50 above the backup's: those grants were applied while
// the backup was being written.
func backupUnderLoad(t *testing.T, ctx context.Context, srv *fenceServer, c *client.Client) {

	var granted atomic.Int64
	var maxGranted atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tok, err := backupGrant(ctx, c, fmt.Sprintf("load-%d-%d", w, i%20))
				if err != nil {
					errs <- err
					return
				}
				for {
					m := maxGranted.Load()
					if uint64(tok) <= m || maxGranted.CompareAndSwap(m, uint64(tok)) {
						break
					}
				}
				granted.Add(1)
			}
		})
	}
	for granted.Load() < 20 { // the load is running before the backup starts
		select {
		case err := <-errs:
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}

	w := newPausingWriter()
	type result struct {
		hdr *fencev1.BackupHeader
		err error
	}
	done := make(chan result, 1)
	go func() {
		hdr, err := c.Backup(ctx, w)
		done <- result{hdr, err}
	}()
	select {
	case <-w.paused:
	case r := <-done:
		t.Fatalf("the backup ended before its first write: %v", r.err)
	}
	before := granted.Load()
	for granted.Load() < before+50 {
		select {
		case err := <-errs:
			t.Fatalf("a grant failed while the backup stream was paused: %v", err)
		case <-ctx.Done():
			t.Fatalf("only %d grants completed while the backup stream was paused (want 50): applies stalled", granted.Load()-before)
		case <-time.After(10 * time.Millisecond):
		}
	}
	close(w.release)
	r := <-done
	close(stop)
	wg.Wait()
	if r.err != nil {
		t.Fatal(r.err)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}

	h, m := loadBackup(t, w.buf.Bytes(), r.hdr)
	st, err := srv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.GetLastToken() < uint64(h.LastToken)+50 {
		t.Fatalf("node's counter %d after the stream, backup's %d: want the 50 grants made while it was paused on top", st.GetLastToken(), h.LastToken)
	}
	if h.AppliedIndex >= st.GetAppliedIndex() || h.NodeID != st.GetId() || h.ClusterID != st.GetClusterId() {
		t.Fatalf("header %+v against the node's status after %v", h, st)
	}
	// Consistent: no token in the state above its counter; the fill and
	// some of the load are in it.
	now := m.Now()
	for _, l := range m.Locks("", now) {
		if l.LastToken > h.LastToken || l.Lease != nil && l.Lease.Token > h.LastToken {
			t.Fatalf("lock %s has token %d (lease %v) above the backup's counter %d", l.Name, l.LastToken, l.Lease, h.LastToken)
		}
	}
	seen := 0
	for w := range 4 {
		for i := range 20 {
			rs := m.Resource(fmt.Sprintf("load-%d-%d", w, i))
			if rs.LastToken > h.LastToken {
				t.Fatalf("resource %s has token %d above the backup's counter %d", rs.Resource, rs.LastToken, h.LastToken)
			}
			if rs.LastToken > 0 {
				seen++
			}
		}
	}
	for i := range 12 {
		if rs := m.Resource(fmt.Sprintf("fill-%d", i)); len(rs.Value) != 1<<20 {
			t.Fatalf("fill-%d has %d bytes in the backup", i, len(rs.Value))
		}
	}
	if seen == 0 {
		t.Fatal("no resource of the load is in the backup")
	}
	t.Logf("backup: %d bytes, applied index %d, counter %d; node after: applied %d, counter %d; load resources in it: %d",
		w.buf.Len(), h.AppliedIndex, h.LastToken, st.GetAppliedIndex(), st.GetLastToken(), seen)
}

// One backup at a time: while one is held mid-stream (its reader paused)
// a second is refused with
// resource_exhausted naming the limit. The first one's client then goes
// away mid-stream: the node says so in its log, keeps serving (a grant
// goes through) and takes the next backup, which verifies.
func backupClientGone(t *testing.T, ctx context.Context, srv *fenceServer, c *client.Client) {

	w := newPausingWriter()
	w.failWith = errors.New("the reader gave up")
	done := make(chan error, 1)
	go func() {
		_, err := c.Backup(ctx, w)
		done <- err
	}()
	select {
	case <-w.paused:
	case err := <-done:
		t.Fatalf("the backup ended before its first write: %v", err)
	}
	_, err := c.Backup(ctx, io.Discard)
	var limit *fence.ResourceExhaustedError
	if !errors.As(err, &limit) || !strings.Contains(limit.Limit, "backups in progress") || limit.Bound != "at most 1" {
		t.Fatalf("a second backup while one runs: %v, want resource_exhausted on backups in progress (at most 1)", err)
	}

	close(w.release) // the first reader fails: its client ends the stream
	if err := <-done; err == nil || !strings.Contains(err.Error(), "the reader gave up") {
		t.Fatalf("the abandoned backup returned %v", err)
	}
	for !strings.Contains(srv.Log(), "backup not sent") {
		select {
		case <-ctx.Done():
			t.Fatalf("the node did not log the backup its client left:\n%s", srv.LogTail(20))
		case <-time.After(10 * time.Millisecond):
		}
	}
	tok, err := backupGrant(ctx, c, "after")
	if err != nil {
		t.Fatalf("a grant after the client left mid-stream: %v", err)
	}
	var buf bytes.Buffer
	hdr, err := c.Backup(ctx, &buf)
	if err != nil {
		t.Fatalf("the next backup: %v", err)
	}
	h, _ := loadBackup(t, buf.Bytes(), hdr)
	if h.LastToken < tok {
		t.Fatalf("backup counter %d below the grant %d made before it", h.LastToken, tok)
	}
}

// A 3-node cluster: a follower backs up what it applied (its own id and
// role in the header, the cluster's id and counter once it caught up), and
// so does the leader; both files verify and hold the same state. A client
// whose first endpoint is dead backs up from the next; a node left without
// a leader refuses (unavailable).
func TestBackupClusterFollowerAndLeader(t *testing.T) {
	t.Parallel() // own processes, ports and dirs: safe beside the other parallel tests (docs/testing.md)
	cl := harness.StartClusterT(t, clusterConfig(3))
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	leader, err := cl.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := backupClient(t, cl.URLs()...)
	var last fence.Token
	for i := range 10 {
		if last, err = backupGrant(ctx, c, fmt.Sprintf("c-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var follower *harness.Server
	for _, n := range cl.Nodes() {
		if n != leader {
			follower = n
			break
		}
	}
	ls, err := leader.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for { // the follower has applied all the leader had
		fs, err := follower.Status(ctx)
		if err == nil && fs.GetAppliedIndex() >= ls.GetAppliedIndex() {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s did not catch up with the leader: %v %v", follower.ID(), fs, err)
		case <-time.After(20 * time.Millisecond):
		}
	}

	var fbuf, lbuf bytes.Buffer
	fh, err := backupClient(t, follower.URL()).Backup(ctx, &fbuf)
	if err != nil {
		t.Fatalf("backup of follower %s: %v", follower.ID(), err)
	}
	lh, err := backupClient(t, leader.URL()).Backup(ctx, &lbuf)
	if err != nil {
		t.Fatalf("backup of leader %s: %v", leader.ID(), err)
	}
	fhdr, fm := loadBackup(t, fbuf.Bytes(), fh)
	lhdr, lm := loadBackup(t, lbuf.Bytes(), lh)
	if fhdr.NodeID != follower.ID() || fhdr.Role != "follower" {
		t.Fatalf("follower's backup header %+v: want node %s, role follower", fhdr, follower.ID())
	}
	if lhdr.NodeID != leader.ID() || lhdr.Role != "leader" {
		t.Fatalf("leader's backup header %+v: want node %s, role leader", lhdr, leader.ID())
	}
	if fhdr.LastToken != last || lhdr.LastToken != last {
		t.Fatalf("counters: follower %d, leader %d; want the last grant %d in both", fhdr.LastToken, lhdr.LastToken, last)
	}
	if fhdr.ClusterID == "" || fhdr.ClusterID != lhdr.ClusterID || fhdr.ClusterID != ls.GetClusterId() {
		t.Fatalf("cluster ids: follower's backup %q, leader's %q, leader's status %q", fhdr.ClusterID, lhdr.ClusterID, ls.GetClusterId())
	}
	for i := range 10 {
		name := fmt.Sprintf("c-%d", i)
		if f, l := fm.Resource(name), lm.Resource(name); f.LastToken == 0 || f.LastToken != l.LastToken || !bytes.Equal(f.Value, l.Value) {
			t.Fatalf("%s: follower's backup %+v, leader's %+v", name, f, l)
		}
	}

	// fence backup of the follower: the file is its backup, and the
	// summary says it holds what the follower had applied.
	file := filepath.Join(t.TempDir(), "follower.backup")
	cmd := exec.CommandContext(ctx, fenceBinary(t), "backup", file, "--server", follower.URL())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr // the summary is on stdout
	if err := cmd.Run(); err != nil {
		t.Fatalf("fence backup of %s: %v\n%s", follower.ID(), err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "note: "+follower.ID()+" was not the leader") {
		t.Fatalf("fence backup of follower %s says:\n%s\nwant a note that it was not the leader", follower.ID(), stdout.String())
	}
	if b, err := os.ReadFile(file); err != nil {
		t.Fatal(err)
	} else if h, _, err := backup.Verify(bytes.NewReader(b)); err != nil || h.NodeID != follower.ID() {
		t.Fatalf("fence backup of %s wrote a file of %s: %v", follower.ID(), h.NodeID, err)
	}

	// A client given a dead node first backs up from the next one.
	var buf bytes.Buffer
	h, err := backupClient(t, "http://"+testutil.FreeAddr(t), follower.URL()).Backup(ctx, &buf)
	if err != nil || h.GetNodeId() != follower.ID() {
		t.Fatalf("backup through a dead node, then %s: %v, %v", follower.ID(), h, err)
	}
	loadBackup(t, buf.Bytes(), h)

	// The others gone, the follower soon knows no leader: it refuses a
	// backup (unavailable: ask another node), which could miss what the
	// cluster committed without it knowing.
	for _, n := range cl.Nodes() {
		if n != follower {
			if err := n.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for {
		st, err := follower.Status(ctx)
		if err == nil && st.GetLeaderId() == "" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s still names a leader: %v %v", follower.ID(), st, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	st, err := fencev1connect.NewMaintenanceServiceClient(http.DefaultClient, follower.URL()).Backup(ctx, connect.NewRequest(&fencev1.BackupRequest{}))
	if err == nil {
		for st.Receive() {
		}
		err = st.Err()
		st.Close()
	}
	if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "knows no leader") {
		t.Fatalf("backup of %s without a leader: %v, want unavailable, knows no leader", follower.ID(), err)
	}
}
