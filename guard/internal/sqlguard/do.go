package sqlguard

import (
	"errors"

	"github.com/fenceworks/fence"
)

// DoSteps are a SQL guard's store-specific steps of Do, all inside one
// transaction that the guard begins before RunDo and rolls back after it
// unless Commit ran.
type DoSteps struct {
	Check  func() error                                  // advance the guard row (takes its lock)
	Lookup func() (result []byte, found bool, err error) // the op record; Replay's verdict if found
	Apply  func() ([]byte, error)                        // the caller's fn
	Save   func(result []byte) error                     // the op record
	Prune  func() error                                  // nil: not due this call
	Commit func() error
}

// RunDo is the order of Engine.Do:
//
//  1. check the token (a stale token is remembered, not yet returned);
//  2. look the op up: an applied op returns its saved result (replayed) or
//     *fence.OpConflictError, even if its token has been overtaken since;
//  3. a stale token is refused now;
//  4. apply, save the op record, prune if due, commit.
//
// Any other error of a step is returned as it is.
func RunDo(s DoSteps) (result []byte, replayed bool, err error) {
	if saved, replayed, err := RunBegin(s.Check, s.Lookup); replayed || err != nil {
		return saved, replayed, err
	}
	if result, err = s.Apply(); err != nil {
		return nil, false, err
	}
	if err := s.Save(result); err != nil {
		return nil, false, err
	}
	if s.Prune != nil {
		if err := s.Prune(); err != nil {
			return nil, false, err
		}
	}
	if err := s.Commit(); err != nil {
		return nil, false, err
	}
	return result, false, nil
}

// RunBegin is the first half of RunDo, for callers that apply the op
// themselves later in the same transaction (httpguard's stores): check the
// token, look the op up (a found op is replayed, or a conflict, even if its
// token has been overtaken), then refuse a stale token. replayed = false
// and err = nil mean: apply the op now.
func RunBegin(check func() error, lookup func() ([]byte, bool, error)) (saved []byte, replayed bool, err error) {
	checkErr := check()
	var stale *fence.StaleTokenError
	if checkErr != nil && !errors.As(checkErr, &stale) {
		return nil, false, checkErr
	}
	if saved, found, err := lookup(); found || err != nil {
		return saved, found && err == nil, err
	}
	return nil, false, checkErr
}
