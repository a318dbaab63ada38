package redisguard

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/proof"
	"github.com/redis/go-redis/v9"
)

// ErrCorrupt: a key under the guard's prefix does not hold what the guard
// wrote (someone else wrote it). The guard refuses to touch it.
var ErrCorrupt = errors.New("redisguard: corrupt guard key")

// Guard fences values kept in Redis. It is safe for concurrent use; every
// method is one round trip running one atomic script (Get: one HMGET).
type Guard struct {
	rdb  redis.UniversalClient
	opts Options
	dur  durability
	keys *proof.Verifier
}

// New returns a Guard over rdb (a *redis.Client, *redis.ClusterClient or
// *redis.Ring). It does not contact Redis: the first write checks the
// server's durability settings (see VerifyDurability; call it yourself to
// fail fast at startup). Invalid Options are refused with a
// *fence.InvalidError, and so is WaitReplicas with a client that cannot
// WAIT on the connection that wrote (a *redis.Ring).
func New(rdb redis.UniversalClient, opts Options) (*Guard, error) {
	if rdb == nil {
		return nil, fence.Invalid("rdb", "a Redis client", "nil")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.WaitReplicas > 0 {
		switch rdb.(type) {
		case *redis.Client, *redis.ClusterClient:
		default:
			return nil, fence.Invalid("wait_replicas", "0 with a "+fmt.Sprintf("%T", rdb)+" (WAIT needs a *redis.Client or *redis.ClusterClient)", strconv.Itoa(o.WaitReplicas))
		}
	}
	keys, err := proof.New(proof.Config{KeySet: o.KeySet, KeySource: o.KeySource, LockFor: o.LockFor, AllowUnsigned: o.AllowUnsigned})
	if err != nil {
		return nil, err
	}
	return &Guard{rdb: rdb, opts: o, keys: keys}, nil
}

// Prefix returns the key prefix in use.
func (g *Guard) Prefix() string { return g.opts.Prefix }

// Result is what an accepted (or replayed) write returns.
type Result struct {
	Token    fence.Token // the last accepted token after the write: the caller's
	Version  int64       // number of Set/Add accepted on the resource, this one included
	Value    []byte      // the resource's value after the write (Check: nil)
	Sum      int64       // Add: the integer value after the addition
	Replayed bool        // the op_id was applied before; nothing was applied now
}

// Set writes value to resource if token is not older than the last token
// accepted there, and records token as the last accepted — one atomic step.
// An older token gets a *fence.StaleTokenError (errors.Is fence.ErrStaleToken)
// carrying both tokens, and nothing changes. A non-empty opID makes the write
// idempotent for Options.OpTTL (see the package doc).
//
// With a key set (Options.KeySet) use SetSigned: the number alone carries
// no proof and is refused with *fence.ForgedTokenError ("no proof") unless
// Options.AllowUnsigned.
func (g *Guard) Set(ctx context.Context, resource string, token fence.Token, value []byte, opID string) (Result, error) {
	return g.SetSigned(ctx, resource, fence.SignedToken{Token: token}, value, opID)
}

// SetSigned is Set for a token with its proof (lease.SignedToken(), or
// fence.ParseSignedToken of its text form). With a key set the proof is
// verified first, in Go: a token whose proof does not hold for the
// resource's lock (Options.LockFor) under a key of the cluster is refused
// with *fence.ForgedTokenError before Redis is touched, so nothing changes.
// Without a key set the proof is not looked at.
func (g *Guard) SetSigned(ctx context.Context, resource string, token fence.SignedToken, value []byte, opID string) (Result, error) {
	if err := fence.ValidateValue(value); err != nil {
		return Result{}, err
	}
	res, err := g.run(ctx, "set", resource, token, string(value), opID)
	if err == nil {
		res.Value = value
	}
	return res, err
}

// Add adds delta to the integer value of resource (a missing value counts
// as 0) under the same rule as Set. A value that is not a decimal int64, or
// a sum that overflows, is refused with a *fence.InvalidError (field
// "value") and nothing changes.
//
// With a key set use AddSigned (see Set).
func (g *Guard) Add(ctx context.Context, resource string, token fence.Token, delta int64, opID string) (Result, error) {
	return g.AddSigned(ctx, resource, fence.SignedToken{Token: token}, delta, opID)
}

// AddSigned is Add for a token with its proof, verified as SetSigned does.
func (g *Guard) AddSigned(ctx context.Context, resource string, token fence.SignedToken, delta int64, opID string) (Result, error) {
	res, err := g.run(ctx, "add", resource, token, strconv.FormatInt(delta, 10), opID)
	if err != nil {
		return res, err
	}
	if res.Sum, err = strconv.ParseInt(string(res.Value), 10, 64); err != nil {
		return Result{}, fmt.Errorf("%w: resource %q value %q", ErrCorrupt, resource, res.Value)
	}
	return res, nil
}

// Check advances the last accepted token of resource to token, or refuses an
// older token with a *fence.StaleTokenError; the value is untouched.
//
// Check is atomic only with what this guard's script writes. A write the
// caller then makes elsewhere is a second step, and another owner with a
// newer token may check in between: that write is not fenced. Use Check as
// an early refusal, or keep the data in the guard with Set and Add.
//
// With a key set use CheckSigned (see Set).
func (g *Guard) Check(ctx context.Context, resource string, token fence.Token) (Result, error) {
	return g.CheckSigned(ctx, resource, fence.SignedToken{Token: token})
}

// CheckSigned is Check for a token with its proof, verified as SetSigned
// does.
func (g *Guard) CheckSigned(ctx context.Context, resource string, token fence.SignedToken) (Result, error) {
	return g.run(ctx, "check", resource, token, "", "")
}

// Verify checks token's proof for resource as SetSigned does, without
// touching Redis: nil when g has no key set.
func (g *Guard) Verify(resource string, token fence.SignedToken) error {
	if err := fence.ValidateToken(token.Token); err != nil {
		return err
	}
	return g.keys.Verify(resource, token)
}

// State is what Get reads.
type State struct {
	Value   []byte
	Token   fence.Token // the last accepted token; 0: never written
	Version int64
}

// Get reads the value, last accepted token and version of resource. A
// resource never written reads as the zero State.
func (g *Guard) Get(ctx context.Context, resource string) (State, error) {
	if err := fence.ValidateName("resource", resource); err != nil {
		return State{}, err
	}
	vals, err := g.rdb.HMGet(ctx, resourceKey(g.opts.Prefix, resource), "value", "token", "version").Result()
	if err != nil {
		return State{}, err
	}
	var st State
	if s, ok := vals[0].(string); ok {
		st.Value = []byte(s)
	}
	if s, ok := vals[1].(string); ok {
		t, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return State{}, fmt.Errorf("%w: resource %q token %q", ErrCorrupt, resource, s)
		}
		st.Token = fence.Token(t)
	}
	if s, ok := vals[2].(string); ok {
		if st.Version, err = strconv.ParseInt(s, 10, 64); err != nil {
			return State{}, fmt.Errorf("%w: resource %q version %q", ErrCorrupt, resource, s)
		}
	}
	return st, nil
}
