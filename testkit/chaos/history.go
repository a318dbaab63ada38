package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
)

// Kind is the kind of a logical operation.
type Kind string

const (
	KindAcquire Kind = "acquire" // Lock; Token granted on OutcomeOK
	KindRelease Kind = "release" // Lock, Token; HeldFrom/HeldUntil: the worker's hold
	KindRead    Kind = "read"    // Store, Resource; Result* on OutcomeOK
	KindWrite   Kind = "write"   // Store, Resource, Token, Value (the value written)
	KindAdd     Kind = "add"     // Store, Resource, Token, Value (the delta), OpID
	// KindFinal is the harness's read of a resource after every worker has
	// stopped and every fault is healed: the state the checkers explain.
	KindFinal Kind = "final"
	// KindForge is one write of the forger (forger.go) at the PostgreSQL
	// guard: Forge names what it sent, Token the number, Before and After
	// the stored tokens around it. Only the forgery checker reads them.
	KindForge Kind = "forge"
	// KindHolders is a worker's look at one lock (client.Get): Lock; on
	// OutcomeOK, Holders (every lease holding it at that instant) and
	// Permits (the lock's permit count, 0: not a semaphore).
	KindHolders Kind = "holders"
)

// ModeShared is Op.Mode and LockRef.Mode of a shared hold ("" is
// exclusive).
const ModeShared = "shared"

// LockRef is one lock of a set (Op.Set: as requested, sorted by name;
// Op.Granted: as the granted lease lists it) or one holder of a lock
// (Op.Holders).
type LockRef struct {
	Name    string `json:"name,omitempty"`
	Mode    string `json:"mode,omitempty"`    // ModeShared, or "" for exclusive
	Permits uint32 `json:"permits,omitempty"` // the lock's permit count (0: not a semaphore)
	// Proof (Granted only): the token of the lease's proof for this lock
	// (Lease.ProofFor); 0: the lease has none for it.
	Proof uint64 `json:"proof,omitempty"`
	// Token (Holders only): the holder's token.
	Token uint64 `json:"token,omitempty"`
}

// Outcome is what the caller learned of an operation.
type Outcome string

const (
	OutcomeOK Outcome = "ok" // applied (or, for a replayed op_id/seq, applied before)
	// OutcomeStale: refused as stale (the store's last token is newer, or the
	// lease is no longer held): definitely not applied.
	OutcomeStale Outcome = "stale"
	// OutcomeFail: refused for another definite reason (a try-acquire found
	// the lock held, a wait timed out, invalid argument): not applied.
	OutcomeFail Outcome = "fail"
	// OutcomeUnknown: no definite answer (timeout, lost connection, session
	// expired with the request in flight, the worker stopped): it may or may
	// not have been applied, at any time after Call. Return is 0.
	OutcomeUnknown Outcome = "unknown"
)

// Store names where a resource lives.
const (
	StoreFence    = "fence"    // the server's built-in fenced store
	StorePostgres = "postgres" // a PostgreSQL table behind guard/postgres
)

// Op is one logical operation of a worker: every attempt of it, from the
// first call to the last reply (a retry with the same op_id, seq or
// request_id is the same logical operation). Times are Unix nanoseconds on
// the host's wall clock, which every process on this machine shares.
type Op struct {
	Worker int    `json:"w"` // worker number (the harness is -1)
	N      int    `json:"n"` // the worker's operation counter
	Kind   Kind   `json:"kind"`
	Store  string `json:"store,omitempty"` // read, write, add, final
	Lock   string `json:"lock,omitempty"`  // acquire, release, holders (a set's: its first lock by name)
	// Mode and Permits (acquire, release of one lock): how it is held:
	// ModeShared or "" (exclusive), and the permit count asked for (0:
	// not a semaphore). Holders: Permits is the lock's count.
	Mode    string `json:"mode,omitempty"`
	Permits uint32 `json:"permits,omitempty"`
	// Set (acquire, release of a set): every lock of the set, sorted by
	// name, each with its mode and permits; one token holds them all.
	// Granted (an OK acquire of a set): the locks the granted lease
	// lists, with the token of its proof for each. Holders (holders):
	// every lease that holds Lock, with its token and mode.
	Set     []LockRef `json:"set,omitempty"`
	Granted []LockRef `json:"granted,omitempty"`
	Holders []LockRef `json:"holders,omitempty"`
	Res     string    `json:"res,omitempty"`     // read, write, add, final
	Session bool      `json:"session,omitempty"` // made on the client's session
	// Fenced is false for the control run's plain writes (no token compare).
	Fenced   bool    `json:"fenced,omitempty"`
	Token    uint64  `json:"token,omitempty"` // sent (write, add, release) or granted (acquire)
	Value    int64   `json:"value,omitempty"` // write: the value; add: the delta
	OpID     string  `json:"op_id,omitempty"`
	Call     int64   `json:"call"`
	Return   int64   `json:"ret,omitempty"` // 0 when Outcome is unknown
	Out      Outcome `json:"out"`
	Attempts int     `json:"attempts,omitempty"`

	// Results, on OutcomeOK (and LastToken on OutcomeStale when known).
	ResValue  int64  `json:"rv,omitempty"`  // read/final: the value; add: the value after
	LastToken uint64 `json:"rt,omitempty"`  // read/final: the last accepted token; stale: the newer token
	Version   uint64 `json:"ver,omitempty"` // write/add: version after; read/final: version
	Replayed  bool   `json:"replayed,omitempty"`

	// Release only: the interval in which the worker held the lock as far
	// as it could tell: from the grant's reply to the earlier of the release
	// call and the lease's safe deadline (client.Lease.Deadline).
	HeldFrom  int64 `json:"held_from,omitempty"`
	HeldUntil int64 `json:"held_until,omitempty"`

	// CallMono and RetMono are Call and Return on CLOCK_MONOTONIC (ns; one
	// clock for every process on the host, never stepped), recorded by the
	// acquire and release ops for the early-expiry checker (0: not recorded,
	// e.g. a history of an older harness).
	CallMono int64 `json:"cm,omitempty"`
	RetMono  int64 `json:"rm,omitempty"`
	// DeadlineMono (release only) is the lease's safe deadline at the
	// release call, on CLOCK_MONOTONIC: the send time of its last successful
	// grant or renew (a session lease: of its session's last keepalive) plus
	// the remaining TTL the server reported, less the documented drift of 1%
	// (fence.SafeDeadline). The server must not end the lease before it
	// unless it was released. 0: not known (a grant lost before its reply).
	DeadlineMono int64 `json:"dl,omitempty"`

	Err string `json:"err,omitempty"` // the error text of a non-OK outcome
	// Role (backup only): the raft role of the node that took it, as its
	// header says (Leader, Follower, Candidate).
	Role string `json:"role,omitempty"`

	// Reason (write, add, forge): the refusal's reason (FORGED_TOKEN,
	// STALE_TOKEN, ...). Forge only: the kind of token sent (ForgeHonest,
	// ForgeHuge, ...) and the resource's stored tokens read before and
	// after the write.
	Forge  string  `json:"forge,omitempty"`
	Reason string  `json:"reason,omitempty"`
	Before *Stored `json:"before,omitempty"`
	After  *Stored `json:"after,omitempty"`

	// restoredLease (set by the checker, not recorded): a session release
	// after a restore of a lease granted before it (see scopeRestores).
	restoredLease bool
	// setCopy (set by the checker, not recorded): the copy of a set's
	// acquire or release for one of its locks after the first (see
	// newChkHistory): it counts once, as the original.
	setCopy bool
}

// exclusive reports whether o holds its lock alone: not shared, not a
// permit of a semaphore.
func (o *Op) exclusive() bool { return o.Mode != ModeShared && o.Permits == 0 }

// conflicts reports whether holds a and b (of one lock, other tokens) may
// not overlap: either is exclusive, or they name other permit counts (a
// request naming another count is refused). Permit holders of one count
// are counted by the permits checker.
func conflicts(a, b *Op) bool {
	if a.Permits != b.Permits {
		return true
	}
	return a.Permits == 0 && (a.exclusive() || b.exclusive())
}

// Recorder appends ops to a JSONL file, one line each, flushed per line
// so that a worker stopped with SIGKILL loses at most the op in hand.
type Recorder struct {
	mu sync.Mutex
	f  *os.File
	w  *bufio.Writer
}

// NewRecorder creates (truncates) path.
func NewRecorder(path string) (*Recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &Recorder{f: f, w: bufio.NewWriter(f)}, nil
}

// Record writes op as one line.
func (r *Recorder) Record(op Op) error {
	b, err := json.Marshal(op)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.w.Write(append(b, '\n')); err != nil {
		return err
	}
	return r.w.Flush()
}

// Close flushes and closes the file.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.w.Flush(); err != nil {
		r.f.Close()
		return err
	}
	return r.f.Close()
}

// ReadHistory reads JSONL ops from r. A torn last line (a worker killed
// mid-write) is dropped; any other malformed line is an error.
func ReadHistory(r io.Reader) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	var pending error
	for sc.Scan() {
		line++
		if pending != nil {
			return nil, pending
		}
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			pending = fmt.Errorf("history line %d: %w", line, err)
			continue
		}
		ops = append(ops, op)
	}
	return ops, sc.Err()
}

// ReadHistoryFiles reads and merges several histories, sorted by Call.
func ReadHistoryFiles(paths ...string) ([]Op, error) {
	var all []Op
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		ops, err := ReadHistory(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		all = append(all, ops...)
	}
	SortOps(all)
	return all, nil
}

// SortOps orders ops by Call, then worker and counter.
func SortOps(ops []Op) {
	sort.SliceStable(ops, func(i, j int) bool {
		if ops[i].Call != ops[j].Call {
			return ops[i].Call < ops[j].Call
		}
		if ops[i].Worker != ops[j].Worker {
			return ops[i].Worker < ops[j].Worker
		}
		return ops[i].N < ops[j].N
	})
}
