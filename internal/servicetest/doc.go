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
// the two. An implementation added later (the leader forwarder) runs the
// same table.
package servicetest
