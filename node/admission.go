package node

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// ErrNotAdmitted is the answer to a raft RPC (a leader's AppendEntries or
// InstallSnapshot, a candidate's RequestVote) that a node waiting to be
// added refuses: no leader has told it that it adds it (Config.AdmitOnAdd,
// Node.Admit).
var ErrNotAdmitted = errors.New("node: this node started with an empty data dir and waits to be added: no leader said it adds it, so it answers no raft RPC (a member whose data dir was lost? remove it first: fence members remove ID)")

// admissionTransport is the raft transport of a node that started empty
// with Config.AdmitOnAdd: until admit, it answers every RPC from another
// node with ErrNotAdmitted, so raft neither saves a term nor stores an
// entry. A leader that still lists this node's id as a voter (its data dir
// was lost, and it was started again empty under its old id and address)
// reaches it at its address by itself, without adding it; answered, it
// would make an empty voter of it, one that forgot its log and its votes,
// and write a term into its new log (after which a --peers start passed
// every check). A leader about to add this node asks it first (cluster's
// NodeStatus with adding), which admits it.
type admissionTransport struct {
	raft.Transport
	log      *slog.Logger
	admitted atomic.Bool
	consumer chan raft.RPC
	done     chan struct{}
	closed   sync.Once

	mu      sync.Mutex
	lastLog time.Time
	refused int
}

// admissionInner is what the wrapped transport must be (raft's
// NetworkTransport is): the wrapper says it supports pre-vote and Close.
type admissionInner interface {
	raft.Transport
	raft.WithPreVote
	raft.WithClose
}

func newAdmissionTransport(inner raft.Transport, log *slog.Logger) (*admissionTransport, error) {
	if _, ok := inner.(admissionInner); !ok {
		return nil, fmt.Errorf("node: admission: transport %T lacks pre-vote or Close", inner)
	}
	t := &admissionTransport{Transport: inner, log: log, consumer: make(chan raft.RPC), done: make(chan struct{})}
	go t.forward()
	return t, nil
}

// admit lets every later RPC through.
func (t *admissionTransport) admit() {
	if !t.admitted.Swap(true) {
		t.log.Info("a leader adds this node: answering raft RPCs")
	}
}

// forward hands the inner transport's RPCs to raft once admitted, and
// refuses them before.
func (t *admissionTransport) forward() {
	in := t.Transport.Consumer()
	for {
		select {
		case <-t.done:
			return
		case rpc := <-in:
			if !t.pass(rpc) {
				continue
			}
			select {
			case t.consumer <- rpc:
			case <-t.done:
				rpc.Respond(nil, raft.ErrTransportShutdown)
				return
			}
		}
	}
}

// pass reports whether rpc goes to raft, and refuses it if not.
func (t *admissionTransport) pass(rpc raft.RPC) bool {
	if t.admitted.Load() {
		return true
	}
	rpc.Respond(nil, ErrNotAdmitted)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refused++
	if now := time.Now(); now.Sub(t.lastLog) >= time.Second {
		t.log.Warn("refused raft RPCs: this node started with an empty data dir and no leader said it adds it; "+
			"a leader that lists this node's id reaches it by itself if its data dir was lost (an empty voter would forget its log and votes): "+
			"remove the member (fence members remove ID), then start it with --join",
			"rpc", fmt.Sprintf("%T", rpc.Command), "refused", t.refused)
		t.refused, t.lastLog = 0, now
	}
	return false
}

func (t *admissionTransport) Consumer() <-chan raft.RPC { return t.consumer }

// SetHeartbeatHandler passes raft's fast path for heartbeats through the
// same gate (a heartbeat carries the leader's term, which raft saves).
func (t *admissionTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	if cb == nil {
		t.Transport.SetHeartbeatHandler(nil)
		return
	}
	t.Transport.SetHeartbeatHandler(func(rpc raft.RPC) {
		if t.pass(rpc) {
			cb(rpc)
		}
	})
}

func (t *admissionTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.Transport.(raft.WithPreVote).RequestPreVote(id, target, args, resp)
}

func (t *admissionTransport) Close() error {
	t.closed.Do(func() { close(t.done) })
	return t.Transport.(raft.WithClose).Close()
}

// Admit lets a node that started empty with Config.AdmitOnAdd answer raft
// RPCs: a leader is adding it. (No-op otherwise.)
func (n *Node) Admit() {
	if n.admission != nil {
		n.admission.admit()
	}
}
