//go:build fencesession

package bench

import "github.com/fenceworks/fence/client"

// unaryOptions make a client.Client take the unary path: no session, every
// lease standalone with its own keepalive, one unary call per operation.
var unaryOptions = []client.Option{client.WithoutSession()}
