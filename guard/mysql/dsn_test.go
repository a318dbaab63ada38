package mysql_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/mysql"
	driver "github.com/go-sql-driver/mysql"
)

func TestParseDSN(t *testing.T) {
	for _, c := range []struct {
		in                        string
		user, pass, addr, db, tbl string
		params                    map[string]string
	}{
		{in: "mysql://root@127.0.0.1:3306/test", user: "root", addr: "127.0.0.1:3306", db: "test"},
		{in: "mysql://app:s%40cret:x@db.example:3307/shop?table=app.guard&timeout=5s", user: "app", pass: "s@cret:x", addr: "db.example:3307", db: "shop", tbl: "app.guard"},
		{in: "mariadb://u:p@db/shop?table=g", user: "u", pass: "p", addr: "db:3306", db: "shop", tbl: "g"},
		{in: "mysql://u@[::1]/shop", user: "u", addr: "[::1]:3306", db: "shop"},
		{in: "root@tcp(127.0.0.1:3306)/test", user: "root", addr: "127.0.0.1:3306", db: "test"},
		{in: "u:p@tcp(h:3307)/d?table=t&sql_mode=ANSI", user: "u", pass: "p", addr: "h:3307", db: "d", tbl: "t", params: map[string]string{"sql_mode": "ANSI"}},
	} {
		cfg, table, err := mysql.ParseDSN(c.in)
		if err != nil {
			t.Errorf("ParseDSN(%q): %v", c.in, err)
			continue
		}
		if cfg.User != c.user || cfg.Passwd != c.pass || cfg.Addr != c.addr || cfg.DBName != c.db || table != c.tbl {
			t.Errorf("ParseDSN(%q) = user %q pass %q addr %q db %q table %q; want %q %q %q %q %q", c.in, cfg.User, cfg.Passwd, cfg.Addr, cfg.DBName, table, c.user, c.pass, c.addr, c.db, c.tbl)
		}
		if _, ok := cfg.Params["table"]; ok {
			t.Errorf("ParseDSN(%q): table left in the driver's params (it would be sent as a session variable)", c.in)
		}
		for k, v := range c.params {
			if cfg.Params[k] != v {
				t.Errorf("ParseDSN(%q): param %s = %q, want %q", c.in, k, cfg.Params[k], v)
			}
		}
		if c.in == "mysql://app:s%40cret:x@db.example:3307/shop?table=app.guard&timeout=5s" && cfg.Timeout.String() != "5s" {
			t.Errorf("timeout param lost: %v", cfg.Timeout)
		}
	}
	for _, bad := range []string{"postgres://u:hunter2@h/d", "mysql://", "u:hunter2@tcp(h/d", "mysql://u:hunter2@h:3306/d?timeout=soon"} {
		_, _, err := mysql.ParseDSN(bad)
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != "dsn" {
			t.Errorf("ParseDSN(%q) = %v, want *fence.InvalidError on dsn", bad, err)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseDSN(%q): the error shows the password: %v", bad, err)
		}
	}
}

// MaxTokenAt is what `fence guard max-token --mysql` and `fence restore
// --floor-from mysql://…` call: both DSN forms, the table from the DSN or
// the argument, and an empty table told apart from a floor.
func TestMaxTokenAt(t *testing.T) {
	db := testDB(t)
	s := newStore(t, db, 0, -1)
	ctx := context.Background()
	cfg, err := driver.ParseDSN(testDSN())
	must(t, err)
	url := "mysql://" + cfg.User
	if cfg.Passwd != "" {
		url += ":" + cfg.Passwd
	}
	url += "@" + cfg.Addr + "/" + cfg.DBName
	forms := map[string]string{
		"driver DSN, --table":   testDSN(),
		"mysql:// URL, ?table=": url + "?table=" + s.tt.guard,
	}
	read := func(form string) (fence.Token, bool, string, error) {
		if strings.HasSuffix(form, "--table") {
			return mysql.MaxTokenAt(ctx, forms[form], s.tt.guard)
		}
		return mysql.MaxTokenAt(ctx, forms[form], "")
	}
	for form := range forms {
		max, found, where, err := read(form)
		if err != nil || found || max != 0 || where != cfg.DBName+"."+s.tt.guard {
			t.Fatalf("%s, empty table: %d found=%v where=%q %v; want 0, false, %s.%s", form, max, found, where, err, cfg.DBName, s.tt.guard)
		}
	}
	must(t, s.Check(ctx, "a", 41))
	must(t, s.Check(ctx, "b", 42))
	for form := range forms {
		if max, found, _, err := read(form); err != nil || !found || max != 42 {
			t.Fatalf("%s: %d found=%v %v; want 42", form, max, found, err)
		}
	}
	if _, _, _, err := mysql.MaxTokenAt(ctx, testDSN(), s.tt.guard+"_nope"); err == nil {
		t.Fatal("a missing table gave no error")
	}
	_, _, _, err = mysql.MaxTokenAt(ctx, url+"?table=x", "y")
	var inv *fence.InvalidError
	if !errors.As(err, &inv) || inv.Field != "table" {
		t.Fatalf("two different tables: %v, want *fence.InvalidError on table", err)
	}
}
