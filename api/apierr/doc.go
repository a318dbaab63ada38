// Package apierr maps Fence refusals to Connect errors and back.
//
// The server turns every refusal into a *connect.Error with a code and one
// fencev1.ErrorDetail carrying the stable reason and the facts (ToConnect);
// the client turns such an error back into the typed refusal of package
// fence (FromConnect), so errors.Is(err, fence.ErrStaleToken) and
// errors.As(err, &*fence.StaleTokenError) work across the wire. The package
// imports neither raft nor the server.
//
// Codes:
//
//	BUSY                        ResourceExhausted (HTTP 429): distinct from fencing
//	                            refusals by code alone; retry later is the remedy
//	RESOURCE_EXHAUSTED          ResourceExhausted (HTTP 429) too: a configured
//	                            limit of the store (waiters, resources, remembered
//	                            ids); told apart from BUSY by the detail's reason
//	STALE_TOKEN, NOT_HOLDER,
//	LEASE_EXPIRED, UNKNOWN_TOKEN FailedPrecondition (HTTP 400)
//	OP_CONFLICT                 AlreadyExists (HTTP 409)
//	INVALID_ARGUMENT            InvalidArgument (HTTP 400)
package apierr
