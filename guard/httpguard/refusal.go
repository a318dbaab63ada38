package httpguard

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/fenceworks/fence"
)

// Refusal is the JSON body of every answer the middleware makes itself.
type Refusal struct {
	Reason       fence.Reason `json:"reason"`                  // STALE_TOKEN, FORGED_TOKEN, INVALID_ARGUMENT, UNAVAILABLE, INTERNAL...
	Resource     string       `json:"resource,omitempty"`      // STALE_TOKEN, FORGED_TOKEN
	Token        fence.Token  `json:"token,omitempty"`         // STALE_TOKEN, FORGED_TOKEN: the request's token
	Lock         string       `json:"lock,omitempty"`          // FORGED_TOKEN: the lock whose proof was required
	Proof        string       `json:"proof,omitempty"`         // FORGED_TOKEN: why the proof does not hold ("no proof", ...)
	LastAccepted fence.Token  `json:"last_accepted,omitempty"` // STALE_TOKEN: the newer token
	Field        string       `json:"field,omitempty"`         // INVALID_ARGUMENT: the header; OP_CONFLICT: "op_id"
	OpID         string       `json:"op_id,omitempty"`         // OP_CONFLICT: the op_id used with another request
	Bound        string       `json:"bound,omitempty"`         // INVALID_ARGUMENT: the rule
	Message      string       `json:"message"`
}

// ReasonInternal marks a store or commit failure (HTTP 500); its details
// go to the server log, not to the client.
const ReasonInternal fence.Reason = "INTERNAL"

var errTooLarge = errors.New("the handler's response was larger than the middleware may hold until the commit (Options.MaxBuffer); nothing was applied")

var errCommit = errors.New("the guarded write could not be committed; nothing was applied, or the outcome is unknown if the store failed during commit")

// refusalOf maps an error to its status and body.
func refusalOf(err error) (int, Refusal) {
	var (
		stale  *fence.StaleTokenError
		forged *fence.ForgedTokenError
		inv    *fence.InvalidError
		retry  *RetryableError
	)
	var (
		tooLarge *bodyTooLargeError
		conflict *fence.OpConflictError
	)
	switch {
	case errors.As(err, &conflict):
		return http.StatusConflict, Refusal{Reason: fence.ReasonOpConflict, Field: conflict.Field, OpID: conflict.ID, Message: conflict.Error()}
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge, Refusal{Reason: fence.ReasonInvalid, Field: "body",
			Bound: "at most " + strconv.Itoa(tooLarge.max) + " bytes with Fence-Op-Id", Message: tooLarge.Error()}
	case errors.As(err, &retry):
		return http.StatusServiceUnavailable, Refusal{Reason: ReasonUnavailable, Message: "a transient store failure (serialization failure or deadlock); nothing was applied: retry the request"}
	case errors.As(err, &stale):
		return http.StatusConflict, Refusal{Reason: fence.ReasonStaleToken, Resource: stale.Resource,
			Token: stale.Token, LastAccepted: stale.LastAccepted, Message: stale.Error()}
	case errors.As(err, &forged):
		return http.StatusConflict, Refusal{Reason: fence.ReasonForgedToken, Token: forged.Token, Lock: forged.Name, Proof: forged.Reason, Message: forged.Error()}
	case errors.As(err, &inv):
		return http.StatusBadRequest, Refusal{Reason: fence.ReasonInvalid, Field: inv.Field, Bound: inv.Bound, Message: inv.Error()}
	case err == errCommit || err == errTooLarge:
		return http.StatusInternalServerError, Refusal{Reason: ReasonInternal, Message: err.Error()}
	case fence.ReasonOf(err) != "":
		return http.StatusConflict, Refusal{Reason: fence.ReasonOf(err), Message: err.Error()}
	}
	return http.StatusInternalServerError, Refusal{Reason: ReasonInternal, Message: "the guard store failed; nothing was applied"}
}

func writeRefusal(w http.ResponseWriter, err error) {
	status, body := refusalOf(err)
	var retry *RetryableError
	if errors.As(err, &retry) {
		w.Header().Set("Retry-After", retryAfterHeader(retry.retryAfter()))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
