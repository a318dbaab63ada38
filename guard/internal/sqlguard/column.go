package sqlguard

import (
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
