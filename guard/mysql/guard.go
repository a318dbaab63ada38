package mysql

import (
	"fmt"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/proof"
	"github.com/fenceworks/fence/guard/internal/sqlguard"
)

// Default table names.
const (
	DefaultTable    = sqlguard.DefaultTable
	DefaultOpsTable = sqlguard.DefaultOpsTable
)

// Options configures a Guard. The zero value means the defaults.
type Options struct {
	// Table is the guard table (resource → last accepted token), default
	// "fence_guard". A plain identifier, optionally qualified by a
	// database ("app.fence_guard").
	Table string
	// OpsTable keeps the op records of Do, default "fence_ops".
	OpsTable string
	// Retention: op records older than this may be removed (default 24h).
	// A retry of an op_id older than Retention may be applied again; its
	// token is still checked.
	Retention time.Duration
	// PruneEvery: one Do call in PruneEvery also removes its resource's op
	// records older than Retention (default 1000; negative: never, leaving
	// it to Prune).
	PruneEvery int

	// KeySet is the Fence cluster's public signing keys (`fence keys
	// --json` or GET /v1/keys, read with fence.ParseKeySet). With a key set
	// the guard verifies every token's proof before it compares: a token
	// without a proof, or whose proof does not hold for the resource's lock
	// under a key of this cluster (a tampered token, another lock's or
	// another cluster's proof, a made-up one), is refused with
	// *fence.ForgedTokenError (errors.Is fence.ErrForgedToken) and nothing
	// changes. Without one (the default) any number is compared as it is,
	// and a made-up token such as 2^53-1 is accepted and then refuses every
	// honest owner (`fence guard repair` undoes that).
	KeySet *fence.KeySet
	// KeySource, instead of KeySet, returns the current key set on every
	// check (reload it after a `fence keys rotate` or a restore). A nil
	// result refuses the write. Set KeySet or KeySource, not both.
	KeySource func() *fence.KeySet
	// LockFor names the lock whose proofs a resource accepts (default: the
	// lock of the resource's own name).
	// It must be one-to-one (injective): two resources mapped to one lock
	// let whoever holds that lock write both, so a lease on one is a lease
	// on the other. "stock/"+strings.TrimPrefix(r, "sku-") is not: it
	// sends both "sku-42" and "42" to "stock/42". Map only the names you
	// mean and return "" for any other (a resource no lock protects: every
	// proof is refused); see docs/guards.md.
	LockFor func(resource string) string
	// AllowUnsigned accepts tokens without a proof even with a key set, for
	// the time writers move to signed tokens. It reopens the hole: a
	// made-up unsigned token is compared, and a large one poisons the
	// resource. Signed tokens are still verified.
	AllowUnsigned bool
}

// Guard checks fencing tokens in MySQL or MariaDB (InnoDB) tables. It holds
// only the table names and SQL text (and a call counter for pruning), so one
// Guard is safe for concurrent use by any number of goroutines and
// connections.
type Guard struct{ e *sqlguard.Engine }

// New returns a Guard for the tables named in opts. A name that is not a
// plain SQL identifier, a negative Retention, or both KeySet and
// KeySource, is refused with *fence.InvalidError.
func New(opts Options) (*Guard, error) {
	e, err := sqlguard.NewEngine(dialect, opts.Table, opts.OpsTable, sqlguard.Retention{Keep: opts.Retention, PruneEvery: opts.PruneEvery},
		proof.Config{KeySet: opts.KeySet, KeySource: opts.KeySource, LockFor: opts.LockFor, AllowUnsigned: opts.AllowUnsigned})
	if err != nil {
		return nil, err
	}
	return &Guard{e}, nil
}

// defaultGuard serves the package-level functions.
var defaultGuard = func() *Guard {
	g, err := New(Options{})
	if err != nil {
		panic(fmt.Sprintf("guard/mysql: default options: %v", err)) // constant input, cannot happen
	}
	return g
}()

// Default returns the Guard of the default tables, used by the package-level
// functions.
func Default() *Guard { return defaultGuard }
