// Package reqcheck holds the checks of a request that the server (package
// server, on proto requests) and the local node (node.Node.Service, on
// fence requests given to it directly) make alike, before anything is
// proposed, and that the state machine does not make in the same words: a
// SessionRef's shape, the session a KeepAlive or Close must name, and the
// ttl an acquire without a session must set. One copy, so the two refuse
// the same request with the same field and bound (internal/servicetest
// compares them).
package reqcheck
