// Package servicetest is the conformance table of fence.Service: one
// sequence of calls (grants, refusals with their facts, retries answered
// from saved results, fenced writes, pages, sessions with seqs, a wait that
// runs out, a wait withdrawn when its caller goes, bad fields, and calls
// after the endpoint went away) run against any implementation, each call's
// answer recorded in a form that does not depend on time.
//
// Run runs the table against one implementation and checks each answer
// against what the table expects; Compare checks that two implementations
// answered every call alike. The tests of this package run it against the
// local node (node.Node.Service) and against the remote client
// (client.NewService) of a real server on a loopback socket, and compare
// the two, and through a follower of a real three-node cluster (the
// leader forwarder, over the raft port) against the local node.
//
// Beside the table: a session stream through a follower and on a single
// node (stream_test.go), and a follower's own node.Service refusing to
// serve (notleader_test.go). cluster_test.go starts the in-process servers
// (real sockets on 127.0.0.1, real raft over TCP).
package servicetest
