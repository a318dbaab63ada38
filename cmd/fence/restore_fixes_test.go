//go:build e2e

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/backup"
)

// F4: a --floor that would put the first token above 2^53 − 2^40 is
// refused (exit 2) naming the bound, before anything is written — the
// attacker's 2^53−3 included; one just below the bound restores.
func TestRestoreFloorHeadroom(t *testing.T) {
	file := backupFile(t, time.Now())
	for _, floor := range []string{"9006099743113216", "9007199254740989", "9007199254740990"} {
		dir := filepath.Join(t.TempDir(), "d")
		code, _, errs := runRestore(file, "--data-dir", dir, "--floor", floor)
		if code != exitUsage || !strings.Contains(errs, "at most 9006099743113216 (2^53 − 2^40") || !strings.Contains(errs, floor+" (--floor)") {
			t.Errorf("--floor %s: exit %d, stderr %q; want exit 2 naming the bound 2^53 − 2^40 and the floor", floor, code, errs)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("--floor %s: %s was created", floor, dir)
		}
	}
	dir := filepath.Join(t.TempDir(), "d")
	code, out, errs := runRestore(file, "--data-dir", dir, "--floor", "9006099743113215")
	if code != exitOK || !strings.Contains(out, "first token:  9006099743113216") {
		t.Errorf("--floor at the bound − 1: exit %d\n%s\n%s", code, out, errs)
	}
}

// F10: fence restore reads FENCE_NODE_ID, FENCE_RAFT_ADVERTISE (else
// FENCE_RAFT_ADDR) and FENCE_LOG_STORE as fence serve does; a flag wins; a
// bad value is a usage error naming the variable. With FENCE_NODE_ID
// exported, the restored dir is the node fence serve (reading the same
// variable) starts as.
func TestRestoreReadsServeEnv(t *testing.T) {
	file := backupFile(t, time.Now())
	restoreJSON := func(args ...string) (nodeID, raftAddr string) {
		t.Helper()
		code, out, errs := runRestore(append([]string{file, "--json"}, args...)...)
		var rep struct {
			NodeID   string `json:"nodeId"`
			RaftAddr string `json:"raftAddr"`
		}
		if code != exitOK || json.Unmarshal([]byte(out), &rep) != nil {
			t.Fatalf("restore %q: exit %d\n%s\n%s", args, code, out, errs)
		}
		return rep.NodeID, rep.RaftAddr
	}
	t.Setenv("FENCE_NODE_ID", "zz")
	t.Setenv("FENCE_RAFT_ADDR", "127.0.0.1:7771")
	t.Setenv("FENCE_LOG_STORE", "wal")
	dir := filepath.Join(t.TempDir(), "env")
	if id, ra := restoreJSON("--data-dir", dir); id != "zz" || ra != "127.0.0.1:7771" {
		t.Errorf("from the environment: node %q, raft addr %q; want zz, 127.0.0.1:7771", id, ra)
	}
	if _, err := os.Stat(filepath.Join(dir, "wal")); err != nil {
		t.Errorf("FENCE_LOG_STORE=wal: no wal dir in the restored dir: %v (holds %q)", err, dirNames(t, dir))
	}
	t.Setenv("FENCE_RAFT_ADVERTISE", "10.0.0.9:7000")
	t.Setenv("FENCE_RAFT_ADDR", "0.0.0.0:7000")
	if _, ra := restoreJSON("--data-dir", filepath.Join(t.TempDir(), "adv")); ra != "10.0.0.9:7000" {
		t.Errorf("FENCE_RAFT_ADVERTISE and FENCE_RAFT_ADDR: raft addr %q, want the advertised 10.0.0.9:7000", ra)
	}
	t.Setenv("FENCE_LOG_STORE", "bolt") // not a log store: the flag below wins
	dir = filepath.Join(t.TempDir(), "flags")
	if id, ra := restoreJSON("--data-dir", dir, "--node-id", "n1", "--raft-addr", "127.0.0.1:7772", "--log-store", "wal"); id != "n1" || ra != "127.0.0.1:7772" {
		t.Errorf("flags over the environment: node %q, raft addr %q", id, ra)
	}
	if _, err := os.Stat(filepath.Join(dir, "wal")); err != nil {
		t.Errorf("--log-store wal with FENCE_LOG_STORE=bolt: no wal dir: %v", err)
	}

	t.Setenv("FENCE_LOG_STORE", "wal")
	for env, val := range map[string]string{"FENCE_LOG_STORE": "bolt", "FENCE_NODE_ID": "a b", "FENCE_RAFT_ADVERTISE": "0.0.0.0:7000"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, val)
			dir := filepath.Join(t.TempDir(), "bad")
			code, _, errs := runRestore(file, "--data-dir", dir)
			if code != exitUsage || !strings.Contains(errs, env+"="+val) {
				t.Errorf("%s=%s: exit %d, stderr %q; want exit 2 naming the variable", env, val, code, errs)
			}
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("%s=%s: %s created", env, val, dir)
			}
		})
	}

	// The attacker's case: FENCE_NODE_ID exported, a single node restored
	// and started with the same environment: it serves (before, serve
	// refused the dir: it belonged to fence-1).
	os.Unsetenv("FENCE_RAFT_ADDR")
	os.Unsetenv("FENCE_RAFT_ADVERTISE")
	os.Unsetenv("FENCE_LOG_STORE")
	dir = filepath.Join(t.TempDir(), "single")
	if id, ra := restoreJSON("--data-dir", dir); id != "zz" || ra != "" {
		t.Fatalf("single node: node %q, raft addr %q", id, ra)
	}
	srv := startServe(t, "--data-dir", dir)
	if st := backupNodeStatus(t, srv.url); st.GetId() != "zz" || st.GetLastToken() < 3 {
		t.Errorf("the restored node serves as %q, last token %d", st.GetId(), st.GetLastToken())
	}
}

// F10: restoring into a regular file is a refusal like the others (exit
// 4, --json kind not_a_directory), the file untouched.
func TestRestoreIntoRegularFile(t *testing.T) {
	file := backupFile(t, time.Now())
	target := filepath.Join(t.TempDir(), "afile")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runRestore(file, "--data-dir", target, "--json")
	if code != exitRefused || !strings.Contains(errs, "is a regular file") || !strings.Contains(out, `"kind":"not_a_directory"`) {
		t.Errorf("restore into a regular file: exit %d, stdout %q, stderr %q; want exit 4, kind not_a_directory", code, out, errs)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "keep" {
		t.Errorf("the file became %q (%v)", b, err)
	}
}

// F10: a data dir holding only an empty lost+found (a fresh ext4 volume's
// root) is restored into, as fence serve starts in it; lost+found stays,
// and the restored node serves with the state. A lost+found holding
// something is not empty: refused (exit 4), untouched.
func TestRestoreIntoEmptyLostFound(t *testing.T) {
	file := backupFile(t, time.Now())
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runRestore(file, "--data-dir", dir)
	if code != exitOK {
		t.Fatalf("restore into a dir with an empty lost+found: exit %d\n%s\n%s", code, out, errs)
	}
	if fi, err := os.Stat(filepath.Join(dir, "lost+found")); err != nil || !fi.IsDir() {
		t.Fatalf("lost+found after the restore: %v", err)
	}
	srv := startServe(t, "--data-dir", dir)
	if st := backupNodeStatus(t, srv.url); st.GetLastToken() < 3 {
		t.Errorf("the restored node's last token %d, want the backup's 3 or above", st.GetLastToken())
	}

	full := t.TempDir()
	if err := os.MkdirAll(filepath.Join(full, "lost+found", "#1234"), 0o700); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runRestore(file, "--data-dir", full)
	if code != exitRefused || !strings.Contains(errs, "lost+found") {
		t.Errorf("lost+found holding something: exit %d, stderr %q; want exit 4 naming it", code, errs)
	}
	if names := dirNames(t, full); strings.Join(names, ",") != "lost+found" {
		t.Errorf("the refused dir holds %q", names)
	}
}

// The report names the restored cluster's new id, the backed-up one it
// was restored from and the raft term the restored log starts at (text and
// --json), as the RESTORED marker records them.
func TestRestoreReportsNewCluster(t *testing.T) {
	file := backupFile(t, time.Now())
	marker := func(dir string) (id, from string, term uint64) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, backup.RestoredFile))
		var m struct {
			ClusterID    string `json:"cluster_id"`
			RestoredFrom string `json:"restored_from"`
			Term         uint64 `json:"term"`
		}
		if err != nil || json.Unmarshal(b, &m) != nil || m.ClusterID == "" || m.ClusterID == "cli-test" || m.RestoredFrom != "cli-test" || m.Term <= 2 {
			t.Fatalf("RESTORED marker %q (%v): want a new cluster id, restored_from cli-test, a term above 2", b, err)
		}
		return m.ClusterID, m.RestoredFrom, m.Term
	}
	dir := filepath.Join(t.TempDir(), "text")
	code, out, errs := runRestore(file, "--data-dir", dir)
	if code != exitOK {
		t.Fatalf("restore: exit %d\n%s\n%s", code, out, errs)
	}
	id, from, term := marker(dir)
	for _, want := range []string{
		fmt.Sprintf("  new cluster:  %s (restored from %s)\n", id, from),
		fmt.Sprintf("  raft term:    %d (", term),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	dir = filepath.Join(t.TempDir(), "json")
	code, out, _ = runRestore(file, "--data-dir", dir, "--json")
	var rep struct {
		ClusterID    string `json:"clusterId"`
		RestoredFrom string `json:"restoredFrom"`
		Term         uint64 `json:"term"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("restore --json: exit %d %q", code, out)
	}
	if id, from, term := marker(dir); rep.ClusterID != id || rep.RestoredFrom != from || rep.Term != term {
		t.Errorf("--json clusterId %q, restoredFrom %q, term %d; the marker: %q, %q, %d", rep.ClusterID, rep.RestoredFrom, rep.Term, id, from, term)
	}
}
