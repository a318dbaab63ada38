package httpguard

import (
	"context"
	"sync"

	"github.com/fenceworks/fence"
)

// MemoryStore is a Store for a single process: the last accepted token of
// each resource lives in memory, and a per-resource lock is held from Begin
// until Commit or Rollback, so requests on one resource run their check and
// handler one at a time. It is atomic only within this process, and it
// forgets every token on restart — a stale writer is then accepted once.
// Use it for a single-process service whose data lives in the same process
// (and is lost with it), or in tests. It keeps one small entry per resource
// ever seen. The zero value is ready to use.
type MemoryStore struct {
	mu        sync.Mutex
	resources map[string]*memResource
}

type memResource struct {
	turn chan struct{} // holds one value while a Tx on the resource is open
	last fence.Token   // guarded by MemoryStore.mu
}

// Begin waits for the resource's lock (or ctx), then checks token.
func (s *MemoryStore) Begin(ctx context.Context, resource string, token fence.Token) (Tx, error) {
	if err := fence.ValidateName("resource", resource); err != nil {
		return nil, err
	}
	if err := fence.ValidateToken(token); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.resources == nil {
		s.resources = make(map[string]*memResource)
	}
	res := s.resources[resource]
	if res == nil {
		res = &memResource{turn: make(chan struct{}, 1)}
		s.resources[resource] = res
	}
	s.mu.Unlock()
	select {
	case res.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	last := res.last
	s.mu.Unlock()
	if token < last {
		<-res.turn
		return nil, &fence.StaleTokenError{Resource: resource, Token: token, LastAccepted: last}
	}
	return &memTx{store: s, res: res, token: token}, nil
}

// LastToken returns the last token committed for resource (0: none).
func (s *MemoryStore) LastToken(resource string) fence.Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	if res := s.resources[resource]; res != nil {
		return res.last
	}
	return 0
}

// MaxToken returns the largest token committed for any resource.
func (s *MemoryStore) MaxToken() fence.Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	var max fence.Token
	for _, res := range s.resources {
		if res.last > max {
			max = res.last
		}
	}
	return max
}

type memTx struct {
	store *MemoryStore
	res   *memResource
	token fence.Token
	once  sync.Once
}

func (tx *memTx) end(commit bool) error {
	err := ErrTxDone
	tx.once.Do(func() {
		if commit {
			tx.store.mu.Lock()
			if tx.token > tx.res.last {
				tx.res.last = tx.token
			}
			tx.store.mu.Unlock()
		}
		<-tx.res.turn
		err = nil
	})
	return err
}

// Commit records the token as the last accepted and releases the resource.
func (tx *memTx) Commit(context.Context) error { return tx.end(true) }

// Rollback releases the resource without recording the token.
func (tx *memTx) Rollback(context.Context) error { return tx.end(false) }
