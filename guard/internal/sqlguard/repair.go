package sqlguard

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/fenceworks/fence"
)

// Stored is one guard row: a resource and the last token it accepted.
type Stored struct {
	Resource string
	Token    fence.Token
}

// Above returns the guard rows whose resource is resource (if not empty)
// or starts with prefix, and whose last_token is above ceiling, in resource
// order: what `fence guard repair` lowers. It reads one row per statement
// (keyset order on resource), so it needs only QueryRow; rows above a
// ceiling are few (a poisoned store), not the whole table. A ceiling of 0 or
// above fence.MaxTokenJSONInt is refused with *fence.InvalidError.
func (e *Engine) Above(ctx context.Context, q Querier, resource, prefix string, ceiling fence.Token) ([]Stored, error) {
	if err := validCeiling(ceiling); err != nil {
		return nil, err
	}
	table := e.d.Quote(e.t.Table)
	p := e.d.Placeholder
	if resource != "" {
		var tok int64
		err := q.QueryRow(ctx, fmt.Sprintf(`SELECT last_token FROM %s WHERE resource = %s`, table, p(1)), resource).Scan(&tok)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("%s: reading %q in %s: %w", e.d.Pkg, resource, e.TableName(), e.noTable(err))
		case tok > int64(ceiling):
			return []Stored{{resource, fence.Token(tok)}}, nil
		}
		return nil, nil
	}
	first := fmt.Sprintf(`SELECT resource, last_token FROM %s WHERE last_token > %s ORDER BY resource LIMIT 1`, table, p(1))
	next := fmt.Sprintf(`SELECT resource, last_token FROM %s WHERE last_token > %s AND resource > %s ORDER BY resource LIMIT 1`, table, p(1), p(2))
	var out []Stored
	for after, started := "", false; ; started = true {
		var (
			res string
			tok int64
			err error
		)
		if !started {
			err = q.QueryRow(ctx, first, int64(ceiling)).Scan(&res, &tok)
		} else {
			err = q.QueryRow(ctx, next, int64(ceiling), after).Scan(&res, &tok)
		}
		if errors.Is(err, sql.ErrNoRows) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("%s: reading tokens above %d in %s: %w", e.d.Pkg, ceiling, e.TableName(), e.noTable(err))
		}
		if strings.HasPrefix(res, prefix) {
			out = append(out, Stored{res, fence.Token(tok)})
		}
		after = res
	}
}

// Lower sets the last token of s.Resource to ceiling if it still holds
// s.Token and s.Token is above ceiling (one conditional UPDATE, so a row
// that changed since Above read it is left alone: lowered = false). A
// ceiling of 0 or above fence.MaxTokenJSONInt, or one at or above s.Token,
// is refused with *fence.InvalidError.
func (e *Engine) Lower(ctx context.Context, q Querier, s Stored, ceiling fence.Token) (lowered bool, err error) {
	if err := validCeiling(ceiling); err != nil {
		return false, err
	}
	if s.Token <= ceiling {
		return false, fence.Invalid("ceiling", "below the stored token "+s.Token.String(), ceiling.String())
	}
	p := e.d.Placeholder
	n, err := q.Exec(ctx, fmt.Sprintf(`UPDATE %s SET last_token = %s WHERE resource = %s AND last_token = %s`,
		e.d.Quote(e.t.Table), p(1), p(2), p(3)), int64(ceiling), s.Resource, int64(s.Token))
	if err != nil {
		return false, fmt.Errorf("%s: lowering %q in %s: %w", e.d.Pkg, s.Resource, e.TableName(), e.noTable(err))
	}
	return n > 0, nil
}

func validCeiling(c fence.Token) error {
	if c == 0 || c > fence.MaxTokenJSONInt {
		return fence.Invalid("ceiling", fmt.Sprintf("in [1, %d]", uint64(fence.MaxTokenJSONInt)), c.String())
	}
	return nil
}
