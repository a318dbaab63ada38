// Package server serves the Fence API over HTTP: fence.v1.LockService,
// fence.v1.ResourceService and fence.v1.SessionService as Connect handlers
// on one mux (gRPC, gRPC-Web and plain JSON or binary POSTs, over HTTP/1.1
// and unencrypted HTTP/2), plus /healthz, /readyz and /metrics, in front of
// one node.Node.
//
// The handlers are written against fence.Service, not the node: each
// validates its request, builds the fence.*Request and calls the Service —
// the node's own (node.Node.Service), or, in cluster mode, the leader
// forwarder (cluster.Forwarder), or what Config.Service makes of the node —
// then maps the answer to the proto reply and the error to its Connect
// code. Health, readiness and metrics read the node's own status (a small
// interface, nodeStatus), whichever Service answers.
//
// Sessions: SessionService.Open, KeepAlive and Close are unary calls like
// the others; the mutating calls (Acquire, Renew, Release, Write, Add,
// Delete) take an optional SessionRef that binds them to a session and,
// with seq, makes them exactly-once (a session-bound acquire may leave ttl
// absent: the lease lives as long as the session). SessionService.Stream
// carries one session's requests and replies over one HTTP/2 stream,
// served concurrently (stream.go has its contract and bounds;
// stream_http.go the HTTP limits it has instead of a unary call's).
//
// Every request is validated before the Service is called (bad input gets
// invalid_argument with a fencev1.ErrorDetail naming the field and the
// bound, and changes nothing); every refusal is mapped by package
// api/apierr (BUSY and RESOURCE_EXHAUSTED are ResourceExhausted, told
// apart by the detail's reason; fencing refusals are FailedPrecondition;
// OP_CONFLICT is AlreadyExists); a node that is not the leader, or is
// shutting down, answers Unavailable, and so does a command whose outcome
// the node does not know (node.ErrUnknownOutcome: the client retries with
// the same id), and any other error of the Service that matches
// fence.ErrUnavailable (a forwarded call whose outcome is unknown).
//
// Limits against slow and greedy clients (limits.go): a connection cap
// (Config.MaxConns), header and whole-request read deadlines that never cut
// a blocking acquire's wait, a write deadline counted from when a reply is
// ready (writes.go), budgets of the large replies (Read, List) held
// until written, per connection and for the server, that a reply waits
// for, and of those being made, for the server (reply_budget.go), a header cap, and a 4 MiB cap on a request
// message (on the wire and once decompressed) refused with invalid_argument
// naming it. A waiting acquire's handler is bounded by its wait plus a
// margin and answers before the client's own deadline; a deadline that
// leaves no more than the reply margin makes it a try (wait.go). A
// malformed Connect-Timeout-Ms or grpc-timeout is refused like any bad
// input (timeout.go), and so is a JSON field the request message does not
// have (jsoncodec.go). A plain JSON call (application/json) is answered by
// its procedure's handler in jsonhandler.go; Connect serves the rest.
//
// Run is what `fence serve` calls; New, Serve, Handler and Shutdown are the
// lower-level pieces for in-process tests and `fence lab`.
package server
