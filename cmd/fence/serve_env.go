package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
)

// Every flag of `fence serve` can also be set from the environment:
// --max-ttl from FENCE_MAX_TTL, --log-format from FENCE_LOG_FORMAT, and so
// on (envName). A flag on the command line wins over its variable; an
// empty variable counts as unset. The global flags serve shares with the
// other commands (--server, --json, --timeout, -h/--help) have none here:
// FENCE_SERVER is read for every command by run.
const envPrefix = "FENCE_"

// noEnv are the flags of serve's flag set that are not serve's own.
var noEnv = map[string]bool{"server": true, "json": true, "timeout": true, "h": true, "help": true}

// reservedEnv are FENCE_ variables with another meaning, which no serve
// flag may take as its own: FENCE_SERVER (every command's --server),
// FENCE_CACERT, FENCE_CERT and FENCE_KEY (the CLI's TLS flags), FENCE_AUTH_TOKEN (its bearer token),
// FENCE_LOCK, FENCE_TOKEN, FENCE_SIGNED_TOKEN, FENCE_LOCKS and FENCE_PROOFS
// (what `fence run` gives its child),
// FENCE_PLANTBUG (test builds) and the FENCE_TEST_ prefix (test hooks).
var reservedEnv = []string{"FENCE_SERVER", "FENCE_CACERT", "FENCE_CERT", "FENCE_KEY", "FENCE_AUTH_TOKEN", "FENCE_LOCK", "FENCE_TOKEN",
	"FENCE_SIGNED_TOKEN", "FENCE_LOCKS", "FENCE_PROOFS", "FENCE_PLANTBUG"}

const reservedEnvPrefix = "FENCE_TEST_"

// envName is the variable of flag name: FENCE_ and the name in upper case
// with "-" as "_" (max-ttl: FENCE_MAX_TTL).
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// hasEnv reports whether flag f of serve's set has a variable.
func hasEnv(f *flag.Flag) bool { return !noEnv[f.Name] }

// annotateEnv adds "(env FENCE_X)" to the usage of each flag that has a
// variable, so --help names them next to their defaults.
func annotateEnv(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if hasEnv(f) {
			f.Usage += " (env " + envName(f.Name) + ")"
		}
	})
}

// envSource records which flags were set from which variable, so that a
// later check that refuses a flag's value can say where it came from.
type envSource map[string]string // flag name -> "FENCE_X=value"

// applyEnv sets every flag of fs that has a variable and was not given on
// the command line from its variable, if that is set and not empty. A
// value the flag refuses is a usage error naming the variable, its value
// and the flag. It returns which flags it set.
func applyEnv(fs *flag.FlagSet, getenv func(string) string) (envSource, error) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	restore := hintDurationUnits(fs) // "5" gets the same hint as --max-ttl 5
	defer restore()
	src := envSource{}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if !hasEnv(f) || given[f.Name] {
			return
		}
		name := envName(f.Name)
		v := getenv(name)
		if v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: invalid value for --%s: %v", name, v, f.Name, explainParse(f, err)))
			return
		}
		src[f.Name] = name + "=" + v
	})
	if len(errs) > 0 {
		return nil, &usageError{"serve: " + errors.Join(errs...).Error()}
	}
	return src, nil
}

// explainParse says what a bool or number flag wants instead of the flag
// package's bare "parse error" or "value out of range".
func explainParse(f *flag.Flag, err error) error {
	g, ok := f.Value.(flag.Getter)
	if !ok || err.Error() != "parse error" && err.Error() != "value out of range" {
		return err
	}
	switch g.Get().(type) {
	case bool:
		return errors.New("want true or false (also 1, 0, t, f)")
	case int, int64:
		return fmt.Errorf("want a whole number (%v)", err)
	}
	return err
}

// explain adds to msg, a refusal that names flags (--max-ttl), where each
// named flag's value came from when a variable set it: "(--max-ttl is
// FENCE_MAX_TTL=1ms)". A flag given on the command line is left as it is.
func (src envSource) explain(msg string) string {
	var notes []string
	for _, name := range slices.Sorted(maps.Keys(src)) {
		if namesFlag(msg, name) {
			notes = append(notes, "--"+name+" is "+src[name])
		}
	}
	if len(notes) == 0 {
		return msg
	}
	return msg + " (" + strings.Join(notes, ", ") + ")"
}

// namesFlag reports whether msg mentions --name as a whole flag (not as
// the start of a longer one).
func namesFlag(msg, name string) bool {
	pat := "--" + name
	for i := 0; ; {
		j := strings.Index(msg[i:], pat)
		if j < 0 {
			return false
		}
		end := i + j + len(pat)
		if end == len(msg) || !isFlagChar(msg[end]) {
			return true
		}
		i = end
	}
}

func isFlagChar(c byte) bool { return c == '-' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// unknownEnv names the FENCE_ variables in environ that no serve flag
// reads and that have no other known meaning (likely typos: FENCE_MAXTTL),
// each with the nearest variable that exists, if one is close.
func unknownEnv(fs *flag.FlagSet, environ []string) [][2]string {
	known := map[string]bool{}
	for _, k := range reservedEnv {
		known[k] = true
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if hasEnv(f) {
			known[envName(f.Name)] = true
			names = append(names, envName(f.Name))
		}
	})
	var out [][2]string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, envPrefix) || known[k] || strings.HasPrefix(k, reservedEnvPrefix) {
			continue
		}
		best, bestD := "", 3
		for _, n := range names {
			if d := editDistance(k, n); d < bestD {
				best, bestD = n, d
			}
		}
		out = append(out, [2]string{k, best})
	}
	return out
}

// enumValue is a string flag that takes one of a few values.
type enumValue struct {
	v       *string
	choices []string
}

func (e enumValue) String() string {
	if e.v == nil {
		return ""
	}
	return *e.v
}

func (e enumValue) Set(s string) error {
	if !slices.Contains(e.choices, s) {
		return fmt.Errorf("want one of %s, got %q", strings.Join(e.choices, ", "), s)
	}
	*e.v = s
	return nil
}

func (e enumValue) Get() any { return *e.v }

// Choices are the values the flag takes (for tests and help).
func (e enumValue) Choices() []string { return e.choices }

// enum defines a flag of fs that takes one of choices; the first is the
// default.
func enum(fs *flag.FlagSet, name string, choices []string, usage string) *string {
	p := new(string)
	*p = choices[0]
	fs.Var(enumValue{p, choices}, name, usage)
	return p
}

// Log levels and formats of --log-level and --log-format.
var (
	logLevels  = []string{"info", "debug", "warn", "error"}
	logFormats = []string{"text", "json"}
)

// newLogger is serve's logger: text (logfmt-like key=value) or JSON, one
// record a line, at level and above, to w. started is set once the server
// logs that it serves (so a failure after it is not a refused start).
func newLogger(w io.Writer, format, level string, started *atomic.Bool) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level)) // one of logLevels: checked by the flag
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	if format == "json" {
		// A duration as the text log writes it ("10s"), not slog's JSON
		// integer nanoseconds.
		opts.ReplaceAttr = durationText
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(startWatch{h, started})
}

// durationText writes a time.Duration value as its String ("10s",
// "250ms"), in groups too.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// servingMsg begins the line daemon.Run logs once it serves.
const servingMsg = "fence serving on "

// startWatch notes the line that says the server serves.
type startWatch struct {
	slog.Handler
	started *atomic.Bool
}

func (s startWatch) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, servingMsg) {
		s.started.Store(true)
	}
	return s.Handler.Handle(ctx, r)
}

func (s startWatch) WithAttrs(as []slog.Attr) slog.Handler {
	return startWatch{s.Handler.WithAttrs(as), s.started}
}

func (s startWatch) WithGroup(name string) slog.Handler {
	return startWatch{s.Handler.WithGroup(name), s.started}
}
