package state

import (
	"math"
	"time"

	"github.com/fenceworks/fence"
)

// impl is the machine's state. Every field is plain data; nothing here reads
// a clock, does I/O or iterates a map in a way that decides anything.
type impl struct {
	changes    []Change     // made by the command being applied (changes.go)
	spareWork  []*lockEntry // settle's work list array, between uses (settle.go)
	cfg        Config
	configured bool          // an OpConfig was applied (or NewWithConfig): the log records its rules
	clock      int64         // server time, ns: max of every cmd.Now seen
	decided    int64         // decision time, ns: max of every cmd.Now - cmd.Slack, and 0
	maxSlack   time.Duration // largest cmd.Slack applied
	counter    fence.Token   // last token issued
	// keepMin and keepMinUntil hold a lowered MinIDRetention to its old
	// value for the ids accepted under it: until server time keepMinUntil
	// the minimum retention is at least keepMin (see minRetention).
	keepMin      time.Duration
	keepMinUntil int64

	names     nameIndex    // every lock by name, in name order (the only index by name; never snapshotted: nameindex.go)
	deadlines deadlineHeap // locks with something due, by (deadline, name)
	idle      idleLocks    // free locks kept as tombstones, oldest first

	live     map[string]*request         // request_ids queued or holding a lock
	liveBy   map[string]int              // live request_ids each principal will have remembered (setLive)
	requests memory[string, doneRequest] // request_ids whose outcome is final
	ops      memory[opKey, opRecord]     // op_ids of accepted writes and adds

	resources     map[string]*resource
	resourceBytes int64                    // sum of len(value) over resources
	waiting       int                      // queued acquires on all locks
	use           map[string]*principalUse // per principal: what its quotas bound (quota.go; restore recounts it)

	sessions       map[uint64]*session // live sessions by id
	sessionHeap    sessionHeap         // live sessions by (expiresAt, id)
	opens          map[string]*session // live sessions by the RequestID of their open
	sessionCounter uint64              // last session id issued

	auth authState // tokens, roles, enabled (auth.go)

	clusterID string // recorded by the first OpConfig that carried one (clusterid.go)

	keys keyState // signing keys and the cluster ids restored from (keys.go)

	ends    [3]uint64 // leases ended, by leaseEnd (stats.go; not state: snapshots leave it out)
	holders int       // locks with a holder (stats.go; restore counts them)
}

func newMachine(cfg Config, configured bool) *Machine {
	m := &Machine{}
	m.impl = *newImpl(cfg)
	m.configured = configured
	return m
}

func newImpl(cfg Config) *impl {
	return &impl{
		cfg:       cfg,
		names:     newNameIndex(),
		idle:      newIdleLocks(),
		live:      map[string]*request{},
		liveBy:    map[string]int{},
		requests:  newMemory[string, doneRequest](),
		ops:       newMemory[opKey, opRecord](),
		resources: map[string]*resource{},
		sessions:  map[uint64]*session{},
		opens:     map[string]*session{},
	}
}

func (m *impl) now() int64 { return m.clock }

// expiryTime is the decision time: every expiry decision (a lease's end, a
// wait running out, a lock-delay ending, whether a lease is still held) is
// made as of it, never as of clock. It is at most clock and never decreases.
// Grants and renewals start at clock; remaining times reported to clients
// are counted from clock (shorter, so conservative for them).
func (m *impl) expiryTime() int64      { return m.decided }
func (m *impl) lastToken() fence.Token { return m.counter }

// apply advances server time, forgets what retention allows, and runs cmd.
func (m *impl) apply(cmd Command) Result {
	if cmd.Now > m.clock {
		m.clock = cmd.Now
	}
	if cmd.Slack < 0 {
		return Result{Err: fence.Invalid("slack", ">= 0", cmd.Slack.String())}
	}
	m.maxSlack = max(m.maxSlack, cmd.Slack)
	// cmd.Now - cmd.Slack, not clock - cmd.Slack: the slack was measured
	// from this command's own stamp (a command proposed earlier may be
	// applied after a later one). No overflow: Slack >= 0 is checked above.
	if cmd.Now >= math.MinInt64+int64(cmd.Slack) {
		m.decided = max(m.decided, cmd.Now-int64(cmd.Slack))
	}
	m.forget()
	// Sessions due at the decision time end first, so no command sees a
	// session (or a lease bound to one) past its expiry, tick or not.
	var events []Event
	m.settleSessions(&events)
	res := m.sequenced(cmd)
	if len(events) > 0 {
		res.Events = append(events, res.Events...)
	}
	res.Changes, m.changes = m.changes, nil
	return res
}

// dispatch runs cmd (its session, if any, is live).
func (m *impl) dispatch(cmd Command) Result {
	if err := m.checkClusterID(cmd); err != nil {
		return Result{Err: err}
	}
	switch cmd.Op {
	case OpAcquire:
		return m.acquire(cmd)
	case OpRenew:
		return m.renew(cmd)
	case OpRelease:
		return m.release(cmd)
	case OpCancelWait:
		return m.cancelWait(cmd)
	case OpTick:
		return m.tick()
	case OpWrite:
		return m.write(cmd)
	case OpAdd:
		return m.add(cmd)
	case OpBumpToken:
		return m.bumpToken(cmd)
	case OpConfig:
		return m.setConfig(cmd)
	case OpDelete:
		return m.del(cmd)
	case OpSessionOpen:
		return m.openSession(cmd)
	case OpSessionKeepAlive:
		return m.sessionKeepAlive(cmd)
	case OpSessionClose:
		return m.sessionClose(cmd)
	case OpAuthBootstrap:
		return m.authBootstrap(cmd)
	case OpAuthEnable:
		return m.authEnable(cmd)
	case OpTokenCreate:
		return m.tokenCreate(cmd)
	case OpTokenRevoke:
		return m.tokenRevoke(cmd)
	case OpRoleGrant, OpRoleRevoke:
		return m.roleChange(cmd)
	case OpRoleBind:
		return m.roleBind(cmd)
	case OpRoleQuota:
		return m.roleQuota(cmd)
	case OpKeyRotate:
		return m.keyRotate(cmd)
	case OpKeyRetire:
		return m.keyRetire(cmd)
	}
	return Result{Err: fence.Invalid("op", "a known operation (1..23)", itoa(int64(cmd.Op)))}
}

// tick expires everything due at server time and hands freed locks on.
func (m *impl) tick() Result {
	var res Result
	m.settleDue(&res.Events)
	return res
}

// settleDue ends every session and settles every lock with something due
// at the decision time.
func (m *impl) settleDue(events *[]Event) {
	m.settleSessions(events)
	for {
		l, ok := m.deadlines.due(m.expiryTime())
		if !ok {
			return
		}
		m.settle(l, events)
		m.touch(l)
	}
}

// bumpToken raises the token counter so the next grant is >= cmd.Token,
// and the session counter so the next session id is >= cmd.Token: a
// restore must re-issue neither (a client that still holds a session id
// issued after the backup would otherwise act on another client's new
// session of the same id). It never lowers either.
func (m *impl) bumpToken(cmd Command) Result {
	if err := fence.ValidateToken(cmd.Token); err != nil {
		return Result{Err: err}
	}
	if cmd.Token-1 > m.counter {
		m.counter = cmd.Token - 1
	}
	if uint64(cmd.Token-1) > m.sessionCounter {
		m.sessionCounter = uint64(cmd.Token - 1)
	}
	return Result{}
}

// admitToken refuses a grant once the counter has reached the largest token
// (fence.MaxTokenJSONInt, 2^53-1: tokens stay exact in JSON, and a backup's
// header naming a counter above it is refused as corrupt). Only a restore's
// floor (OpBumpToken) can bring the counter near it. Nothing is changed.
func (m *impl) admitToken() error {
	if m.counter >= fence.MaxTokenJSONInt {
		return fence.Exhausted("tokens (the token counter; the largest token is 2^53-1, exact in JSON)",
			"at most "+fence.Token(fence.MaxTokenJSONInt).String(), "last issued "+m.counter.String())
	}
	return nil
}

// nextToken issues the next token of the global counter (admitToken checked
// that there is one).
func (m *impl) nextToken() fence.Token {
	m.counter++
	return m.counter
}
