package sqlguard

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/proof"
)

// Engine is a SQL guard over one Dialect: the compare-and-advance of Check,
// the op records of Do, pruning and the floor read of MaxToken. It holds
// only table names and SQL text (and a call counter for pruning), so it is
// safe for concurrent use.
type Engine struct {
	d      Dialect
	t      Tables
	sql    Statements
	pruner *Pruner
	keys   *proof.Verifier // nil: no key set, tokens are compared unverified
}

// NewEngine resolves the tables and options (see ResolveTables) and builds
// the dialect's statements for them. keys is the guard's signed-token
// configuration (see proof.Config; the zero Config verifies nothing).
func NewEngine(d Dialect, table, opsTable string, retention Retention, keys proof.Config) (*Engine, error) {
	t, err := ResolveTables(table, opsTable, retention.Keep)
	if err != nil {
		return nil, err
	}
	v, err := proof.New(keys)
	if err != nil {
		return nil, err
	}
	return &Engine{d: d, t: t, sql: d.Statements(t), pruner: NewPruner(retention.PruneEvery), keys: v}, nil
}

// Retention is the op-record options of a guard: Keep (0: DefaultRetention)
// and PruneEvery (see NewPruner).
type Retention struct {
	Keep       time.Duration
	PruneEvery int
}

// Tables returns the engine's resolved tables.
func (e *Engine) Tables() Tables { return e.t }

// TableName is the guard table as configured ("fence_guard", "app.guard").
func (e *Engine) TableName() string { return strings.Join(e.t.Table, ".") }

// OpsTableName is the op table as configured.
func (e *Engine) OpsTableName() string { return strings.Join(e.t.Ops, ".") }

// DDL returns the statements Migrate runs.
func (e *Engine) DDL() []string { return append([]string(nil), e.sql.Migrate...) }

// Migrate runs the DDL on q, in order.
func (e *Engine) Migrate(ctx context.Context, q Querier) error {
	for _, stmt := range e.sql.Migrate {
		if _, err := q.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: migrate: %w", e.d.Pkg, err)
		}
	}
	return nil
}

// noTable turns the dialect's missing-table error on one of e's tables into
// a *MissingTableError; anything else is returned as is.
func (e *Engine) noTable(err error) error {
	if err == nil || e.d.NoSuchTable == nil {
		return err
	}
	msg, ok := e.d.NoSuchTable(err)
	if !ok {
		return err
	}
	return MissingTable(e.d.Pkg, err, msg, e.TableName(), e.OpsTableName())
}

func (e *Engine) validate(resource, opID string) error {
	if e.d.Validate == nil {
		return nil
	}
	return e.d.Validate(resource, opID)
}

// Check accepts token for resource if it is at least the last token
// accepted there and records it, in tx: one statement that compares and
// advances. Invalid input is refused with *fence.InvalidError, and with a
// key set a token whose proof does not hold for resource's lock with
// *fence.ForgedTokenError — both before any SQL runs, so nothing changes.
// An older token is refused with *fence.StaleTokenError carrying both
// tokens.
func (e *Engine) Check(ctx context.Context, tx Querier, resource string, token fence.SignedToken) error {
	if err := ValidateCheck(resource, token.Token); err != nil {
		return err
	}
	if err := e.validate(resource, ""); err != nil {
		return err
	}
	if err := e.keys.Verify(resource, token); err != nil {
		return err
	}
	return e.check(ctx, tx, resource, token.Token)
}

// Verify checks token's proof for resource's lock without touching the
// database (nil when the engine has no key set): what Check does before its
// compare, for the column pattern, whose UPDATE compares by itself.
func (e *Engine) Verify(resource string, token fence.SignedToken) error {
	if err := fence.ValidateToken(token.Token); err != nil {
		return err
	}
	return e.keys.Verify(resource, token)
}

func (e *Engine) check(ctx context.Context, tx Querier, resource string, token fence.Token) error {
	tok := int64(token)
	if e.d.ReadBack {
		n, err := tx.Exec(ctx, e.sql.Check, resource, tok, tok, tok, tok)
		if err != nil {
			return fmt.Errorf("%s: check %q: %w", e.d.Pkg, resource, e.noTable(err))
		}
		if n == 2 {
			return nil // an existing row was changed: only the accepting branch changes it
		}
		// Inserted (1), left as it was (0), or found with clientFoundRows
		// (1): read the row this statement locked.
		var last int64
		if err := tx.QueryRow(ctx, e.sql.Last, resource).Scan(&last); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				err = errors.New("the guard row is missing after the upsert (is the table InnoDB?)")
			}
			return fmt.Errorf("%s: check %q: reading the last token: %w", e.d.Pkg, resource, e.noTable(err))
		}
		switch {
		case last == tok:
			return nil
		case last > tok:
			return &fence.StaleTokenError{Resource: resource, Token: token, LastAccepted: fence.Token(last)}
		}
		return fmt.Errorf("%s: check %q: the guard row holds %d after advancing to %d", e.d.Pkg, resource, last, tok)
	}
	var accepted int64
	err := tx.QueryRow(ctx, e.sql.Check, resource, tok).Scan(&accepted)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: check %q: %w", e.d.Pkg, resource, e.noTable(err))
	}
	// Refused: the row exists with a newer token (and is locked by this
	// statement). Read it for the facts.
	var last int64
	if err := tx.QueryRow(ctx, e.sql.Last, resource).Scan(&last); err != nil {
		return fmt.Errorf("%s: check %q: token %d refused, reading the last token: %w", e.d.Pkg, resource, token, e.noTable(err))
	}
	return &fence.StaleTokenError{Resource: resource, Token: token, LastAccepted: fence.Token(last)}
}

// MaxTokenFound returns the largest last_token in the guard table, with
// found = false when the table has no row (MAX of no rows is NULL, not a
// token).
func (e *Engine) MaxTokenFound(ctx context.Context, q Querier) (max fence.Token, found bool, err error) {
	var m *int64
	if err := q.QueryRow(ctx, e.sql.MaxToken).Scan(&m); err != nil {
		return 0, false, fmt.Errorf("%s: max token of %s: %w", e.d.Pkg, e.TableName(), e.noTable(err))
	}
	if m == nil {
		return 0, false, nil
	}
	if *m < 0 {
		return 0, false, fmt.Errorf("%s: max token of %s: last_token %d is negative", e.d.Pkg, e.TableName(), *m)
	}
	return fence.Token(*m), true, nil
}

// Prune removes op records of every resource older than olderThan and
// returns how many it removed (with a PruneBatch, in statements of at most
// that many rows). A negative olderThan is refused with *fence.InvalidError.
func (e *Engine) Prune(ctx context.Context, q Querier, olderThan time.Duration) (int64, error) {
	if olderThan < 0 {
		return 0, fence.Invalid("older_than", "at least 0s", olderThan.String())
	}
	var total int64
	for {
		n, err := q.Exec(ctx, e.sql.PruneAll, e.d.Age(olderThan))
		if err != nil {
			return total, fmt.Errorf("%s: prune: %w", e.d.Pkg, e.noTable(err))
		}
		total += n
		if e.d.PruneBatch <= 0 || n < int64(e.d.PruneBatch) {
			return total, nil
		}
	}
}
