package mysql

import (
	"fmt"
	"time"

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
}

// Guard checks fencing tokens in MySQL or MariaDB (InnoDB) tables. It holds
// only the table names and SQL text (and a call counter for pruning), so one
// Guard is safe for concurrent use by any number of goroutines and
// connections.
type Guard struct{ e *sqlguard.Engine }

// New returns a Guard for the tables named in opts. A name that is not a
// plain SQL identifier, or a negative Retention, is refused with
// *fence.InvalidError.
func New(opts Options) (*Guard, error) {
	e, err := sqlguard.NewEngine(dialect, opts.Table, opts.OpsTable, sqlguard.Retention{Keep: opts.Retention, PruneEvery: opts.PruneEvery})
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
