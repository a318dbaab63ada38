package httpguard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/fenceworks/fence"
)

// ResponseError returns nil for a 2xx response. For any other status it
// reads (up to 64 KiB of) the body and returns the typed error the
// middleware's JSON names — *fence.StaleTokenError for 409 STALE_TOKEN,
// *fence.ForgedTokenError for 409 FORGED_TOKEN, *fence.OpConflictError for
// 409 OP_CONFLICT, *fence.InvalidError for 400
// INVALID_ARGUMENT, *RetryableError (with the
// Retry-After) for 503 UNAVAILABLE — or an error with the
// status and body. The caller still closes resp.Body.
func ResponseError(resp *http.Response) error {
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var ref Refusal
	if json.Unmarshal(body, &ref) == nil {
		switch {
		case resp.StatusCode == http.StatusConflict && ref.Reason == fence.ReasonStaleToken:
			return &fence.StaleTokenError{Resource: ref.Resource, Token: ref.Token, LastAccepted: ref.LastAccepted}
		case resp.StatusCode == http.StatusConflict && ref.Reason == fence.ReasonForgedToken:
			return &fence.ForgedTokenError{Token: ref.Token, Name: ref.Lock, Reason: ref.Proof}
		case resp.StatusCode == http.StatusConflict && ref.Reason == fence.ReasonOpConflict:
			return &fence.OpConflictError{Field: ref.Field, ID: ref.OpID}
		case resp.StatusCode == http.StatusBadRequest && ref.Reason == fence.ReasonInvalid:
			return &fence.InvalidError{Field: ref.Field, Bound: ref.Bound}
		case resp.StatusCode == http.StatusServiceUnavailable && ref.Reason == ReasonUnavailable:
			after := DefaultRetryAfter
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
				after = time.Duration(s) * time.Second
			}
			return &RetryableError{Err: errors.New(ref.Message), After: after}
		}
	}
	return fmt.Errorf("httpguard: %s: %s", resp.Status, body)
}
