// Package redisguard makes a Redis-held value refuse writes from an owner
// that is no longer current: the fencing-token check for data kept in Redis.
//
// Every write carries the writer's fencing token. One Lua script — loaded
// once, run by EVALSHA (EVAL only when the server's script cache lost it) —
// compares that token with the last token accepted for the resource, and
// writes the value and the token together, in one atomic step on the Redis
// server. An older token is refused with a [*fence.StaleTokenError] naming
// both tokens; an equal token is accepted (the current owner writes again).
// Nothing is read by the client and written back later, so no other owner can
// slip in between the compare and the write.
//
// # Signed tokens
//
// With Options.KeySet (the Fence cluster's public keys, `fence keys --json`)
// SetSigned, AddSigned and CheckSigned verify the token's proof in Go before
// the script runs: a token without a proof, or whose proof does not hold for
// the resource's lock (Options.LockFor) under a key of the cluster, is
// refused with *fence.ForgedTokenError and Redis is not touched. Without a
// key set any number is compared; Above and Lower (and `fence guard
// repair`) lower a token Fence never issued. See docs/guards.md.
//
// # Keys
//
// For Options.Prefix P (n = len(P), in decimal) and resource R the guard uses:
//
//	{n:P:R}                 hash: value, token, version  (no TTL unless Options.KeyTTL)
//	{n:P:R}:op:<hex op_id>  string: the saved result of one op_id (expires after Options.OpTTL)
//
// The length makes the encoding injective: prefix "a" with resource "x:R"
// and prefix "a:x" with resource "R" are different keys. Both keys of a
// resource share the hash tag, so they live in one Redis Cluster slot and
// the script may touch both. The op_id is hex-encoded and P may not contain
// braces or glob characters, so no two (prefix, resource, op_id) ever share
// a key; KeyPattern(P) matches exactly P's keys. The prefix belongs to the
// guard: keep other data out of it. Keys of the earlier layout {P:R} are not
// read (see docs/guards.md for the migration).
//
// # Durability
//
// A guard that forgets a token accepts the stale writer it exists to
// refuse. The first write of a Guard (or Guard.VerifyDurability) reads
// CONFIG GET appendonly, appendfsync and maxmemory-policy on every node and
// refuses with a [*DurabilityError] unless they are appendonly yes,
// appendfsync always and noeviction (or volatile-* when Options.KeyTTL is
// 0), or when CONFIG is renamed or forbidden and the settings cannot be
// read. Options.AcceptVolatile writes anyway, after one loud logged warning.
// Options.WaitReplicas makes every accepted write WAIT for that many
// replicas; fewer within Options.WaitTimeout give a [*ReplicationError]
// (applied on the master, retry with the same op_id).
//
// # Idempotency
//
// A write with an op_id is remembered for OpTTL (default 24h). A repeat of
// the same op_id returns the saved result, with Result.Replayed set, and does
// not apply again — even if a newer token has been accepted since (the replay
// check comes before the token check, as in the Fence server's own store). The
// same op_id with a different operation, token or payload is refused with a
// [*fence.OpConflictError]. After OpTTL the op_id is forgotten and a repeat
// would apply again: choose OpTTL longer than any client retries.
//
// # Limits
//
// [Guard.Check] advances only the token, for users who keep the value
// elsewhere; it is atomic only with what this script writes. A value written
// to another store after Check returns is NOT fenced: another owner may check
// a newer token between the two steps. Use Check only as an early refusal, or
// keep the value in the guard with [Guard.Set] and [Guard.Add].
//
// [MaxToken] scans the prefix: it is O(number of keys under the prefix) and
// meant for operators (the floor of a restore), not for the request path.
package redisguard
