package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

func init() { Register(etcdSystem{}) }

// etcdSystem is the normal etcd lock recipe: a concurrency.Mutex on a
// concurrency.Session (a lease kept alive by the client), one
// clientv3.Client (one gRPC connection) per process. The fenced write is a
// transaction guarded by the mutex's IsOwner() comparison.
type etcdSystem struct{}

// maxSessions is the most sessions a client of a session system (etcd,
// fence-session) opens; workers beyond it share them (their lock names
// differ, so their etcd mutex keys do too).
const maxSessions = 64

// sessionTTL is the TTL, in seconds, of every session of etcd and
// fence-session (etcd's own default is 60; a shorter one makes the storm's
// expiry come sooner). The storm's child processes set it.
var sessionTTL = 10

func (etcdSystem) Name() string   { return "etcd" }
func (etcdSystem) Server() string { return "etcd" }
func (etcdSystem) Fenced() bool   { return true }

func (etcdSystem) Open(ctx context.Context, addr string, workers int) (Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: strings.Split(addr, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		MaxCallSendMsgSize: 16 << 20, MaxCallRecvMsgSize: 64 << 20,
	})
	if err != nil {
		return nil, err
	}
	return &etcdClient{cli: cli, workers: workers, sessions: map[int]*concurrency.Session{}}, nil
}

type etcdClient struct {
	cli     *clientv3.Client
	workers int

	mu       sync.Mutex
	sessions map[int]*concurrency.Session
}

func (e *etcdClient) Worker(ctx context.Context, i int) (Worker, error) {
	k := i % maxSessions
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.sessions[k]
	if !ok {
		var err error
		s, err = concurrency.NewSession(e.cli, concurrency.WithTTL(sessionTTL))
		if err != nil {
			return nil, err
		}
		e.sessions[k] = s
	}
	return &etcdWorker{cli: e.cli, s: s}, nil
}

// Queued counts the mutex keys under the prefix: each of the locks has
// one owner key, every other key is a waiter's.
func (e *etcdClient) Queued(ctx context.Context, prefix string, locks int) (int, error) {
	resp, err := e.cli.Get(ctx, "/lock/"+prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return int(resp.Count) - locks, nil
}

func (e *etcdClient) Close() error {
	e.mu.Lock()
	for _, s := range e.sessions {
		_ = s.Close()
	}
	e.mu.Unlock()
	return e.cli.Close()
}

type etcdWorker struct {
	cli *clientv3.Client
	s   *concurrency.Session
}

func (w *etcdWorker) Acquire(ctx context.Context, name string, o AcquireOpts) (Held, error) {
	m := concurrency.NewMutex(w.s, "/lock/"+name)
	var err error
	if o.Wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, o.Wait)
		err = m.Lock(wctx)
		cancel()
	} else {
		err = m.TryLock(ctx)
	}
	if err != nil {
		return nil, err
	}
	return &etcdHeld{cli: w.cli, m: m}, nil
}

// Expire orphans the session (its keepalive stops, the lease is not
// revoked) and returns when its lease's TTL ends, as the server reports it.
func (w *etcdWorker) Expire(ctx context.Context) (time.Time, error) {
	w.s.Orphan()
	resp, err := w.cli.TimeToLive(ctx, w.s.Lease())
	if err != nil {
		return time.Time{}, err
	}
	return time.Now().Add(time.Duration(resp.TTL) * time.Second), nil
}

func (w *etcdWorker) Close() error { return nil }

type etcdHeld struct {
	cli *clientv3.Client
	m   *concurrency.Mutex
}

var errNotOwner = errors.New("etcd: guarded write refused: not the mutex owner")

// Write is a transaction that puts val under key only while the mutex's
// key is still the oldest (IsOwner).
func (h *etcdHeld) Write(ctx context.Context, key string, val []byte) error {
	resp, err := h.cli.Txn(ctx).If(h.m.IsOwner()).Then(clientv3.OpPut("/data/"+key, string(val))).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w (%s)", errNotOwner, key)
	}
	return nil
}

func (h *etcdHeld) Release(ctx context.Context) error { return h.m.Unlock(ctx) }
