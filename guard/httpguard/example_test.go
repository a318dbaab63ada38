package httpguard_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/httpguard"
)

// lease stands in for *client.Lease: anything with Token().
type lease fence.Token

func (l lease) Token() fence.Token { return fence.Token(l) }

// The paused-worker story over HTTP: a stock service fenced by the middleware,
// worker B (token 2) and worker A waking up late with token 1.
func Example() {
	var store httpguard.MemoryStore // single process; use pgstore/sqlitestore across processes
	stock := map[string]string{}
	svc := httpguard.Middleware(&store, httpguard.Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, _ := httpguard.FromContext(r.Context())
		body, _ := io.ReadAll(r.Body)
		stock[f.Resource] = string(body) // runs under the resource's guard
	}))
	srv := httptest.NewServer(svc)
	defer srv.Close()

	put := func(tok fence.Token, value string) error {
		c := &http.Client{Transport: &httpguard.Transport{Lease: lease(tok), Resource: "sku-42"}}
		resp, err := c.Post(srv.URL, "text/plain", strings.NewReader(value))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return httpguard.ResponseError(resp)
	}
	fmt.Println("B writes 8:", put(2, "8"))
	err := put(1, "5")
	fmt.Println("A writes 5:", err, errors.Is(err, fence.ErrStaleToken))
	fmt.Println("stock:", stock["sku-42"])
	// Output:
	// B writes 8: <nil>
	// A writes 5: token 1 is older than accepted token 2 true
	// stock: 8
}

// Requests sent through Transport carry the fencing headers; WithOpID adds
// an idempotency key.
func ExampleTransport() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.Header.Get(httpguard.HeaderResource), r.Header.Get(httpguard.HeaderToken), r.Header.Get(httpguard.HeaderOpID))
	}))
	defer srv.Close()
	c := &http.Client{Transport: &httpguard.Transport{Lease: lease(7), Resource: "orders/17"}}
	req, _ := http.NewRequestWithContext(httpguard.WithOpID(context.Background(), "op-1"), http.MethodPut, srv.URL, nil)
	resp, err := c.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	// Output:
	// orders/17 7 op-1
}

// signedLease stands in for *client.Lease with a signed token.
type signedLease struct{ st fence.SignedToken }

func (l signedLease) Token() fence.Token             { return l.st.Token }
func (l signedLease) SignedToken() fence.SignedToken { return l.st }

// Signed tokens over HTTP: the middleware is given the cluster's public keys
// (here a test key; in production `fence keys --json`) and Transport sends
// each lease's signed token in Fence-Token. A forged token gets 409
// FORGED_TOKEN before the store or the handler is reached.
func Example_signed() {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	pub := key.Public().(ed25519.PublicKey)
	ks := &fence.KeySet{ClusterID: "prod", Keys: []fence.PublicKey{{ID: fence.KeyIDOf(pub), Key: pub}}}
	var store httpguard.MemoryStore
	stock := map[string]string{}
	svc := httpguard.Middleware(&store, httpguard.Options{KeySet: ks})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, _ := httpguard.FromContext(r.Context())
		body, _ := io.ReadAll(r.Body)
		stock[f.Resource] = string(body)
	}))
	srv := httptest.NewServer(svc)
	defer srv.Close()

	put := func(tok fence.SignedToken, value string) error {
		c := &http.Client{Transport: &httpguard.Transport{Lease: signedLease{tok}, Resource: "sku-42"}}
		resp, err := c.Post(srv.URL, "text/plain", strings.NewReader(value))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return httpguard.ResponseError(resp)
	}
	fmt.Println("B writes 8:", put(fence.Sign(key, "prod", "sku-42", 2), "8"))
	fmt.Println("A writes 5:", put(fence.Sign(key, "prod", "sku-42", 1), "5"))
	err := put(fence.Sign(key, "prod", "sku-7", 3), "0")
	fmt.Println("another lock's proof:", errors.Is(err, fence.ErrForgedToken), err)
	fmt.Println("stock:", stock["sku-42"], "last token:", store.LastToken("sku-42"))
	// Output:
	// B writes 8: <nil>
	// A writes 5: token 1 is older than accepted token 2
	// another lock's proof: true forged token: token 3 for "sku-42": proof does not hold for this lock and token
	// stock: 8 last token: 2
}
