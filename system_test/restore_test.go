//go:build e2e

package system_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/guard/postgres"
	"github.com/fenceworks/fence/testkit/harness"
)

// The restore tests run the real commands as an operator would: `fence
// backup` against a running `fence serve`, `fence restore` (a process of
// its own) into a fresh data dir, and `fence serve` on that dir. What they
// show (issue 10, docs/design.md §3 "Restore never rolls back"):
//
//   - the first token after a restore is above every token issued before
//     it, exactly 1 + the largest floor (the backup's counter, --floor,
//     --floor-from a guard store, the wall clock);
//   - what the backup held comes back: resources, held locks (their
//     remaining TTL continues in server time), sessions, and remembered
//     request and op ids (a retry is answered with the saved result);
//   - a corrupt or truncated file, a data dir that is not empty and a clock
//     behind the backup are refused with the dir untouched;
//   - a cluster is re-formed from one restored node.
//
// The wall-clock floor (unix_ms × 1024, about 1.8e15 today) is above any
// token a fresh test server issues, so it alone would make "first token >
// T" true. The --floor and --floor-from tests therefore first lift the
// server's counter far above the wall clock (highCounterServer) so that
// only the floor under test can explain the first token, and the
// wall-clock test starts from a fresh server so that only the wall floor
// can.

// restoreHTTP is the client of the tests' API calls.
var restoreHTTP = &http.Client{Timeout: hangGuard}

// fullAPI is every client-port service a restore test uses.
type fullAPI struct {
	api
	Sessions fencev1connect.SessionServiceClient
}

func restoreAPI(url string) fullAPI {
	return fullAPI{
		api: api{
			Locks:     fencev1connect.NewLockServiceClient(restoreHTTP, url),
			Resources: fencev1connect.NewResourceServiceClient(restoreHTTP, url),
		},
		Sessions: fencev1connect.NewSessionServiceClient(restoreHTTP, url),
	}
}

// runFence runs the fence binary to completion with env added.
func runFence(t testing.TB, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, fenceBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("fence %q: %v", args, err)
	}
	checkRaces(t, "fence "+args[0], out.String()+errOut.String())
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// backupTo runs `fence backup FILE` against the server at url.
func backupTo(t testing.TB, url, file string) {
	t.Helper()
	out, errs, code := runFence(t, []string{"FENCE_SERVER=" + url}, "backup", file)
	if code != 0 {
		t.Fatalf("fence backup %s: exit %d\nstdout: %s\nstderr: %s", file, code, out, errs)
	}
}

// restoreReport is fence restore --json.
type restoreReport struct {
	OldCounter uint64 `json:"oldCounter"`
	FirstToken uint64 `json:"firstToken"`
	Chosen     string `json:"chosen"`
	// ClusterID is the restored cluster's id, RestoredFrom the backed-up one's.
	ClusterID    string `json:"clusterId"`
	RestoredFrom string `json:"restoredFrom"`
	Floors       []struct {
		Source string `json:"source"`
		Token  uint64 `json:"token"`
	} `json:"floors"`
	Warnings []string `json:"warnings"`
	Header   struct {
		LastToken    uint64 `json:"lastToken"`
		AppliedIndex uint64 `json:"appliedIndex"`
		ClusterID    string `json:"clusterId"`
	} `json:"header"`
	stderr string
}

// floor returns the token of the floor whose source starts with prefix.
func (r restoreReport) floor(t testing.TB, prefix string) uint64 {
	t.Helper()
	for _, f := range r.Floors {
		if strings.HasPrefix(f.Source, prefix) {
			return f.Token
		}
	}
	t.Fatalf("no floor %q in the report: %+v", prefix, r.Floors)
	return 0
}

// restoreOK runs `fence restore FILE --data-dir DIR --json args...` and
// returns its report; it must succeed.
func restoreOK(t testing.TB, env []string, file, dir string, args ...string) restoreReport {
	t.Helper()
	out, errs, code := runFence(t, env, append([]string{"restore", file, "--data-dir", dir, "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("fence restore %s --data-dir %s %q: exit %d\nstdout: %s\nstderr: %s", file, dir, args, code, out, errs)
	}
	var r restoreReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("fence restore --json: %v: %q", err, out)
	}
	r.stderr = errs
	// The report's own arithmetic: the first token is 1 + the largest floor,
	// and the backup's counter is one of the floors.
	top := uint64(0)
	for _, f := range r.Floors {
		top = max(top, f.Token)
	}
	if r.FirstToken != top+1 || r.floor(t, "backup") != r.OldCounter || r.OldCounter != r.Header.LastToken {
		t.Fatalf("restore report: first token %d, floors %+v, old counter %d, header last token %d: want first = 1 + the largest floor, the backup's floor = the old counter",
			r.FirstToken, r.Floors, r.OldCounter, r.Header.LastToken)
	}
	return r
}

// restoreRefused runs fence restore expecting a refusal (exit 4) whose
// message contains want.
func restoreRefused(t testing.TB, env []string, want string, args ...string) {
	t.Helper()
	out, errs, code := runFence(t, env, append([]string{"restore"}, args...)...)
	if code != 4 || !strings.Contains(errs, want) {
		t.Fatalf("fence restore %q: exit %d, stderr %q, stdout %q; want exit 4 and %q", args, code, errs, out, want)
	}
}

// grantLock acquires name (ttl long enough for the test) and returns the token.
func grantLock(t testing.TB, a fullAPI, name string) uint64 {
	t.Helper()
	l, err := a.acquire(context.Background(), name, "restore-test", 10*time.Minute, 0)
	if err != nil {
		t.Fatalf("acquire %s: %v", name, err)
	}
	return l.GetToken()
}

// grantMore grants and releases n locks and returns the largest token.
func grantMore(t testing.TB, a fullAPI, tag string, n int) uint64 {
	t.Helper()
	var last uint64
	for i := range n {
		name := fmt.Sprintf("more/%s/%d", tag, i)
		tok := grantLock(t, a, name)
		if tok <= last {
			t.Fatalf("token %d after %d", tok, last)
		}
		last = tok
		if err := a.release(context.Background(), name, tok); err != nil {
			t.Fatal(err)
		}
	}
	return last
}

// backedUp is what a test puts in a server before it backs it up: a
// session and a lock held on it, a lock held without one (acquired with a
// request_id), a resource written with an op_id and a counter added to
// with one. check finds all of it on a restored server.
type backedUp struct {
	session                uint64
	sessionReq             string
	sessionLock, plainLock string
	sessionTok, plainTok   uint64
	acquireReq             string
	resource, writeOp      string
	value                  string
	counter, addOp         string
	lastToken              uint64 // the counter when it was put in
	resourceVersion        uint64
	sessionTTL, leaseTTL   time.Duration
	// left is each held lock's remaining TTL as read at heldAt, before the
	// backup; the caller sets backedUpAt once the backup has returned.
	left               map[string]time.Duration
	heldAt, backedUpAt time.Time
}

func putState(t testing.TB, a fullAPI, tag string) backedUp {
	t.Helper()
	ctx := context.Background()
	b := backedUp{
		sessionReq: "open-" + tag, sessionLock: "held/session-" + tag, plainLock: "held/plain-" + tag,
		acquireReq: "acquire-" + tag, resource: "res/" + tag, writeOp: "write-" + tag,
		counter: "count/" + tag, addOp: "add-" + tag, value: "v-" + tag,
		sessionTTL: 10 * time.Minute, leaseTTL: 10 * time.Minute,
	}
	open, err := a.Sessions.Open(ctx, connect.NewRequest(&fencev1.OpenSessionRequest{
		Ttl: durationpb.New(b.sessionTTL), RequestId: b.sessionReq}))
	if err != nil {
		t.Fatal(err)
	}
	b.session = open.Msg.GetSession().GetId()
	acq, err := a.Locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: b.sessionLock, Owner: "s",
		Session: &fencev1.SessionRef{Id: b.session}})) // a session's lease lives as long as the session (no ttl)
	if err != nil {
		t.Fatal(err)
	}
	b.sessionTok = acq.Msg.GetLease().GetToken()
	acq, err = a.Locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: b.plainLock, Owner: "p",
		Ttl: durationpb.New(b.leaseTTL), RequestId: b.acquireReq}))
	if err != nil {
		t.Fatal(err)
	}
	b.plainTok = acq.Msg.GetLease().GetToken()
	w, err := a.Resources.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: b.resource, Token: b.plainTok,
		Value: []byte(b.value), OpId: b.writeOp}))
	if err != nil {
		t.Fatal(err)
	}
	b.resourceVersion = w.Msg.GetState().GetVersion()
	if _, err := a.Resources.Add(ctx, connect.NewRequest(&fencev1.AddRequest{Resource: b.counter, Token: b.plainTok,
		Delta: 5, OpId: b.addOp})); err != nil {
		t.Fatal(err)
	}
	b.lastToken = max(b.sessionTok, b.plainTok)
	b.left, b.heldAt = map[string]time.Duration{}, time.Now()
	for _, name := range []string{b.sessionLock, b.plainLock} {
		info, err := a.get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		b.left[name] = info.GetLease().GetRemaining().AsDuration()
	}
	return b
}

// check finds everything putState put in on the restored server a, whose
// process was started after startedAt.
func (b backedUp) check(t testing.TB, a fullAPI, startedAt time.Time) {
	t.Helper()
	ctx := context.Background()
	if b.backedUpAt.IsZero() {
		t.Fatal("backedUp.backedUpAt not set")
	}
	// Locks held at backup time are still held, with their tokens, and
	// keep their remaining TTL in server time: the time between the backup
	// and the restored start (the outage) does not count. Server time runs
	// no faster than this test's clock, so a lease that had L left at
	// heldAt has at least L - (backedUpAt - heldAt) - (now - startedAt)
	// left now, however long the outage was. (A bound, not a timing
	// assertion: it holds for any scheduling.)
	for name, tok := range map[string]uint64{b.sessionLock: b.sessionTok, b.plainLock: b.plainTok} {
		info, err := a.get(ctx, name)
		now := time.Now()
		if err != nil {
			t.Fatalf("get %s: %v", name, err)
		}
		l := info.GetLease()
		left := l.GetRemaining().AsDuration()
		atLeast := b.left[name] - b.backedUpAt.Sub(b.heldAt) - now.Sub(startedAt)
		if l.GetToken() != tok || left <= 0 || left > b.leaseTTL || left < atLeast {
			t.Errorf("restored lock %s: lease %v; want token %d held with %v <= remaining <= %v (the outage must not count)",
				name, l, tok, atLeast, b.leaseTTL)
		}
	}
	// The session is alive, and its open's request_id is remembered.
	ka, err := a.Sessions.KeepAlive(ctx, connect.NewRequest(&fencev1.KeepAliveRequest{Session: b.session}))
	if err != nil {
		t.Errorf("keepalive of restored session %d: %v", b.session, err)
	} else if ka.Msg.GetSession().GetId() != b.session {
		t.Errorf("keepalive of session %d answered for %v", b.session, ka.Msg.GetSession())
	}
	open, err := a.Sessions.Open(ctx, connect.NewRequest(&fencev1.OpenSessionRequest{
		Ttl: durationpb.New(b.sessionTTL), RequestId: b.sessionReq}))
	if err != nil || !open.Msg.GetReplayed() || open.Msg.GetSession().GetId() != b.session {
		t.Errorf("open retried with request_id %s: %v, %v; want the saved session %d (replayed)", b.sessionReq, open, err, b.session)
	}
	// The acquire's request_id is remembered: its retry gets the saved grant.
	acq, err := a.Locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: b.plainLock, Owner: "p",
		Ttl: durationpb.New(b.leaseTTL), RequestId: b.acquireReq}))
	if err != nil || !acq.Msg.GetReplayed() || acq.Msg.GetLease().GetToken() != b.plainTok {
		t.Errorf("acquire retried with request_id %s: %v, %v; want the saved grant, token %d (replayed)", b.acquireReq, acq, err, b.plainTok)
	}
	// The resources are back, and their op_ids remembered.
	st, err := a.read(ctx, b.resource)
	if err != nil || string(st.GetValue()) != b.value || st.GetLastToken() != b.plainTok || st.GetVersion() != b.resourceVersion {
		t.Errorf("restored %s: %v, %v; want value %q, last token %d, version %d", b.resource, st, err, b.value, b.plainTok, b.resourceVersion)
	}
	w, err := a.Resources.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: b.resource, Token: b.plainTok,
		Value: []byte(b.value), OpId: b.writeOp}))
	if err != nil || !w.Msg.GetReplayed() || w.Msg.GetState().GetVersion() != b.resourceVersion {
		t.Errorf("write retried with op_id %s: %v, %v; want the saved result, version %d (replayed)", b.writeOp, w, err, b.resourceVersion)
	}
	add, err := a.Resources.Add(ctx, connect.NewRequest(&fencev1.AddRequest{Resource: b.counter, Token: b.plainTok,
		Delta: 5, OpId: b.addOp}))
	if err != nil || !add.Msg.GetReplayed() || add.Msg.GetValue() != 5 {
		t.Errorf("add retried with op_id %s: %v, %v; want the saved result 5 (replayed, applied once)", b.addOp, add, err)
	}
}

// highCounterServer starts a server whose counter is far above the
// wall-clock floor (about 11 days of it), as after an earlier restore with
// a large --floor, so that a later restore's first token can only come
// from the floor under test. It returns the server and that counter.
func highCounterServer(t *testing.T) (*fenceServer, uint64) {
	t.Helper()
	dir := t.TempDir()
	srv := startServerIn(t, filepath.Join(dir, "seed"))
	empty := filepath.Join(dir, "empty.fence")
	backupTo(t, srv.URL(), empty)
	srv.Stop()
	high := uint64(time.Now().UnixMilli())*1024 + 1e12
	r := restoreOK(t, nil, empty, filepath.Join(dir, "high"), "--floor", itoa(high))
	if r.FirstToken != high+1 {
		t.Fatalf("restore with --floor %d: first token %d", high, r.FirstToken)
	}
	return startServerIn(t, filepath.Join(dir, "high")), high
}

// restoreScenario is the issue's: put state in, back up, grant more (the
// largest token T), restore the old backup into a fresh dir with args,
// start a server on it: the first new token is want(T, report) and above
// T, and the state is back. It returns the report.
func restoreScenario(t *testing.T, srv *fenceServer, env []string, args func(T uint64) []string) (restoreReport, uint64) {
	t.Helper()
	dir := t.TempDir()
	a := restoreAPI(srv.URL())
	b := putState(t, a, "x")
	file := filepath.Join(dir, "old.fence")
	backupTo(t, srv.URL(), file)
	b.backedUpAt = time.Now()
	T := grantMore(t, a, "after-backup", 5)
	if T <= b.lastToken {
		t.Fatalf("T %d not above the backup's %d", T, b.lastToken)
	}
	// A session opened after the backup: its id must not be issued again
	// after the restore (a client still holding it would act on another
	// client's session).
	later, err := a.Sessions.Open(context.Background(), connect.NewRequest(&fencev1.OpenSessionRequest{Ttl: durationpb.New(time.Minute)}))
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop() // the server is lost; its tokens up to T were handed out

	r := restoreOK(t, env, file, filepath.Join(dir, "restored"), args(T)...)
	if r.OldCounter != b.lastToken {
		t.Errorf("report: old counter %d, want the backup's %d", r.OldCounter, b.lastToken)
	}
	startedAt := time.Now()
	restored := startServerIn(t, filepath.Join(dir, "restored"))
	ra := restoreAPI(restored.URL())
	first := grantLock(t, ra, "after-restore")
	if first <= T {
		t.Fatalf("first token after the restore %d is not above %d, the largest issued before it (report: %+v)", first, T, r)
	}
	if first != r.FirstToken {
		t.Errorf("first token %d, the report said %d", first, r.FirstToken)
	}
	b.check(t, ra, startedAt)
	if next := grantLock(t, ra, "after-restore-2"); next <= first {
		t.Errorf("token %d after %d", next, first)
	}
	s, err := ra.Sessions.Open(context.Background(), connect.NewRequest(&fencev1.OpenSessionRequest{Ttl: durationpb.New(time.Minute)}))
	if err != nil {
		t.Fatal(err)
	}
	if id := s.Msg.GetSession().GetId(); id <= later.Msg.GetSession().GetId() {
		t.Errorf("a session opened after the restore got id %d; %d was opened before it (after the backup)", id, later.Msg.GetSession().GetId())
	}
	return r, T
}

// --floor T: the first token is T+1, the operator's floor (the server's
// counter is above the wall clock, so nothing else can explain it).
func TestRestoreFloorFlag(t *testing.T) {
	srv, high := highCounterServer(t)
	r, T := restoreScenario(t, srv, nil, func(T uint64) []string { return []string{"--floor", itoa(T)} })
	if r.FirstToken != T+1 || r.Chosen != "--floor" || T <= high {
		t.Errorf("report: first token %d chosen %q; want T+1 = %d from --floor", r.FirstToken, r.Chosen, T+1)
	}
	// The backup's counter is above this clock's wall floor: the restore
	// says the wall clock vouched for nothing.
	if !strings.Contains(r.stderr, "warning:") || len(r.Warnings) == 0 {
		t.Errorf("no warning that the wall-clock floor is below the backup's counter: stderr %q", r.stderr)
	}
}

// --floor-from a PostgreSQL guard store that accepted T: the first token
// is T+1, read from the store.
func TestRestoreFloorFromPostgres(t *testing.T) {
	dsn := postgresDSN(t)
	conn := pgConn(t, dsn)
	names := tableNames(t, conn, "restore_guard", "restore_ops")
	g, err := postgres.New(postgres.Options{Table: names[0], OpsTable: names[1]})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := g.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	srv, _ := highCounterServer(t)
	// An empty guard table is refused before anything is written.
	dir := t.TempDir()
	backupTo(t, srv.URL(), filepath.Join(dir, "probe.fence"))
	out, errs, code := runFence(t, nil, "restore", filepath.Join(dir, "probe.fence"), "--data-dir", filepath.Join(dir, "none"),
		"--floor-from", dsnWithTable(dsn, names[0]))
	if code != 1 || !strings.Contains(errs, "no tokens found in table") || !strings.Contains(errs, "wrong table or prefix?") {
		t.Errorf("restore --floor-from an empty guard table: exit %d, stderr %q, stdout %q; want exit 1, 'no tokens found'", code, errs, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused restore created the data dir: %v", err)
	}

	// The restore runs an hour later (its clock an hour ahead, as after a
	// long outage): held leases still keep their remaining TTL.
	r, T := restoreScenario(t, srv, []string{"FENCE_TEST_CLOCK_OFFSET=+1h"}, func(T uint64) []string {
		// A worker fenced a write with T in the guard table: the store
		// accepted T. Lower tokens in other rows do not matter.
		for res, tok := range map[string]uint64{"stock/a": T, "stock/b": T - 2} {
			if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return g.Check(ctx, tx, res, fence.Token(tok)) }); err != nil {
				t.Fatal(err)
			}
		}
		return []string{"--floor-from", dsnWithTable(dsn, names[0])}
	})
	if r.FirstToken != T+1 || !strings.HasPrefix(r.Chosen, "postgres") || r.floor(t, "postgres") != T {
		t.Errorf("report: first token %d chosen %q floors %+v; want T+1 = %d from the guard store", r.FirstToken, r.Chosen, r.Floors, T+1)
	}
}

// dsnWithTable adds ?table=T to a PostgreSQL URL.
func dsnWithTable(dsn, table string) string {
	if strings.Contains(dsn, "?") {
		return dsn + "&table=" + table
	}
	return dsn + "?table=" + table
}

// No floor at all: the wall-clock floor alone puts the first token above
// every token issued before (a fresh server's tokens are far below it).
func TestRestoreWallClockFloor(t *testing.T) {
	srv := startServer(t)
	before := uint64(time.Now().UnixMilli()) * 1024
	r, T := restoreScenario(t, srv, nil, func(uint64) []string { return nil })
	after := uint64(time.Now().UnixMilli()) * 1024
	w := r.floor(t, "wall-clock")
	if r.Chosen != "wall-clock" || r.FirstToken != w+1 || w < before || w > after || T >= before {
		t.Errorf("report: first token %d chosen %q wall floor %d (between %d and %d?); want the wall floor + 1", r.FirstToken, r.Chosen, w, before, after)
	}
}

// Two restores in a row from the same old backup, each followed by
// grants: tokens still increase — the second restore's first token is
// above every token the first restored server issued.
func TestRestoreTwiceFromTheSameBackup(t *testing.T) {
	dir := t.TempDir()
	srv := startServerIn(t, filepath.Join(dir, "orig"))
	a := restoreAPI(srv.URL())
	b := putState(t, a, "twice")
	file := filepath.Join(dir, "old.fence")
	backupTo(t, srv.URL(), file)
	b.backedUpAt = time.Now()
	last := grantMore(t, a, "orig", 3)
	srv.Stop()
	for i := 1; i <= 2; i++ {
		d := filepath.Join(dir, "restored-"+strconv.Itoa(i))
		var args []string
		if i == 2 {
			args = []string{"--log-store", "wal"}
		}
		r := restoreOK(t, nil, file, d, args...)
		if _, err := os.Stat(filepath.Join(d, "wal")); err != nil {
			t.Errorf("restore %d %q: no wal dir: %v", i, args, err)
		}
		startedAt := time.Now()
		s := startServerIn(t, d)
		ra := restoreAPI(s.URL())
		b.check(t, ra, startedAt)
		first := grantLock(t, ra, "first")
		if first <= last || first != r.FirstToken {
			t.Fatalf("restore %d: first token %d (report %d), the largest before it %d", i, first, r.FirstToken, last)
		}
		last = grantMore(t, ra, "restored-"+strconv.Itoa(i), 3)
		s.Stop()
	}
}

// dirState is a dir's names, sizes and contents' hash, for "untouched".
func dirState(t testing.TB, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			fmt.Fprintf(&b, "%s/\n", p)
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %x\n", p, sha256.Sum256(data))
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return "(does not exist)"
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A corrupt backup (one flipped byte, in the state or the header) and a
// truncated one are refused with a clear message, and the target dir —
// absent, or present and empty — is left as it was. A data dir that is not
// empty is refused and left as it was. A clock behind the backup's time is
// refused without --floor.
func TestRestoreRefusals(t *testing.T) {
	dir := t.TempDir()
	srv := startServerIn(t, filepath.Join(dir, "orig"))
	a := restoreAPI(srv.URL())
	b := putState(t, a, "refusals")
	// A value only the checksum protects: a flipped bit in it still
	// decodes (as other bytes of the value).
	blob := strings.Repeat("A", 300)
	if _, err := a.write(context.Background(), "res/blob", b.plainTok, blob); err != nil {
		t.Fatal(err)
	}
	grantMore(t, a, "x", 50)
	good := filepath.Join(dir, "good.fence")
	backupTo(t, srv.URL(), good)
	srv.Stop()
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flip := func(i int) []byte {
		b := bytes.Clone(data)
		b[i] ^= 0x01
		return b
	}
	headerByte := bytes.IndexByte(data, '{') + 2     // inside the header's JSON
	valueByte := bytes.Index(data, []byte(blob)) + 8 // the snapshot records hold values as they are
	if valueByte < 8 {
		t.Fatalf("res/blob's value is not in the backup file")
	}
	bad := map[string]struct {
		file string
		want string
	}{
		"flipped byte in the state":  {write("flip-state.fence", flip(len(data)/2)), "corrupt"},
		"flipped byte in the header": {write("flip-header.fence", flip(headerByte)), "corrupt"},
		"flipped byte in a value":    {write("flip-value.fence", flip(valueByte)), "checksum mismatch"},
		"truncated in the middle":    {write("half.fence", data[:len(data)/2]), "truncated"},
		"truncated before the end":   {write("short.fence", data[:len(data)-1]), "backup file is"},
	}
	emptyDir := filepath.Join(dir, "empty")
	if err := os.Mkdir(emptyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for what, c := range bad {
		for _, target := range []string{filepath.Join(dir, "absent"), emptyDir} {
			before := dirState(t, target)
			restoreRefused(t, nil, c.want, c.file, "--data-dir", target)
			if after := dirState(t, target); after != before {
				t.Errorf("%s: the refused restore changed %s:\nbefore: %s\nafter: %s", what, target, before, after)
			}
		}
		// --json names the kind and the byte offset.
		out, _, code := runFence(t, nil, "restore", c.file, "--data-dir", emptyDir, "--json")
		var e struct {
			Error struct {
				Kind   string `json:"kind"`
				Offset *int64 `json:"offset"`
			} `json:"error"`
		}
		if code != 4 || json.Unmarshal([]byte(out), &e) != nil || (e.Error.Kind != "corrupt" && e.Error.Kind != "truncated") || e.Error.Offset == nil {
			t.Errorf("%s: restore --json: exit %d, %q; want exit 4 and an error with kind and offset", what, code, out)
		}
	}

	// A data dir that is not empty: refused, untouched (here: a served
	// one, the server's own).
	served := filepath.Join(dir, "orig")
	before := dirState(t, served)
	restoreRefused(t, nil, "not empty", good, "--data-dir", served)
	if after := dirState(t, served); after != before {
		t.Errorf("the refused restore changed the served data dir")
	}

	// A clock behind the backup's recorded time: refused without --floor.
	behind := []string{"FENCE_TEST_CLOCK_OFFSET=-1h"}
	target := filepath.Join(dir, "behind")
	restoreRefused(t, behind, "clock is behind", good, "--data-dir", target)
	if s := dirState(t, target); s != "(does not exist)" {
		t.Errorf("the refused restore made %s: %s", target, s)
	}
	// With --floor the operator vouches: it goes on, with a warning.
	r := restoreOK(t, behind, good, target, "--floor", "1000000")
	if r.FirstToken <= 1000000 || r.stderr == "" {
		t.Errorf("restore with the clock behind and --floor: first token %d, stderr %q", r.FirstToken, r.stderr)
	}

	// The human report names the old counter, each floor and the first token.
	out, errs, code := runFence(t, nil, "restore", good, "--data-dir", filepath.Join(dir, "human"), "--floor", "77")
	for _, want := range []string{"old counter:", "backup", "--floor", "77", "wall-clock", "first token:", "fence serve --data-dir"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("restore report (exit %d) lacks %q:\n%s\nstderr: %s", code, want, out, errs)
		}
	}
}

// A cluster re-formed from a restore: restore into the first node's new
// data dir with --node-id and --raft-addr, start it, then two nodes with
// empty data dirs join it. Every node gets the restored state; the first
// token is above everything issued before; and the restored state survives
// the restored node's loss (it was replicated, not only local).
func TestRestoreClusterReformed(t *testing.T) {
	dir := t.TempDir()
	bin := fenceBinary(t)
	orig := startServerIn(t, filepath.Join(dir, "orig"))
	a := restoreAPI(orig.URL())
	b := putState(t, a, "cluster")
	file := filepath.Join(dir, "old.fence")
	backupTo(t, orig.URL(), file)
	b.backedUpAt = time.Now()
	T := grantMore(t, a, "after", 3)
	orig.Stop()

	raftAddr, err := harness.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	r := restoreOK(t, nil, file, filepath.Join(dir, "n1"), "--node-id", "fence-1", "--raft-addr", raftAddr)
	args := []string{"--ready-timeout", "60s"}
	startedAt := time.Now()
	n1 := harness.StartT(t, harness.Config{Bin: bin, ID: "fence-1", DataDir: filepath.Join(dir, "n1"), RaftAddr: raftAddr,
		Args: args, ReadyTimeout: hangGuard, StopTimeout: hangGuard})
	nodes := []*harness.Server{n1}
	for _, id := range []string{"fence-2", "fence-3"} {
		n := harness.StartT(t, harness.Config{Bin: bin, ID: id, DataDir: filepath.Join(dir, id), RaftAddr: "auto",
			Args: append([]string{"--join", n1.URL()}, args...), ReadyTimeout: hangGuard, StopTimeout: hangGuard})
		nodes = append(nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	m, err := n1.MembersOf(ctx)
	if err != nil || len(m.GetMembers()) != 3 {
		t.Fatalf("members after the joins: %v, %v", m, err)
	}

	f := newFailover([]string{n1.URL(), nodes[1].URL(), nodes[2].URL()})
	first, err := f.acquire(ctx, "after-restore", "o", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if first.GetToken() <= T || first.GetToken() != r.FirstToken {
		t.Fatalf("first token in the re-formed cluster %d (report %d), the largest before %d", first.GetToken(), r.FirstToken, T)
	}
	// Every node has applied the restored state and the new grant.
	waitSame(t, nodes, first.GetToken())

	// The restored node is lost: the others elect a leader and still hold
	// the restored state.
	if err := n1.Kill(); err != nil {
		t.Fatal(err)
	}
	rest := nodes[1:]
	var l *harness.Server
	for l == nil {
		if l, _ = harness.LeaderOf(ctx, append(rest, n1)); l == nil || l == n1 {
			l = nil
			select {
			case <-ctx.Done():
				t.Fatal("no leader among fence-2 and fence-3 after fence-1 was killed")
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	b.check(t, restoreAPI(l.URL()), startedAt)
	next := grantLock(t, restoreAPI(l.URL()), "after-loss")
	if next <= first.GetToken() {
		t.Errorf("token %d after %d", next, first.GetToken())
	}
}

// waitSame waits until every node reports last token want (each applied
// the grant): a follower that did not get the restored snapshot has no
// such counter.
func waitSame(t testing.TB, nodes []*harness.Server, want uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for {
		var seen []string
		same := true
		for _, n := range nodes {
			st, err := n.Status(ctx)
			if err != nil {
				same = false
				seen = append(seen, fmt.Sprintf("%s: %v", n.ID(), err))
				continue
			}
			seen = append(seen, fmt.Sprintf("%s: last token %d applied %d", n.ID(), st.GetLastToken(), st.GetAppliedIndex()))
			same = same && st.GetLastToken() == want
		}
		if same {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the nodes did not all apply last token %d: %s", want, strings.Join(seen, "; "))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
