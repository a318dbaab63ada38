// Package httpguard fences HTTP services: a service that accepts writes over
// HTTP refuses a request from an owner that is no longer current, and a
// client sends its fencing token with every request.
//
// # Headers
//
//	Fence-Token:    the writer's signed token, <token>.<cluster id>.<key id>.<signature>,
//	                or a bare decimal token in [1, 2^53-1] (required)
//	Fence-Resource: the fenced resource, 1..512 bytes of UTF-8 (required)
//	Fence-Op-Id:    an idempotency key, at most 256 bytes (optional; see Idempotency)
//
// # Server
//
// [Middleware] reads the headers, refuses missing or malformed ones with
// 400 Bad Request and a JSON body naming the header, and begins a guard
// transaction with [Store.Begin], which checks the token. A stale token gets
// 409 Conflict with both tokens:
//
//	{"reason":"STALE_TOKEN","resource":"sku-42","token":1,"last_accepted":2,
//	 "message":"token 1 is older than accepted token 2"}
//
// The check and the handler's write must be one atomic step — a check
// followed by a separate write is exactly the race fencing exists to close.
// So the middleware does not just check: it hands the open transaction to the
// handler through the request context ([FromContext]), buffers the
// handler's response (at most Options.MaxBuffer bytes; more rolls back and
// answers 500), and commits only if the handler answered 2xx (rolling back
// on any other status or a panic; 1xx answers such as 103 Early Hints are
// passed on and are not final). The client sees nothing of the answer
// before the commit — Flush does not send it early; a failed commit becomes
// a 500, or a 503 with Retry-After when the store reports a
// [RetryableError] (a serialization failure or deadlock). The handler must
// do its write inside that transaction, on the resource the request names.
//
// Which stores make this atomic:
//
//   - httpguard/pgstore (PostgreSQL): atomic across processes and hosts. The
//     guard row stays locked until commit, and the handler writes its data in
//     the same pgx.Tx.
//   - httpguard/sqlitestore (SQLite): atomic across processes on one host
//     sharing the database file: the handler writes in the same *sql.Tx.
//   - [MemoryStore]: atomic within one process only. It holds a per-resource
//     mutex from the check until the handler returns and keeps the last tokens
//     in memory (lost on restart). Use it for a single-process service whose
//     data lives in that process, or in tests.
//
// Redis cannot hold a transaction open across a handler, so there is no
// Redis Store: a service keeping its data in Redis should write through
// guard/redis (Set/Add), which checks and writes in one script.
//
// # Idempotency
//
// With a Fence-Op-Id and an [OpStore] (pgstore, sqlitestore and
// [MemoryStore] are), the middleware remembers the committed answer of the
// request and replays it, marked Fence-Replayed: true, to a retry — without
// running the handler, and even if a newer token was accepted in between:
// the op lookup decides before the token check, as in the guards' Do and
// guard/redis. The same op_id with another method, URI or body is refused
// with 409 OP_CONFLICT. The request body is read whole for that comparison,
// at most Options.MaxBody bytes (413 beyond).
//
// Not solved here (see docs/guards.md): permissions (any client can send any
// header — authenticate first), and an external API the handler calls, which
// no transaction can roll back.
//
// # Client
//
// [Transport] is an http.RoundTripper that adds Fence-Token and
// Fence-Resource from a lease (anything with Token() fence.Token, such as
// *client.Lease; a [SignedTokenSource] sends its signed token) to every
// request, and Fence-Op-Id from [WithOpID]. [ResponseError] turns a 409 or
// 400 answer back into a *fence.StaleTokenError, *fence.ForgedTokenError or
// *fence.InvalidError.
//
// # Signed tokens
//
// With Options.KeySet (the cluster's public keys, `fence keys --json`) the
// middleware verifies the proof of Fence-Token for the resource's lock
// (Options.LockFor) before it begins the store's transaction: a forged,
// tampered, foreign or unsigned token gets 409 FORGED_TOKEN and nothing is
// touched. Without a key set any number is compared (docs/guards.md).
package httpguard
