package sqlguard

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fenceworks/fence"
)

// Errors of the column pattern, returned by the guards' CheckRows when an
// UPDATE … WHERE fence_token <= $token changed no row for a reason other than
// a newer token.
var (
	// ErrNoRow: no row has that key. Nothing was written; create the row
	// first (with the token column at 0) or INSERT instead.
	ErrNoRow = errors.New("guard: no row with that key")
	// ErrNoMatch: the row exists and its token is not newer than the one
	// given, yet the UPDATE changed nothing — another condition of its WHERE
	// clause failed. Not a fencing refusal.
	ErrNoMatch = errors.New("guard: the update matched no row, and its token is not stale")
)

// ExplainNoRows turns the facts read after a 0-row column-pattern UPDATE
// into the error: found reports whether the row exists, current its token.
func ExplainNoRows(key any, token fence.Token, found bool, current fence.Token) error {
	switch {
	case !found:
		return fmt.Errorf("%w: %v", ErrNoRow, key)
	case current > token:
		return &fence.StaleTokenError{Resource: fmt.Sprint(key), Token: token, LastAccepted: current}
	}
	return fmt.Errorf("%w: %v (token %d, row has %d)", ErrNoMatch, key, token, current)
}

// Column names the user's table, key column and token column of the column
// pattern (the guards' Column has the same fields, in the same order).
type Column struct {
	Table, Key, Token string
}

// CheckRows explains a column-pattern UPDATE of the row with key, written
// with token, that changed rows rows: nil if any changed; otherwise it reads
// the row's token with q (the dialect's placeholder and ColumnLock) and
// returns ExplainNoRows's verdict. Names that are not plain identifiers are
// refused with *fence.InvalidError before any SQL runs.
func (e *Engine) CheckRows(ctx context.Context, q Querier, c Column, rows int64, key any, token fence.Token) error {
	if rows > 0 {
		return nil
	}
	query, err := e.currentTokenSQL(c)
	if err != nil {
		return err
	}
	var current int64
	switch err := q.QueryRow(ctx, query, key).Scan(&current); {
	case errors.Is(err, sql.ErrNoRows):
		return ExplainNoRows(key, token, false, 0)
	case err != nil:
		return fmt.Errorf("%s: reading %s of %v: %w", e.d.Pkg, c.Token, key, err)
	}
	return ExplainNoRows(key, token, true, fence.Token(current))
}

func (e *Engine) currentTokenSQL(c Column) (string, error) {
	table, err := ParseIdent("table", c.Table)
	if err != nil {
		return "", err
	}
	key, err := ParseIdent("key", c.Key)
	if err != nil || len(key) != 1 {
		return "", fence.Invalid("key", "a plain SQL column name", fmt.Sprintf("%q", c.Key))
	}
	tok, err := ParseIdent("token", c.Token)
	if err != nil || len(tok) != 1 {
		return "", fence.Invalid("token", "a plain SQL column name", fmt.Sprintf("%q", c.Token))
	}
	return fmt.Sprintf(`SELECT %s FROM %s WHERE %s = %s%s`, e.d.Quote(tok), e.d.Quote(table), e.d.Quote(key), e.d.Placeholder(1), e.d.ColumnLock), nil
}
