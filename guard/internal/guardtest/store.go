package guardtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/proof"
	"github.com/fenceworks/fence/guard/internal/sqlguard"
)

// Op mirrors the guards' Op.
type Op struct {
	Resource    string
	Token       fence.Token
	ID          string
	Payload     []byte
	SignedToken fence.SignedToken
}

// Options of a Store made for one test.
type Options struct {
	PruneEvery int // passed to the guard's Options.PruneEvery
	// Keys are passed to the guard's Options fields of the same names
	// (KeySet, KeySource, LockFor, AllowUnsigned).
	Keys proof.Config
}

// Store adapts one guard package to the suite. Each Store has its own
// tables (the guard table, the op table, a data table with rows
// (resource, value, seq) and a stock table for the column pattern), made
// for one test and dropped after it.
type Store interface {
	// Migrate runs the guard's Migrate on the Store's tables.
	Migrate(ctx context.Context) error
	// Check runs the guard's Check alone in a transaction, committing if
	// it accepts.
	Check(ctx context.Context, resource string, token fence.Token) error
	// CheckSigned is Check with the guard's CheckSigned.
	CheckSigned(ctx context.Context, resource string, token fence.SignedToken) error
	// GuardedWrite runs one transaction: the guard's Check, then an upsert
	// of the data row of resource setting value and incrementing seq
	// (1 for a new row); it commits only if both succeed and returns the
	// new seq.
	GuardedWrite(ctx context.Context, resource string, token fence.Token, value int64) (seq int64, err error)
	// GuardedWriteSigned is GuardedWrite with the guard's CheckSigned.
	GuardedWriteSigned(ctx context.Context, resource string, token fence.SignedToken, value int64) (seq int64, err error)
	// LastToken reads the guard row.
	LastToken(ctx context.Context, resource string) (token fence.Token, found bool, err error)
	// Data reads the data row.
	Data(ctx context.Context, resource string) (value, seq int64, found bool, err error)
	// Do runs the guard's Do; write upserts the data row (as GuardedWrite,
	// without the Check) inside Do's transaction.
	Do(ctx context.Context, op Op, fn func(write func(value int64) error) ([]byte, error)) (result []byte, replayed bool, err error)
	// SplitDo is Do made of the guard's CheckOp and SaveOp in one
	// transaction: CheckOp; unless it replays or refuses, fn (whose write
	// upserts the data row in the transaction), SaveOp with fn's result,
	// commit. The suite's Do tests run against it too.
	SplitDo(ctx context.Context, op Op, fn func(write func(value int64) error) ([]byte, error)) (result []byte, replayed bool, err error)
	// Above runs the guard's Above; Lower its Lower.
	Above(ctx context.Context, resource, prefix string, ceiling fence.Token) ([]sqlguard.Stored, error)
	Lower(ctx context.Context, s sqlguard.Stored, ceiling fence.Token) (bool, error)
	// MaxToken runs the guard's MaxToken.
	MaxToken(ctx context.Context) (fence.Token, error)
	// Prune runs the guard's Prune.
	Prune(ctx context.Context, olderThan time.Duration) (int64, error)
	// AgeOps moves the created_at of every op record back by d.
	AgeOps(ctx context.Context, d time.Duration) error
	// OpCount counts op records.
	OpCount(ctx context.Context) (int, error)
	// StockInsert creates the stock row key with qty 0 and token 0.
	StockInsert(ctx context.Context, key string) error
	// StockWrite runs the column-pattern UPDATE of the stock row and the
	// guard's CheckRows on its outcome.
	StockWrite(ctx context.Context, key string, token fence.Token, qty int64) error
	// Stock reads the stock row.
	Stock(ctx context.Context, key string) (qty int64, token fence.Token, err error)
}

// Unavailable reports that the database a test needs does not answer:
// a loud skip, or a failure under CI=true.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and the database is unavailable: "+format, args...)
	}
	t.Skipf("!!! SKIPPING — database unavailable (set CI=true to make this fail): "+format, args...)
}
