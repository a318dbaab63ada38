package suite

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/httpguard"
	"github.com/fenceworks/fence/guard/internal/guardtest"
)

// signedLease is a lease that hands out a signed token, as *client.Lease
// does.
type signedLease struct{ st fence.SignedToken }

func (l signedLease) Token() fence.Token             { return l.st.Token }
func (l signedLease) SignedToken() fence.SignedToken { return l.st }

// RunSigned runs the signed-token tests against a middleware given
// guardtest.Prod's key set: forgeries get 409 FORGED_TOKEN with the data
// and the stored token unchanged (with and without a Fence-Op-Id), the
// paused-worker story holds with signed tokens sent by Transport, and a
// bare number is refused "no proof". Its resources start with "signed-".
func RunSigned(t *testing.T, b Backend) {
	srv := newServer(t, b, httpguard.Options{KeySet: guardtest.Prod.KeySet()})
	s := &suite{b: b, url: srv.URL}
	t.Run("Signed/ForgeriesGet409ForgedAndChangeNothing", s.forged)
	t.Run("Signed/PausedWorker", s.pausedSigned)
	t.Run("Signed/BareNumberHasNoProof", s.bareNumber)
}

// sendSigned PUTs value through Transport with a signed lease.
func (s *suite) sendSigned(t *testing.T, resource string, st fence.SignedToken, value, opID string) (int, []byte, error) {
	t.Helper()
	c := &http.Client{Transport: &httpguard.Transport{Lease: signedLease{st}, Resource: resource}}
	req, _ := http.NewRequestWithContext(httpguard.WithOpID(t.Context(), opID), http.MethodPut, s.url, strings.NewReader(value))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("PUT: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("PUT: reading the answer: %v", err)
	}
	resp.Body = io.NopCloser(strings.NewReader(string(body)))
	return resp.StatusCode, body, httpguard.ResponseError(resp)
}

// wantForged checks a 409 FORGED_TOKEN answer naming lock.
func wantForged(t *testing.T, code int, body []byte, err error, lock string) httpguard.Refusal {
	t.Helper()
	var ref httpguard.Refusal
	if jerr := json.Unmarshal(body, &ref); jerr != nil || code != http.StatusConflict || ref.Reason != fence.ReasonForgedToken || ref.Lock != lock || ref.Proof == "" {
		t.Fatalf("answer %d %s; want 409 FORGED_TOKEN for lock %q with the reason", code, body, lock)
	}
	var forged *fence.ForgedTokenError
	if !errors.Is(err, fence.ErrForgedToken) || !errors.As(err, &forged) || forged.Name != lock {
		t.Fatalf("ResponseError = %T %v, want *fence.ForgedTokenError for %q", err, err, lock)
	}
	return ref
}

func (s *suite) forged(t *testing.T) {
	const res = "signed-sku"
	if code, body, err := s.sendSigned(t, res, guardtest.Prod.Sign(res, 5), "50", ""); code != 200 || err != nil {
		t.Fatalf("an honest signed write: %d %s", code, body)
	}
	for _, f := range guardtest.Forgeries(res, 6) {
		t.Run(f.Name, func(t *testing.T) {
			code, body, err := s.sendSigned(t, res, f.Token, "666", "")
			wantForged(t, code, body, err, res)
			code, body, err = s.sendSigned(t, res, f.Token, "666", "forged-op")
			wantForged(t, code, body, err, res)
			s.want(t, res, "50", 1, 5)
		})
	}
	if code, body, _ := s.sendSigned(t, res, guardtest.Prod.Sign(res, 6), "60", ""); code != 200 {
		t.Fatalf("the honest owner's token 6 after the forgeries: %d %s", code, body)
	}
	s.want(t, res, "60", 2, 6)
}

func (s *suite) pausedSigned(t *testing.T) {
	const res = "signed-paused"
	if code, body, _ := s.sendSigned(t, res, guardtest.Prod.Sign(res, 2), "8", ""); code != 200 {
		t.Fatalf("B's token 2: %d %s", code, body)
	}
	_, body, err := s.sendSigned(t, res, guardtest.Prod.Sign(res, 1), "5", "")
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || stale.Token != 1 || stale.LastAccepted != 2 {
		t.Fatalf("A's late write: %v (%s), want STALE_TOKEN 1 < 2", err, body)
	}
	s.want(t, res, "8", 1, 2)
}

func (s *suite) bareNumber(t *testing.T) {
	const res = "signed-bare"
	code, body, err := s.sendSigned(t, res, fence.SignedToken{Token: 3}, "x", "")
	if ref := wantForged(t, code, body, err, res); ref.Proof != "no proof" {
		t.Fatalf("proof = %q, want %q", ref.Proof, "no proof")
	}
	s.want(t, res, "", 0, 0)
}
