package cluster

import (
	"fmt"
	"strings"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/node"
)

// ParsePeers parses a static cluster's voters, --peers
// "ID=HOST:PORT,ID=HOST:PORT,...": each id (ValidateID) and each raft
// address (ValidateRaftAddr) once. field names the flag in errors.
func ParsePeers(field, s string) ([]node.Peer, error) {
	var peers []node.Peer
	ids, addrs := map[string]bool{}, map[string]bool{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		id, addr, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fence.Invalid(field, "a comma-separated list of ID=HOST:PORT", item)
		}
		if err := ValidateID(field+" id", id); err != nil {
			return nil, err
		}
		if err := ValidateRaftAddr(field+" address of "+id, addr); err != nil {
			return nil, err
		}
		if ids[id] {
			return nil, fmt.Errorf("%s names %s twice", field, id)
		}
		if addrs[addr] {
			return nil, fmt.Errorf("%s gives two members the address %s", field, addr)
		}
		ids[id], addrs[addr] = true, true
		peers = append(peers, node.Peer{ID: id, Addr: addr})
	}
	return peers, nil
}
