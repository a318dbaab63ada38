package httpguard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"time"

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
//
// It is an OpStore: the answers of requests with an op_id are kept in
// memory for OpRetention (default 24h; a resource's expired answers are
// dropped when it is next used with an op_id), and lost on restart too.
// Memory grows with the ops of one retention window: size OpRetention to
// your op rate.
type MemoryStore struct {
	// OpRetention is how long an op's answer is replayed (0: 24h).
	OpRetention time.Duration

	mu        sync.Mutex
	resources map[string]*memResource
}

type memResource struct {
	turn chan struct{}    // holds one value while a Tx on the resource is open
	last fence.Token      // guarded by MemoryStore.mu
	ops  map[string]memOp // op_id → answer; used only by the holder of turn
	// order lists ops by commit time (commits are serialised by turn), so
	// expired answers are dropped from its front.
	order []string
}

type memOp struct {
	hash   [sha256.Size]byte
	answer []byte
	at     time.Time
}

// DefaultOpRetention is MemoryStore.OpRetention when it is 0.
const DefaultOpRetention = 24 * time.Hour

// Begin waits for the resource's lock (or ctx), then checks token.
func (s *MemoryStore) Begin(ctx context.Context, resource string, token fence.Token) (Tx, error) {
	tx, err := s.begin(ctx, resource, token, nil)
	if err != nil {
		return nil, err
	}
	return tx, nil
}

// BeginOp waits for the resource's lock (or ctx), then looks the op up
// (replayed or conflicting, whatever the token) and checks the token.
func (s *MemoryStore) BeginOp(ctx context.Context, op Op) (OpTx, []byte, bool, error) {
	if err := fence.ValidateID("op_id", op.ID); err != nil {
		return nil, nil, false, err
	}
	var saved []byte
	replayed := false
	tx, err := s.begin(ctx, op.Resource, op.Token, func(res *memResource) (stop bool, err error) {
		retention := s.OpRetention
		if retention <= 0 {
			retention = DefaultOpRetention
		}
		now := time.Now()
		for len(res.order) > 0 {
			id := res.order[0]
			if o, ok := res.ops[id]; ok && now.Sub(o.at) <= retention {
				break
			}
			delete(res.ops, id)
			res.order = res.order[1:]
		}
		o, found := res.ops[op.ID]
		if !found {
			return false, nil
		}
		if o.hash != sha256.Sum256(op.Payload) {
			return true, &fence.OpConflictError{Field: "op_id", ID: op.ID}
		}
		saved, replayed = o.answer, true
		return true, nil
	})
	if err != nil || replayed {
		return nil, saved, replayed, err
	}
	tx.opID, tx.hash = op.ID, sha256.Sum256(op.Payload)
	return tx, nil, false, nil
}

// begin takes the resource's lock, runs lookup (if any; stop ends the
// transaction there), then checks token.
func (s *MemoryStore) begin(ctx context.Context, resource string, token fence.Token, lookup func(*memResource) (stop bool, err error)) (*memTx, error) {
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
	if lookup != nil {
		if stop, err := lookup(res); stop || err != nil {
			<-res.turn
			return nil, err
		}
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
	// an op's
	opID   string
	hash   [sha256.Size]byte
	answer []byte
	saved  bool
}

// SaveOp keeps the op's answer, remembered if the transaction commits.
func (tx *memTx) SaveOp(_ context.Context, answer []byte) error {
	if tx.opID == "" {
		return errors.New("httpguard: SaveOp on a transaction begun without an op")
	}
	tx.answer, tx.saved = bytes.Clone(answer), true
	return nil
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
			if tx.saved {
				if tx.res.ops == nil {
					tx.res.ops = make(map[string]memOp)
				}
				tx.res.ops[tx.opID] = memOp{hash: tx.hash, answer: tx.answer, at: time.Now()}
				tx.res.order = append(tx.res.order, tx.opID)
			}
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
