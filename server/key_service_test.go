package server

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/testkit/testutil"
)

// Key changes are audited as admin actions naming the key (never a seed),
// a forced retire (--now) says so and how many leases it moved, and a
// non-admin's rotation or forced retire is refused and audited.
func TestKeyChangesAreAudited(t *testing.T) {
	logs := &testutil.Buffer{}
	f := newAuthFixtureWith(t, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	id := f.must(fencev1connect.KeyServiceRotateKeyProcedure, f.creds["admin"], `{}`)["keyId"].(string)
	f.must(fencev1connect.KeyServiceRotateKeyProcedure, f.creds["admin"], `{}`)
	f.must(fencev1connect.KeyServiceRetireKeyProcedure, f.creds["admin"], `{"keyId":"`+id+`"}`)
	if code, _ := f.post(fencev1connect.KeyServiceRotateKeyProcedure, f.creds["read"], `{}`); code != 403 {
		t.Fatalf("a reader's rotation: %d, want 403", code)
	}
	id2 := f.must(fencev1connect.KeyServiceRotateKeyProcedure, f.creds["admin"], `{}`)["keyId"].(string)
	f.must(fencev1connect.KeyServiceRotateKeyProcedure, f.creds["admin"], `{}`)
	if code, _ := f.post(fencev1connect.KeyServiceRetireKeyProcedure, f.creds["read"], `{"keyId":"`+id2+`","force":true}`); code != 403 {
		t.Fatalf("a reader's forced retire: %d, want 403", code)
	}
	f.must(fencev1connect.KeyServiceRetireKeyProcedure, f.creds["admin"], `{"keyId":"`+id2+`","force":true}`)
	out := logs.String()
	for _, want := range []string{
		"msg=audit event=admin method=RotateKey principal=token:",
		"msg=audit event=admin method=RetireKey principal=token:",
		"key_id=" + id,
		"key_id=" + id2 + " now=true leases_moved=0",
		"msg=audit event=refused method=RetireKey",
		"msg=audit event=refused method=RotateKey",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log has no %q:\n%s", want, out)
		}
	}
}
