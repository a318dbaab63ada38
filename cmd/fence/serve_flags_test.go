package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// testValue is a valid value of f other than its default, for the env
// and table tests: what the flag's type takes.
func testValue(t *testing.T, f *flag.Flag) string {
	t.Helper()
	if c, ok := f.Value.(interface{ Choices() []string }); ok {
		return c.Choices()[len(c.Choices())-1]
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		t.Fatalf("--%s: a flag.Value without Get; teach testValue its type", f.Name)
	}
	switch g.Get().(type) {
	case bool:
		return "true"
	case time.Duration:
		return "7s"
	case int, int64, uint, uint64:
		return "7"
	case string:
		return "from-env-" + f.Name
	}
	t.Fatalf("--%s: type %T; teach testValue its type", f.Name, g.Get())
	return ""
}

// normalized is v as the flag prints it once set (7s stays 7s).
func normalized(t *testing.T, f *flag.Flag, v string) string {
	t.Helper()
	if g, ok := f.Value.(flag.Getter); ok {
		if _, ok := g.Get().(time.Duration); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatal(err)
			}
			return d.String()
		}
	}
	return v
}

// Every row of serve's flag table reaches what serve runs: set alone, it
// changes the daemon's config, the logger's settings or the cluster
// flags, and a row bound to nothing — or to the place another row already
// sets — fails here.
func TestServeEveryFlagReachesTheSettings(t *testing.T) {
	settings := func(args ...string) serveSettings {
		t.Helper()
		fs, s := serveFlags(&globals{}, io.Discard)
		if _, err := parseServe(fs, args, func(string) string { return "" }); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		out := *s
		out.cfg = s.daemonConfig()
		return out
	}
	base := settings()
	changed := map[string]string{} // a description of what a row changed -> the row
	fs, _ := serveFlags(&globals{}, io.Discard)
	n := 0
	for _, row := range serveFlagTable {
		f := fs.Lookup(row.name)
		if f == nil {
			t.Fatalf("row --%s is not defined on serve's flag set", row.name)
		}
		n++
		got := settings("--" + row.name + "=" + testValue(t, f))
		if reflect.DeepEqual(got, base) {
			t.Errorf("--%s %s changes nothing serve runs with", row.name, testValue(t, f))
			continue
		}
		what := diff(base, got)
		if other, dup := changed[what]; dup {
			t.Errorf("--%s and --%s set the same place (%s)", row.name, other, what)
		}
		changed[what] = row.name
	}
	// Every flag of the set (but the globals) is a row of the table.
	fs.VisitAll(func(f *flag.Flag) {
		if hasEnv(f) && !hasRow(f.Name) {
			t.Errorf("--%s is defined outside serveFlagTable", f.Name)
		}
	})
	if n < 30 {
		t.Fatalf("only %d rows: is this serve's table?", n)
	}
}

func hasRow(name string) bool {
	for _, r := range serveFlagTable {
		if r.name == name {
			return true
		}
	}
	return false
}

// diff names the fields of a and b that differ ("cfg.Rules.MaxTTL").
func diff(a, b serveSettings) string {
	var out []string
	var walk func(path string, x, y reflect.Value)
	walk = func(path string, x, y reflect.Value) {
		if x.Kind() == reflect.Struct {
			for i := 0; i < x.NumField(); i++ {
				walk(path+"."+x.Type().Field(i).Name, x.Field(i), y.Field(i))
			}
			return
		}
		// fmt prints what a reflect.Value holds, unexported fields too.
		if fmt.Sprintf("%#v", x) != fmt.Sprintf("%#v", y) {
			out = append(out, path)
		}
	}
	walk("", reflect.ValueOf(&a).Elem(), reflect.ValueOf(&b).Elem())
	return strings.Join(out, ",")
}

// docs/operations.md's configuration table lists exactly the rows of
// serveFlagTable, each with its variable and, where the table gives a
// literal default, the flag's own default.
func TestServeFlagsMatchOperationsDoc(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `--([a-z-]+)` \\| `(FENCE_[A-Z_]+)` \\| ([^|]*) \\|")
	fs, _ := serveFlags(&globals{}, io.Discard)
	documented := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		name, env, def := m[1], m[2], strings.TrimSpace(m[3])
		documented[name] = true
		f := fs.Lookup(name)
		if f == nil || !hasRow(name) {
			t.Errorf("docs/operations.md lists --%s, which fence serve does not have", name)
			continue
		}
		if env != envName(name) {
			t.Errorf("docs/operations.md: --%s reads %s, the doc says %s", name, envName(name), env)
		}
		if lit, ok := strings.CutPrefix(def, "`"); ok && strings.HasSuffix(lit, "`") {
			lit = strings.TrimSuffix(lit, "`")
			if normalized(t, f, lit) != f.DefValue {
				t.Errorf("docs/operations.md: --%s defaults to %q, the doc says %q", name, f.DefValue, lit)
			}
		}
	}
	for _, r := range serveFlagTable {
		if !documented[r.name] {
			t.Errorf("--%s (%s) is missing from docs/operations.md's configuration table", r.name, envName(r.name))
		}
	}
}
