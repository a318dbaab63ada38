package httpguard

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/fenceworks/fence"
)

// ReasonUnavailable marks a transient store failure the client should retry
// as it is (HTTP 503 with Retry-After): nothing was applied.
const ReasonUnavailable fence.Reason = "UNAVAILABLE"

// DefaultRetryAfter is the Retry-After of a RetryableError without one.
const DefaultRetryAfter = time.Second

// RetryableError is a store failure after which nothing was applied and
// the same request may simply be sent again — a serialization failure or a
// deadlock the database resolved by aborting this transaction. A Store
// returns it from Begin or Tx.Commit (pgstore does for SQLSTATE 40001 and
// 40P01); the middleware answers 503 Service Unavailable with Retry-After
// and reason UNAVAILABLE, and ResponseError turns that answer back into a
// *RetryableError.
type RetryableError struct {
	Err   error         // the store's error (kept out of the response body)
	After time.Duration // Retry-After; 0 means DefaultRetryAfter
}

func (e *RetryableError) Error() string {
	if e.Err == nil {
		return "httpguard: transient store failure, nothing was applied: retry"
	}
	return fmt.Sprintf("httpguard: transient store failure, nothing was applied: retry: %v", e.Err)
}

func (e *RetryableError) Unwrap() error { return e.Err }

func (e *RetryableError) retryAfter() time.Duration {
	if e.After <= 0 {
		return DefaultRetryAfter
	}
	return e.After
}

// retryAfterHeader renders d as whole seconds, at least 1.
func retryAfterHeader(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}

// WriteError answers err the way the middleware answers its own refusals:
// 409 for a stale token, 400 for invalid input, 503 with Retry-After for a
// *RetryableError, 500 (details withheld) for anything else. A handler may
// use it for errors of its own writes — a SERIALIZABLE handler whose
// statement failed with a serialization error answers
// httpguard.WriteError(w, pgstore.Retryable(err)), and the middleware
// rolls back as for any non-2xx answer.
func WriteError(w http.ResponseWriter, err error) { writeRefusal(w, err) }
