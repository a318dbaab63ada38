//go:build e2e

package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/fenceworks/fence/testkit/testutil"
)

// fence serve with its raft port on every interface and no peer TLS
// exits at once naming --raft-addr, the address and --insecure-listen;
// with --insecure-listen it serves, logs the exposure as an error, and
// fence status (text and --json) shows it.
func TestProcessServeRefusesInsecureListen(t *testing.T) {
	port := testutil.FreeAddr(t)[len("127.0.0.1:"):]
	args := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--node-id", "n1",
		"--raft-addr", "0.0.0.0:" + port, "--raft-advertise", "127.0.0.1:" + port, "--bootstrap"}
	out, err := exec.Command(fenceBin, args...).CombinedOutput()
	if err == nil {
		t.Fatalf("fence serve --raft-addr 0.0.0.0:%s without peer TLS: exit 0, want a refusal\n%s", port, out)
	}
	for _, want := range []string{"refusing to listen on 0.0.0.0:" + port, "--raft-addr", "--insecure-listen", "--peer-cert-file"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}

	srv := startServe(t, append(args[5:], "--insecure-listen")...)
	st := fenceRun(t, srv.url, "status", "--wait", "30s").want(t, exitOK, "fence status")
	if !strings.Contains(st.stdout, "insecure listen: YES") {
		t.Errorf("fence status of a node started with --insecure-listen does not say so:\n%s", st.stdout)
	}
	js := fenceRun(t, srv.url, "status", "--json").want(t, exitOK, "fence status --json")
	if !strings.Contains(js.stdout, `"insecureListen":true`) {
		t.Errorf("fence status --json of a node started with --insecure-listen: %s", js.stdout)
	}
}
