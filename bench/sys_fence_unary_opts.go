//go:build !fencesession

package bench

import "github.com/fenceworks/fence/client"

// unaryOptions make a client.Client take the unary path. Before the session
// API, every Client did.
var unaryOptions []client.Option
