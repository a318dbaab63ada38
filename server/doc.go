// Package server serves the Fence API over HTTP: fence.v1.LockService and
// fence.v1.ResourceService as Connect handlers on one mux (gRPC, gRPC-Web and
// plain JSON or binary POSTs, over HTTP/1.1 and unencrypted HTTP/2), plus
// /healthz, /readyz and /metrics, in front of one node.Node.
//
// Every request is validated before it is proposed (bad input gets
// invalid_argument with a fencev1.ErrorDetail naming the field and the
// bound, and changes nothing); every refusal is mapped by package
// internal/apierr (BUSY is ResourceExhausted; fencing refusals are
// FailedPrecondition; OP_CONFLICT is AlreadyExists); a node that is not the
// leader, or is shutting down, answers Unavailable.
//
// Run is what `fence serve` calls; New, Serve, Handler and Shutdown are the
// lower-level pieces for in-process tests and `fence lab`.
package server
