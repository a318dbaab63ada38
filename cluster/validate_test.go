package cluster

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/node"
)

func TestValidateID(t *testing.T) {
	for _, id := range []string{"fence-1", "a", "node_2.dc1", strings.Repeat("x", 128)} {
		if err := ValidateID("id", id); err != nil {
			t.Errorf("ValidateID(%q) = %v, want ok", id, err)
		}
	}
	for _, id := range []string{"", "a b", "a,b", "a=b", "a\tb", "a\x00", strings.Repeat("x", 129), "\xff"} {
		err := ValidateID("--node-id", id)
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != "--node-id" {
			t.Errorf("ValidateID(%q) = %v, want an InvalidError naming --node-id", id, err)
		}
	}
}

func TestValidateRaftAddr(t *testing.T) {
	for _, a := range []string{"127.0.0.1:7000", "[::1]:1", "node-1.example:65535"} {
		if err := ValidateRaftAddr("raft_addr", a); err != nil {
			t.Errorf("ValidateRaftAddr(%q) = %v, want ok", a, err)
		}
	}
	// Other nodes dial this address: no unspecified host, a real port.
	for _, a := range []string{"", "127.0.0.1", ":7000", "0.0.0.0:7000", "[::]:7000", "h:0", "h:65536", "h:x", "h:-1"} {
		err := ValidateRaftAddr("raft_addr", a)
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != "raft_addr" {
			t.Errorf("ValidateRaftAddr(%q) = %v, want an InvalidError naming raft_addr", a, err)
		}
	}
}

func TestParsePeers(t *testing.T) {
	got, err := ParsePeers("--peers", "a=127.0.0.1:1, b=127.0.0.1:2,c=h:3")
	want := []node.Peer{{ID: "a", Addr: "127.0.0.1:1"}, {ID: "b", Addr: "127.0.0.1:2"}, {ID: "c", Addr: "h:3"}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParsePeers = %v, %v; want %v", got, err, want)
	}
	for in, msg := range map[string]string{
		"":                           "ID=HOST:PORT",
		"a":                          "ID=HOST:PORT",
		"a=127.0.0.1:1,":             "ID=HOST:PORT",
		"=127.0.0.1:1":               "--peers id",
		"a=127.0.0.1":                "--peers address of a",
		"a=0.0.0.0:1":                "--peers address of a",
		"a=h:1,a=h:2":                "names a twice",
		"a=h:1,b=h:1":                "two members the address h:1",
		"a b=h:1":                    "--peers id",
		"a=h:1,b=h:2,c=h:3,a=h:4,x=": "names a twice",
	} {
		if _, err := ParsePeers("--peers", in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParsePeers(%q) = %v, want an error with %q", in, err, msg)
		}
	}
}

func TestParseJoinURLs(t *testing.T) {
	got, err := ParseJoinURLs("--join", "http://127.0.0.1:7420/, https://h:1,http://127.0.0.1:7420")
	if want := []string{"http://127.0.0.1:7420", "https://h:1"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParseJoinURLs = %v, %v; want %v (trailing slash dropped, duplicates once)", got, err, want)
	}
	for _, in := range []string{"", "127.0.0.1:7420", "ftp://h:1", "http://", "http://h:1/path", "http://h:1,", "http://h:1?x=1"} {
		var inv *fence.InvalidError
		if _, err := ParseJoinURLs("--join", in); !errors.As(err, &inv) || inv.Field != "--join" {
			t.Errorf("ParseJoinURLs(%q) = %v, want an InvalidError naming --join", in, err)
		}
	}
}
