package httpguard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/fenceworks/fence"
)

// HeaderReplayed is set ("true") on an answer the middleware replayed from
// an op record instead of running the handler.
const HeaderReplayed = "Fence-Replayed"

// DefaultMaxBody is Options.MaxBody when it is 0.
const DefaultMaxBody = 1 << 20

// Op is one request with a Fence-Op-Id, as an OpStore sees it.
type Op struct {
	Resource string
	Token    fence.Token
	ID       string // Fence-Op-Id
	// Payload identifies the request: its method, request URI and body. A
	// retry must send the same; another request under a used ID is refused
	// with *fence.OpConflictError. Stores keep only a hash of it.
	Payload []byte
}

// OpStore is a Store that also remembers the answers of requests with an
// op_id (Fence-Op-Id), so that a retry is answered what the first attempt
// was, and applies nothing — the rule of the guards' Do and of guard/redis.
// pgstore, sqlitestore and MemoryStore are OpStores.
//
// Contract, in addition to Store's:
//   - BeginOp checks op.Token and looks up (op.Resource, op.ID) in one
//     transaction, the lookup deciding first: an op applied before returns
//     replayed = true and its saved answer, even if a newer token has been
//     accepted since (the retry of an applied op is not refused as stale);
//     one applied with another payload returns *fence.OpConflictError; a
//     new op with a stale token, *fence.StaleTokenError. In these cases no
//     transaction is left open.
//   - Otherwise it returns an open OpTx, as Begin does. The middleware calls
//     SaveOp with the answer to remember, then Commit: the record commits
//     with the handler's writes, or not at all.
//   - Only committed (2xx) answers are remembered: a retry of an op whose
//     handler failed runs the handler again.
type OpStore interface {
	Store
	BeginOp(ctx context.Context, op Op) (tx OpTx, saved []byte, replayed bool, err error)
}

// OpTx is the open transaction of an op: a Tx that can save the op's answer.
type OpTx interface {
	Tx
	SaveOp(ctx context.Context, answer []byte) error
}

// answer is a handler's committed answer as an op record keeps it.
type answer struct {
	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
}

func (r *recorder) answer() ([]byte, error) {
	return json.Marshal(answer{Status: r.status, Header: r.header, Body: r.body.Bytes()})
}

// replay writes a saved answer to w, marked with Fence-Replayed.
func replay(w http.ResponseWriter, saved []byte) error {
	var a answer
	if err := json.Unmarshal(saved, &a); err != nil || a.Status < 200 || a.Status > 299 {
		return fmt.Errorf("httpguard: a saved answer that cannot be replayed (%d bytes): %v", len(saved), err)
	}
	h := w.Header()
	for k, v := range a.Header {
		h[k] = v
	}
	h.Set(HeaderReplayed, "true")
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
	return nil
}

// opPayload is what identifies a request under its op_id.
func opPayload(r *http.Request, body []byte) []byte {
	p := make([]byte, 0, len(r.Method)+len(r.URL.RequestURI())+len(body)+2)
	p = append(p, r.Method...)
	p = append(p, '\n')
	p = append(p, r.URL.RequestURI()...)
	p = append(p, '\n')
	return append(p, body...)
}
