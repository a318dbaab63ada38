package httpguard

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// commitFails is a Store whose transactions fail to commit with err.
type commitFails struct{ err error }

func (s commitFails) Begin(context.Context, string, fence.Token) (Tx, error) {
	return failingTx(s), nil
}

type failingTx commitFails

func (t failingTx) Commit(context.Context) error   { return t.err }
func (t failingTx) Rollback(context.Context) error { return nil }

// A RetryableError from Begin or Commit is a 503 with Retry-After, which
// ResponseError turns back into a *RetryableError; another commit failure
// stays a 500.
func TestRetryableStoreErrorGets503(t *testing.T) {
	for _, tc := range []struct {
		name   string
		store  Store
		status int
		after  string
	}{
		{"commit", commitFails{&RetryableError{Err: errors.New("40001"), After: 2500 * time.Millisecond}}, 503, "3"},
		{"begin", beginFails{&RetryableError{Err: errors.New("40P01")}}, 503, "1"},
		{"other commit failure", commitFails{errors.New("disk on fire")}, 500, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(Middleware(tc.store, Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
			defer srv.Close()
			resp, err := (&http.Client{Transport: &Transport{Lease: staticToken(1), Resource: "r"}}).Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.status || resp.Header.Get("Retry-After") != tc.after {
				t.Fatalf("%d Retry-After %q; want %d %q", resp.StatusCode, resp.Header.Get("Retry-After"), tc.status, tc.after)
			}
			var retry *RetryableError
			err = ResponseError(resp)
			if got := errors.As(err, &retry); got != (tc.status == 503) {
				t.Fatalf("ResponseError = %v; want a *RetryableError: %v", err, tc.status == 503)
			}
			if retry != nil && retry.After.String() != tc.after+"s" {
				t.Fatalf("RetryableError.After = %v, want %ss", retry.After, tc.after)
			}
		})
	}
}

type beginFails struct{ err error }

func (s beginFails) Begin(context.Context, string, fence.Token) (Tx, error) { return nil, s.err }

func TestRetryableErrorMessage(t *testing.T) {
	if msg := (&RetryableError{}).Error(); strings.Contains(msg, "nil") || !strings.Contains(msg, "retry") {
		t.Errorf("without a cause: %q", msg)
	}
	cause := errors.New("SQLSTATE 40001")
	err := &RetryableError{Err: cause}
	if !strings.Contains(err.Error(), "SQLSTATE 40001") || !errors.Is(err, cause) {
		t.Errorf("with a cause: %q, unwraps to it: %v", err.Error(), errors.Is(err, cause))
	}
}
