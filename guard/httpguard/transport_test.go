package httpguard

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fenceworks/fence"
)

func TestTransportSetsHeaders(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	defer srv.Close()
	c := &http.Client{Transport: &Transport{Lease: staticToken(42), Resource: "sku-42"}}

	req, _ := http.NewRequestWithContext(WithOpID(context.Background(), "op-7"), http.MethodPost, srv.URL, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got.Get(HeaderToken) != "42" || got.Get(HeaderResource) != "sku-42" || got.Get(HeaderOpID) != "op-7" {
		t.Fatalf("headers sent: %v", got)
	}
	if req.Header.Get(HeaderToken) != "" {
		t.Fatal("Transport modified the caller's request")
	}
	resp, err = c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got.Get(HeaderOpID) != "" {
		t.Fatalf("op id sent without WithOpID: %q", got.Get(HeaderOpID))
	}

	for _, tr := range []*Transport{{Lease: staticToken(0), Resource: "r"}, {Resource: "r"}, {Lease: staticToken(1)}} {
		_, err := (&http.Client{Transport: tr}).Get(srv.URL)
		if !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("%+v: err = %v, want invalid", tr, err)
		}
	}
}

// The client side of a full round trip: the middleware's 409 comes back as
// a *fence.StaleTokenError.
func TestResponseErrorRoundTrip(t *testing.T) {
	_, srv := newStockServer(t, Options{})
	send := func(tok fence.Token) error {
		c := &http.Client{Transport: &Transport{Lease: staticToken(tok), Resource: "sku"}}
		resp, err := c.Post(srv.URL, "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return ResponseError(resp)
	}
	if err := send(2); err != nil {
		t.Fatal(err)
	}
	var stale *fence.StaleTokenError
	if err := send(1); !errors.As(err, &stale) || stale.Token != 1 || stale.LastAccepted != 2 || stale.Resource != "sku" {
		t.Fatalf("stale: %v", err)
	}
}
