package httpguard_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/httpguard"
	"github.com/fenceworks/fence/guard/httpguard/internal/suite"
)

// The signed-token tests against a MemoryStore. Its data row lives in a map
// written under the store's per-resource lock (the suite's signed tests
// never roll a written request back).
func TestMemoryStoreSigned(t *testing.T) {
	var (
		store httpguard.MemoryStore
		mu    sync.Mutex
		data  = map[string]struct {
			value string
			seq   int64
		}{}
	)
	suite.RunSigned(t, suite.Backend{
		Store: &store,
		Write: func(_ *http.Request, resource, value string) (int64, error) {
			mu.Lock()
			defer mu.Unlock()
			d := data[resource]
			d.value, d.seq = value, d.seq+1
			data[resource] = d
			return d.seq, nil
		},
		Read: func(resource string) (string, int64, error) {
			mu.Lock()
			defer mu.Unlock()
			return data[resource].value, data[resource].seq, nil
		},
		LastToken: func(resource string) (fence.Token, error) { return store.LastToken(resource), nil },
	})
}
