package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/httpguard"
	"github.com/fenceworks/fence/guard/httpguard/pgstore"
	"github.com/fenceworks/fence/guard/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

type lease fence.Token

func (l lease) Token() fence.Token { return fence.Token(l) }

// Under REPEATABLE READ, request 2 waits on the guard row that request 1
// holds; when request 1 commits, PostgreSQL aborts request 2's check with a
// serialization failure (SQLSTATE 40001). Nothing was applied, so the client
// gets 503 with Retry-After — a retry succeeds — not a 500.
func TestSerializationFailureGets503(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	p := "hgr_" + hex.EncodeToString(b)
	guard, err := postgres.New(postgres.Options{Table: p + "_guard", OpsTable: p + "_ops"})
	if err != nil {
		t.Fatal(err)
	}
	if err := guard.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(ctx, fmt.Sprintf(`DROP TABLE IF EXISTS %s_guard, %s_ops`, p, p)); err != nil {
			t.Errorf("dropping test tables: %v", err)
		}
	})
	entered, release := make(chan struct{}, 1), make(chan struct{})
	store := &pgstore.Store{DB: pool, Guard: guard, TxOptions: pgx.TxOptions{IsoLevel: pgx.RepeatableRead}}
	srv := httptest.NewServer(httpguard.Middleware(store, httpguard.Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			entered <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	})))
	t.Cleanup(srv.Close)
	send := func(tok fence.Token, hold bool) (*http.Response, error) {
		c := &http.Client{Transport: &httpguard.Transport{Lease: lease(tok), Resource: "hot"}}
		req, _ := http.NewRequest(http.MethodPut, srv.URL, nil)
		if hold {
			req.Header.Set("X-Hold", "1")
		}
		resp, err := c.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	// The guard row must exist for request 2 to wait on it.
	if resp, err := send(1, false); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("first write: %v %v", resp, err)
	}
	first := make(chan error, 1)
	go func() {
		resp, err := send(2, true)
		if err == nil && resp.StatusCode != http.StatusNoContent {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		first <- err
	}()
	<-entered // request 1 holds the guard row
	second := make(chan *http.Response, 1)
	go func() {
		resp, err := send(3, false)
		if err != nil {
			t.Error(err)
		}
		second <- resp
	}()
	waitForLockWait(t, pool, p+"_guard")
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("request 1: %v", err)
	}
	resp := <-second
	if resp == nil {
		t.FailNow()
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("request 2 after a serialization failure: %d Retry-After %q; want 503 with Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	var last int64
	if err := pool.QueryRow(ctx, `SELECT last_token FROM `+p+`_guard WHERE resource = 'hot'`).Scan(&last); err != nil || last != 2 {
		t.Fatalf("last token %d, %v; want 2 (request 2 applied nothing)", last, err)
	}
	if resp, err := send(3, false); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("the retry: %v %v; want it accepted", resp, err)
	}
}

// waitForLockWait returns once a backend is waiting on a lock while running
// the guard's check on table (request 2 blocked behind request 1).
func waitForLockWait(t *testing.T, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, table string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`, `INSERT INTO "`+table+`"%`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("request 2 never waited on the guard row")
		}
		time.Sleep(5 * time.Millisecond) // polling the database: there is no other signal
	}
}

func TestRetryableClassifies(t *testing.T) {
	for code, want := range map[string]bool{"40001": true, "40P01": true, "23505": false, "57014": false} {
		err := fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: code})
		var retry *httpguard.RetryableError
		if got := errors.As(pgstore.Retryable(err), &retry); got != want {
			t.Errorf("SQLSTATE %s retryable = %v, want %v", code, got, want)
		}
	}
	if pgstore.Retryable(nil) != nil {
		t.Error("Retryable(nil) != nil")
	}
}
