package client_test

import (
	"context"
	"fmt"

	"github.com/fenceworks/fence/client"
)

// A client of a three-node cluster is given every node; any of them serves
// every call (a follower passes it on to the leader). The client stays on
// the node that works and moves to the next when it fails; its retries and
// its session's resends carry the same ids and seqs, so a failover applies
// nothing twice.
func ExampleWithEndpoints() {
	c, err := client.New("http://10.0.0.1:7420,http://10.0.0.2:7420",
		client.WithEndpoints("http://10.0.0.3:7420")) // or all three in the comma list
	if err != nil {
		panic(err)
	}
	defer c.Close()
	fmt.Println(c.Endpoints())

	lease, err := c.Acquire(context.Background(), "jobs/nightly")
	if err != nil {
		return // the cluster could not be reached within the context
	}
	defer lease.Release(context.Background())
}
