package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// A strategy is one way to compare a token with the guard row and advance
// it inside a transaction, split where a concurrent writer may come in:
// compare reads and decides, advance writes. The guard's Check does both in
// compare (one statement), so its advance is empty.
type strategy struct {
	name    string
	atomic  bool // whether it must refuse every stale write
	compare func(ctx context.Context, tx *sql.Tx, s *store, tok fence.Token) error
	advance func(ctx context.Context, tx *sql.Tx, s *store, tok fence.Token) error
}

func strategies() []strategy {
	readThenUpdate := func(lock string) func(ctx context.Context, tx *sql.Tx, s *store, tok fence.Token) error {
		return func(ctx context.Context, tx *sql.Tx, s *store, tok fence.Token) error {
			var last int64
			if err := tx.QueryRowContext(ctx, fmt.Sprintf(`SELECT last_token FROM %s WHERE resource = 'r'%s`, s.tt.guard, lock)).Scan(&last); err != nil {
				return err
			}
			if fence.Token(last) > tok {
				return &fence.StaleTokenError{Resource: "r", Token: tok, LastAccepted: fence.Token(last)}
			}
			return nil
		}
	}
	update := func(ctx context.Context, tx *sql.Tx, s *store, tok fence.Token) error {
		_, err := tx.ExecContext(ctx, fmt.Sprintf(`UPDATE %s SET last_token = ? WHERE resource = 'r'`, s.tt.guard), int64(tok))
		return err
	}
	return []strategy{
		{
			name:   "guard Check (INSERT … ON DUPLICATE KEY UPDATE IF)",
			atomic: true,
			compare: func(ctx context.Context, tx *sql.Tx, s *store, tok fence.Token) error {
				return s.g.Check(ctx, tx, "r", tok)
			},
			advance: func(context.Context, *sql.Tx, *store, fence.Token) error { return nil },
		},
		{name: "SELECT … FOR UPDATE, then UPDATE", atomic: true, compare: readThenUpdate(" FOR UPDATE"), advance: update},
		{name: "plain SELECT, then UPDATE", atomic: false, compare: readThenUpdate(""), advance: update},
	}
}

// waitLockWait returns once connection id is waiting for a row lock in
// InnoDB, or done is closed (the statement did not block).
func waitLockWait(ctx context.Context, t *testing.T, db *sql.DB, id int64, done <-chan struct{}) (blocked bool) {
	t.Helper()
	for {
		var state string
		err := db.QueryRowContext(ctx, `SELECT trx_state FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = ?`, id).Scan(&state)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			t.Fatal(err)
		}
		if state == "LOCK WAIT" {
			return true
		}
		select {
		case <-done:
			return false
		case <-ctx.Done():
			t.Fatalf("waiting for connection %d to block or finish: %v", id, ctx.Err())
		// InnoDB refreshes the innodb_trx table only when it was not read
		// for 100ms: polling faster would read the same stale copy forever.
		case <-time.After(150 * time.Millisecond):
		}
	}
}

// TestAtomicUnderIsolation proves, under REPEATABLE READ and READ COMMITTED,
// which SQL refuses a stale write in the two interleavings that break a
// non-atomic check. The guard's statement and a locking read must refuse
// (or serialise) every time; a plain SELECT followed by an UPDATE must let
// the stale write through — which shows the test can see the anomaly.
//
//   - overtaken after a snapshot: A (token 1) begins and reads the guard row
//     (as an application reads before it writes: under REPEATABLE READ this
//     fixes A's snapshot); B (token 2) checks, writes and commits; then A
//     compares and advances. A must be refused citing 2.
//   - read-then-write race: A compares; B runs whole, concurrently — it
//     either finishes or blocks on a lock A holds (seen in
//     information_schema.innodb_trx); then A advances, writes and commits,
//     and B, if it was blocked, goes on.
//
// Every accepted writer writes its token into the data row and increments
// its seq under the row's lock, so seq is the commit order: a stale write is
// A's (token 1) committed after B's (token 2).
func TestAtomicUnderIsolation(t *testing.T) {
	db := testDB(t)
	for _, iso := range []sql.IsolationLevel{sql.LevelRepeatableRead, sql.LevelReadCommitted} {
		for _, st := range strategies() {
			for _, scenario := range []string{"overtaken after a snapshot", "read-then-write race"} {
				t.Run(fmt.Sprintf("%s/%s/%s", iso, st.name, scenario), func(t *testing.T) {
					staleAccepted := runInterleaving(t, db, iso, st, scenario)
					anomalyExpected := scenario == "read-then-write race" || iso == sql.LevelRepeatableRead
					switch {
					case st.atomic && staleAccepted:
						t.Fatalf("%s under %s accepted a stale write (%s)", st.name, iso, scenario)
					case !st.atomic && anomalyExpected && !staleAccepted:
						t.Fatalf("the non-atomic %s under %s refused the stale write (%s): the test no longer shows the anomaly", st.name, iso, scenario)
					case !st.atomic && staleAccepted:
						t.Logf("as expected, %s under %s let the stale write through", st.name, iso)
					}
				})
			}
		}
	}
}

// runInterleaving runs one scenario and reports whether A's stale write
// (token 1) committed after B's (token 2).
func runInterleaving(t *testing.T, db *sql.DB, iso sql.IsolationLevel, st strategy, scenario string) (staleAccepted bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := newStore(t, db, iso, -1)
	must(t, s.Check(ctx, "r", 1)) // the row exists, last token 1

	// writer runs one whole writer in its own transaction; id receives its
	// connection's id first. seq is its place in the commit order.
	writer := func(tok fence.Token, id chan<- int64) (seq int64, err error) {
		err = s.inTx(ctx, func(tx *sql.Tx) error {
			if id != nil {
				var n int64
				if err := tx.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&n); err != nil {
					return err
				}
				id <- n
			}
			if err := st.compare(ctx, tx, s, tok); err != nil {
				return err
			}
			if err := st.advance(ctx, tx, s, tok); err != nil {
				return err
			}
			seq, err = s.write(ctx, tx, "r", int64(tok))
			return err
		})
		return seq, err
	}

	a, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: iso})
	must(t, err)
	defer a.Rollback()
	var (
		bSeq int64
		bErr error
		done = make(chan struct{})
	)
	switch scenario {
	case "overtaken after a snapshot":
		var seen int64
		must(t, a.QueryRowContext(ctx, fmt.Sprintf(`SELECT last_token FROM %s WHERE resource = 'r'`, s.tt.guard)).Scan(&seen))
		bSeq, bErr = writer(2, nil)
		must(t, bErr)
		close(done)
		if err := st.compare(ctx, a, s, 1); err != nil {
			wantStale(t, err, "r", 1, 2)
			return false
		}
	case "read-then-write race":
		if err := st.compare(ctx, a, s, 1); err != nil {
			t.Fatalf("A's compare before B ran: %v", err)
		}
		id := make(chan int64, 1)
		go func() {
			defer close(done)
			bSeq, bErr = writer(2, id)
		}()
		if blocked := waitLockWait(ctx, t, db, <-id, done); !blocked {
			<-done
			must(t, bErr)
		}
	}
	if err := st.advance(ctx, a, s, 1); err != nil {
		t.Fatalf("A's advance: %v", err)
	}
	aSeq, err := s.write(ctx, a, "r", 1)
	if err != nil {
		t.Fatalf("A's write: %v", err)
	}
	must(t, a.Commit())
	<-done
	must(t, bErr)
	if bSeq == aSeq {
		t.Fatalf("A and B both wrote seq %d", aSeq)
	}
	return aSeq > bSeq
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantStale(t *testing.T, err error, resource string, token, last fence.Token) {
	t.Helper()
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("err = %v, want *fence.StaleTokenError", err)
	}
	if *stale != (fence.StaleTokenError{Resource: resource, Token: token, LastAccepted: last}) {
		t.Fatalf("stale = %+v, want {%s %d %d}", *stale, resource, token, last)
	}
}
