//go:build e2e

package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/sqlite"
)

// renewsReceived reads fence_stream_requests_total{op="renew"} from the
// server's /metrics: the lease renewals it has received on session streams.
func renewsReceived(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `fence_stream_requests_total{op="renew"} `); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %q: %v", sc.Text(), err)
			}
			return int(n)
		}
	}
	io.Copy(io.Discard, resp.Body)
	return 0
}

// F1/F2 and F5 end to end: a worker started with `fence run` gets
// FENCE_SIGNED_TOKEN once and cannot learn another. After a rotation its
// lease is renewed (fence run renews it every TTL/3) and the old key is
// retired: the lease keeps the key it was granted under, so the retire
// waits for it and a guard given the refreshed key set still accepts the
// worker's proof. `fence keys retire OLD --now` (the key leaked) drops the
// key at once: a guard given the refreshed key set refuses the worker's
// proof FORGED_TOKEN and its stored token is unchanged.
func TestProcessRunProofSurvivesRenewAcrossRotation(t *testing.T) {
	srv := startServe(t)
	keySet := func() *fence.KeySet {
		t.Helper()
		r := fenceRun(t, srv.url, "keys", "--json").want(t, 0, "keys --json")
		ks, err := fence.ParseKeySet([]byte(r.stdout))
		if err != nil {
			t.Fatalf("keys --json: %v: %s", err, r.stdout)
		}
		return ks
	}
	var guardKeys atomic.Pointer[fence.KeySet] // what the guard's operator gave it
	guardKeys.Store(keySet())
	old := guardKeys.Load().Keys[0].ID

	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "app.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	g, err := sqlite.New(sqlite.Options{KeySource: guardKeys.Load})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	// write is one guarded write of the worker's token to resource job.
	write := func(st fence.SignedToken) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := g.CheckSigned(ctx, tx, "job", st); err != nil {
			return err
		}
		return tx.Commit()
	}

	cmd, exited, stdout, stderr := startRun(t, srv.url, "run", "job", "--ttl", "3s", "--", "sh", "-c", `echo "signed=$FENCE_SIGNED_TOKEN"; `+trapChild)
	line, _, _ := strings.Cut(stdout.String(), "\n")
	text, ok := strings.CutPrefix(line, "signed=")
	st, err := fence.ParseSignedToken(text)
	if !ok || err != nil || st.KeyID != old {
		t.Fatalf("the child's FENCE_SIGNED_TOKEN line %q: %v (want a proof by %s)", line, err, old)
	}
	if err := write(st); err != nil {
		t.Fatalf("the worker's first write: %v", err)
	}

	rot := fenceRun(t, srv.url, "keys", "rotate", "--json").want(t, 0, "keys rotate")
	var rj struct{ KeyID string }
	if err := json.Unmarshal([]byte(rot.stdout), &rj); err != nil || rj.KeyID == "" {
		t.Fatalf("keys rotate --json %q: %v", rot.stdout, err)
	}
	// Wait for fence run to renew the lease after the rotation: two renews
	// received after it returned (the first was applied after the
	// rotation; the second is sent after the first's answer).
	base := renewsReceived(t, srv.url)
	giveUp := time.After(procLimit)
	for renewsReceived(t, srv.url) < base+2 {
		select {
		case <-exited:
			t.Fatalf("fence run exited: %s", stderr.String())
		case <-giveUp:
			t.Fatalf("no lease renewal within %s", procLimit)
		case <-time.After(20 * time.Millisecond):
		}
	}
	fenceRun(t, srv.url, "keys", "retire", old).want(t, 0, "retire the old key")
	table := fenceRun(t, srv.url, "keys").want(t, 0, "keys")
	if !strings.Contains(table.stdout, old+"  retiring  1") {
		t.Fatalf("keys after a renew across the rotation and a retire:\n%s\nwant %s retiring with the run's lease", table.stdout, old)
	}
	guardKeys.Store(keySet())
	if err := write(st); err != nil {
		t.Fatalf("the worker's proof after its lease renewed across a rotation, at a guard with the refreshed key set: %v", err)
	}

	// The old key leaked: drop it now. The worker's proof is refused by a
	// guard that reloads the key set, and its stored token stays.
	before, err := g.MaxToken(ctx, db)
	if err != nil || before != st.Token {
		t.Fatalf("stored token %d, %v; want %d", before, err, st.Token)
	}
	now := fenceRun(t, srv.url, "keys", "retire", old, "--now", "--json").want(t, 0, "retire --now")
	var nj struct {
		Retired     string
		Now         bool
		LeasesMoved uint64
	}
	if err := json.Unmarshal([]byte(now.stdout), &nj); err != nil || nj.Retired != old || !nj.Now || nj.LeasesMoved != 1 {
		t.Fatalf("keys retire --now --json %q: %v; want %s dropped with the run's lease moved", now.stdout, err, old)
	}
	ks := keySet()
	if len(ks.Keys) != 1 || ks.Keys[0].ID != rj.KeyID {
		t.Fatalf("key set after retire --now: %+v, want only %s", ks.Keys, rj.KeyID)
	}
	guardKeys.Store(ks)
	if err := write(st); !errors.Is(err, fence.ErrForgedToken) {
		t.Fatalf("the dropped key's proof at a guard with the refreshed key set: %v, want FORGED_TOKEN", err)
	}
	if after, err := g.MaxToken(ctx, db); err != nil || after != before {
		t.Fatalf("stored token after the refusal: %d, %v; want %d unchanged", after, err, before)
	}
	// The lease lives on, signed by the new key: the run is not disturbed.
	cmd.Process.Signal(syscall.SIGTERM)
	waitExited(t, exited, "fence run")
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("fence run exited %d after SIGTERM: %s", code, stderr.String())
	}
}
