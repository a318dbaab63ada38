package chaos

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenceworks/fence"
)

// keyCache is the key set a guard of the run verifies with: the cluster's
// public signing keys as GET /v1/keys publishes them, fetched from the
// nodes on demand. Source is the guard's Options.KeySource; Ensure, called
// before a check, fetches the set again when the token names a cluster id
// or key id the cached set does not know (a restore makes a new cluster id
// with the old one in restored_from; a rotation adds a key). A fetch adds
// nothing the cluster does not publish, so a forged token that names a
// foreign cluster or key costs a fetch and is refused all the same.
type keyCache struct {
	urls  []string // the nodes' client URLs, tried in order
	hc    *http.Client
	token string // bearer token ("" without authentication)

	mu  sync.Mutex // one fetch at a time
	cur atomic.Pointer[fence.KeySet]
}

// newKeyCache fetches from urls (comma-separated lists allowed) with tc
// (nil: plaintext) and the bearer token.
func newKeyCache(urls []string, tc *tls.Config, token string) *keyCache {
	var all []string
	for _, u := range urls {
		for _, s := range strings.Split(u, ",") {
			if s = strings.TrimSpace(s); s != "" {
				all = append(all, strings.TrimRight(s, "/"))
			}
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tc != nil {
		tr.TLSClientConfig = tc.Clone()
	}
	return &keyCache{urls: all, hc: &http.Client{Transport: tr, Timeout: time.Second}, token: token}
}

// Source is the guard's KeySource: the cached set, nil before the first
// fetch (the guard then refuses the write).
func (c *keyCache) Source() *fence.KeySet { return c.cur.Load() }

// knows reports whether ks can judge st's proof: its cluster id is the
// set's or one it was restored from, and its key id is one of the set's.
func knows(ks *fence.KeySet, st fence.SignedToken) bool {
	if ks == nil {
		return false
	}
	if !st.Signed() {
		return true // nothing to look up: the guard refuses it by itself
	}
	if st.ClusterID != ks.ClusterID && !slices.Contains(ks.RestoredFrom, st.ClusterID) {
		return false
	}
	return slices.ContainsFunc(ks.Keys, func(k fence.PublicKey) bool { return k.ID == st.KeyID })
}

// Ensure fetches the key set again when the cached one cannot judge st
// (or there is none yet). It tries each node until one's set can, keeping
// the last set it read; an error only when no node answered.
func (c *keyCache) Ensure(ctx context.Context, st fence.SignedToken) error {
	if knows(c.cur.Load(), st) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if knows(c.cur.Load(), st) {
		return nil
	}
	var errs []string
	for _, u := range c.urls {
		ks, err := c.fetch(ctx, u)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		c.cur.Store(ks)
		if knows(ks, st) {
			return nil
		}
	}
	if len(errs) == len(c.urls) {
		return fmt.Errorf("chaos: fetching the key set: %s", strings.Join(errs, "; "))
	}
	return nil
}

func (c *keyCache) fetch(ctx context.Context, base string) (*fence.KeySet, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/keys", nil)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s/v1/keys: %w", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/v1/keys: %s", base, resp.Status)
	}
	ks, err := fence.ParseKeySet(body)
	if err != nil {
		return nil, fmt.Errorf("GET %s/v1/keys: %w", base, err)
	}
	return ks, nil
}
