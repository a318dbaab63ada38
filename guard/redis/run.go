package redisguard

import (
	"context"
	"fmt"

	"github.com/fenceworks/fence"
	"github.com/redis/go-redis/v9"
)

// run validates the arguments, runs the guard script and maps its reply.
// A token whose proof the guard's key set refuses never reaches Redis.
func (g *Guard) run(ctx context.Context, mode, resource string, signed fence.SignedToken, payload, opID string) (Result, error) {
	token := signed.Token
	if err := fence.ValidateName("resource", resource); err != nil {
		return Result{}, err
	}
	if err := fence.ValidateToken(token); err != nil {
		return Result{}, err
	}
	if err := fence.ValidateID("op_id", opID); err != nil {
		return Result{}, err
	}
	if err := g.keys.Verify(resource, signed); err != nil {
		return Result{}, err
	}
	if err := g.VerifyDurability(ctx); err != nil {
		return Result{}, err
	}
	keys := []string{resourceKey(g.opts.Prefix, resource)}
	if opID != "" {
		keys = append(keys, opKey(g.opts.Prefix, resource, opID))
	}
	args := []any{mode, uint64(token), payload, g.opts.OpTTL.Milliseconds(), g.opts.KeyTTL.Milliseconds()}
	if g.opts.WaitReplicas > 0 {
		return g.runAndWait(ctx, keys, args, resource, token, opID)
	}
	reply, err := guardScript.Run(ctx, g.rdb, keys, args...).Slice()
	if err != nil {
		return Result{}, err
	}
	return parseReply(reply, resource, token, opID)
}

// runAndWait runs the script and, if it accepted or replayed, WAITs on the
// same connection (WAIT counts the acknowledgements of the writes made by
// its own connection) for Options.WaitReplicas replicas.
func (g *Guard) runAndWait(ctx context.Context, keys []string, args []any, resource string, token fence.Token, opID string) (Result, error) {
	var client *redis.Client
	switch c := g.rdb.(type) {
	case *redis.Client:
		client = c
	case *redis.ClusterClient:
		var err error
		if client, err = c.MasterForKey(ctx, keys[0]); err != nil {
			return Result{}, err
		}
	default: // New refuses WaitReplicas with other clients
		return Result{}, fmt.Errorf("redisguard: cannot WAIT through a %T", g.rdb)
	}
	conn := client.Conn()
	defer conn.Close()
	reply, err := guardScript.Run(ctx, conn, keys, args...).Slice()
	if err != nil {
		return Result{}, err
	}
	res, err := parseReply(reply, resource, token, opID)
	if err != nil {
		return res, err
	}
	acked, err := conn.Wait(ctx, g.opts.WaitReplicas, g.opts.WaitTimeout).Result()
	if err != nil {
		return res, &ReplicationError{Want: g.opts.WaitReplicas, Got: -1, Result: res, Err: err}
	}
	if int(acked) < g.opts.WaitReplicas {
		return res, &ReplicationError{Want: g.opts.WaitReplicas, Got: int(acked), Result: res}
	}
	return res, nil
}

// parseReply turns the script's reply into a Result or a typed error.
func parseReply(reply []any, resource string, token fence.Token, opID string) (Result, error) {
	bad := fmt.Errorf("redisguard: unexpected script reply %v", reply)
	if len(reply) == 0 {
		return Result{}, bad
	}
	kind, _ := reply[0].(string)
	str := func(i int) string {
		if i < len(reply) {
			s, _ := reply[i].(string)
			return s
		}
		return ""
	}
	num := func(i int) (int64, bool) {
		if i < len(reply) {
			n, ok := reply[i].(int64)
			return n, ok
		}
		return 0, false
	}
	switch kind {
	case "OK":
		t, ok1 := num(1)
		v, ok2 := num(2)
		r, ok3 := num(4)
		if !ok1 || !ok2 || !ok3 || len(reply) != 5 {
			return Result{}, bad
		}
		res := Result{Token: fence.Token(t), Version: v, Replayed: r == 1}
		if s := str(3); s != "" {
			res.Value = []byte(s)
		}
		return res, nil
	case "STALE":
		last, ok := num(1)
		if !ok {
			return Result{}, bad
		}
		return Result{}, &fence.StaleTokenError{Resource: resource, Token: token, LastAccepted: fence.Token(last)}
	case "CONFLICT":
		return Result{}, &fence.OpConflictError{Field: "op_id", ID: opID}
	case "INVALID":
		return Result{}, fence.Invalid(str(1), str(2), "")
	case "NOT_INTEGER":
		return Result{}, fence.Invalid("value", "a decimal int64 that the delta does not overflow", "("+str(1)+")")
	case "CORRUPT":
		return Result{}, fmt.Errorf("%w: resource %q: %s", ErrCorrupt, resource, str(1))
	}
	return Result{}, bad
}
