package apierr

import "errors"

// MarkReplayed marks the refusal err as the saved result of a retried
// session seq, answered again: Detail sets the detail's replayed, and
// IsReplayed reports it. err keeps its chain (errors.Is and errors.As see
// through the mark). MarkReplayed(nil) is nil.
func MarkReplayed(err error) error {
	if err == nil {
		return nil
	}
	return &replayedError{err}
}

// IsReplayed reports a refusal marked replayed: by MarkReplayed, or by the
// server that sent it (ErrorDetail.replayed, read by FromConnect).
func IsReplayed(err error) bool {
	var m *replayedError
	if errors.As(err, &m) {
		return true
	}
	var r *remoteError
	return errors.As(err, &r) && r.replayed
}

// replayedError is a refusal answered from a saved result.
type replayedError struct{ err error }

func (e *replayedError) Error() string { return e.err.Error() }
func (e *replayedError) Unwrap() error { return e.err }
