package cluster_test

import (
	"go/build"
	"strings"
	"testing"
)

// TestClusterImportsNoWireNorAssembly: package cluster speaks domain types
// (fence.Service, NodeStatus, MemberList) and is given the wire as
// functions (RemoteFunc, PeerFunc, JoinFunc); it imports neither the API's
// generated code, nor a client of it, nor what assembles it (server,
// daemon).
func TestClusterImportsNoWireNorAssembly(t *testing.T) {
	pkg, err := build.Import("github.com/fenceworks/fence/cluster", ".", 0)
	if err != nil {
		t.Fatal(err)
	}
	const mod = "github.com/fenceworks/fence/"
	banned := []string{mod + "api/", mod + "server", mod + "daemon", mod + "client", "connectrpc.com/", "google.golang.org/protobuf"}
	for _, imp := range pkg.Imports {
		for _, b := range banned {
			if imp == strings.TrimSuffix(b, "/") || strings.HasPrefix(imp, b) {
				t.Errorf("package cluster imports %s", imp)
			}
		}
	}
}
