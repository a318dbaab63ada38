//go:build e2e

package system_test

// TestReadmeCurl runs the curl examples of the documentation, as written.
//
// What it expects of README.md (and of docs/curl-tour.md, the curl section the
// README's five-minute tour includes):
//
//   - Commands: every line that starts with "curl " and contains
//     127.0.0.1:7420, inside a fenced block opened by a line "```sh" (or
//     "```bash", "```shell") at the start of a line. One command per line, no
//     backslash continuations. They run in document order, each with sh -c,
//     against one fresh server per file (so tokens start at 1), with
//     127.0.0.1:7420 replaced by that server's address.
//   - Expected output: the first "```json" block after such an sh block (and
//     before the next sh block with curl lines) holds one JSON value per curl
//     line of the sh block, in order. Without a json block the output must
//     still be JSON.
//   - Matching: every key shown must be present with the value shown; extra
//     keys in the output are allowed; arrays match element by element; the
//     string "..." matches any value (use it for remaining TTLs and the base64
//     value of error details).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// curlStep is one documented curl command and what it should print.
type curlStep struct {
	line    int    // in the file, for messages
	command string // as written
	want    any    // decoded expected JSON; nil when the document shows none
}

func TestReadmeCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and curl is not installed: the README's curl tour cannot be run")
		}
		t.Skip("SKIP !!! curl is not installed; the README's curl tour did NOT run (CI=true makes this fail)")
	}
	root := moduleRoot(t)
	for _, name := range []string{"README.md", "docs/curl-tour.md"} {
		doc, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatalf("%s: %v (the README's tour links to it, so it must exist)", name, err)
		}
		steps, err := parseCurlSteps(doc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := checkCurlSteps(name, steps); err != nil {
			t.Fatal(err)
		}
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) { runCurlSteps(t, steps) })
	}
}

// checkCurlSteps refuses a document that lost its curl examples (no curl line
// left, or none with its expected output shown), which would otherwise pass
// by running nothing.
func checkCurlSteps(name string, steps []curlStep) error {
	if len(steps) == 0 {
		return fmt.Errorf("%s has no curl example (a ```sh block with a curl line to 127.0.0.1:7420); the documented tour would not be tested", name)
	}
	for _, st := range steps {
		if st.want != nil {
			return nil
		}
	}
	return fmt.Errorf("%s: none of its %d curl lines is followed by a ```json block of expected output", name, len(steps))
}

func runCurlSteps(t *testing.T, steps []curlStep) {
	srv := startServer(t)
	for _, st := range steps {
		cmdline := strings.ReplaceAll(st.command, "127.0.0.1:7420", srv.Addr())
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		out, err := exec.CommandContext(ctx, "sh", "-c", cmdline).Output()
		cancel()
		if err != nil {
			t.Fatalf("line %d: %s: %v", st.line, st.command, err)
		}
		var got any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("line %d: %s\nprinted %q, not JSON: %v", st.line, st.command, out, err)
		}
		if st.want == nil {
			continue
		}
		if path, ok := jsonMatches(st.want, got, "$"); !ok {
			t.Errorf("line %d: %s\nprinted %s\ndoes not match the documented output at %s", st.line, st.command, out, path)
		}
	}
}

// parseCurlSteps finds the curl commands and their expected outputs in a
// Markdown document, by the rules at the top of this file.
func parseCurlSteps(doc []byte) ([]curlStep, error) {
	var steps []curlStep
	lines := strings.Split(string(doc), "\n")
	pending := []int{} // indexes in steps of the curl lines waiting for a json block
	for i := 0; i < len(lines); i++ {
		fence := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(lines[i], "```") {
			continue
		}
		lang := strings.TrimPrefix(fence, "```")
		end := i + 1
		for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
			end++
		}
		body := lines[i+1 : min(end, len(lines))]
		switch lang {
		case "sh", "bash", "shell":
			var found []int
			for j, l := range body {
				l = strings.TrimSpace(l)
				if strings.HasPrefix(l, "curl ") && strings.Contains(l, "127.0.0.1:7420") {
					found = append(found, len(steps))
					steps = append(steps, curlStep{line: i + 2 + j, command: l})
				}
			}
			if len(found) > 0 {
				pending = found
			}
		case "json":
			if len(pending) == 0 {
				break
			}
			dec := json.NewDecoder(strings.NewReader(strings.Join(body, "\n")))
			for _, idx := range pending {
				var v any
				if err := dec.Decode(&v); err != nil {
					return nil, fmt.Errorf("line %d: the json block after the curl on line %d: %v", i+1, steps[idx].line, err)
				}
				steps[idx].want = v
			}
			var extra any
			if dec.Decode(&extra) == nil {
				return nil, fmt.Errorf("line %d: json block has more values than the %d curl lines before it", i+1, len(pending))
			}
			pending = nil
		}
		i = end
	}
	return steps, nil
}

// jsonMatches reports whether got matches the documented want; on a mismatch
// it returns the path of the first difference.
func jsonMatches(want, got any, path string) (string, bool) {
	if s, ok := want.(string); ok && s == "..." {
		return "", true
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path, false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return path + "." + k + " (missing)", false
			}
			if p, ok := jsonMatches(wv, gv, path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path + " (array length)", false
		}
		for i := range w {
			if p, ok := jsonMatches(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
		return "", true
	}
	return path, reflect.DeepEqual(want, got)
}

func TestJSONMatches(t *testing.T) {
	for _, c := range []struct {
		want, got string
		ok        bool
	}{
		{`{"a":"1","b":"..."}`, `{"a":"1","b":{"x":1},"c":2}`, true},
		{`{"a":"1"}`, `{"a":"2"}`, false},
		{`{"a":"1"}`, `{}`, false},
		{`[{"r":"X"}]`, `[{"r":"X","v":"..."}]`, true},
		{`[{"r":"X"}]`, `[{"r":"X"},{"r":"Y"}]`, false},
		{`{"n":1}`, `{"n":"1"}`, false},
	} {
		var w, g any
		json.Unmarshal([]byte(c.want), &w)
		json.Unmarshal([]byte(c.got), &g)
		if _, ok := jsonMatches(w, g, "$"); ok != c.ok {
			t.Errorf("jsonMatches(%s, %s) = %v, want %v", c.want, c.got, ok, c.ok)
		}
	}
}

func TestParseCurlSteps(t *testing.T) {
	doc := "# T\n```sh\ncurl -s http://127.0.0.1:7420/a\necho hi\ncurl -s http://127.0.0.1:7420/b\n```\ntext\n```json\n{\"x\":1}\n{\"y\":\"...\"}\n```\n```sh\ncurl -s http://example.com/\n```\n<!-- ```sh not a fence -->\n"
	steps, err := parseCurlSteps([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[0].line != 3 || steps[1].line != 5 {
		t.Fatalf("steps %+v, want the two curl lines to 127.0.0.1:7420 on lines 3 and 5", steps)
	}
	if w, _ := json.Marshal(steps[1].want); !bytes.Equal(w, []byte(`{"y":"..."}`)) {
		t.Fatalf("second expectation %s", w)
	}
	if _, err := parseCurlSteps([]byte("```sh\ncurl 127.0.0.1:7420\n```\n```json\n{}\n{}\n```\n")); err == nil {
		t.Fatal("a json block with more values than curl lines was accepted")
	}
}

// TestCheckCurlSteps: a document whose curl blocks were removed or whose
// expected outputs were dropped fails the README test instead of passing by
// running nothing.
func TestCheckCurlSteps(t *testing.T) {
	for _, c := range []struct {
		doc string
		ok  bool
	}{
		{"# Tour\nNo blocks left.\n", false},
		{"```console\n$ curl -s http://127.0.0.1:7420/x\n```\n", false},
		{"```sh\ncurl -s http://127.0.0.1:7420/x\n```\n", false},
		{"```sh\ncurl -s http://127.0.0.1:7420/x\n```\n```json\n{}\n```\n", true},
	} {
		steps, err := parseCurlSteps([]byte(c.doc))
		if err != nil {
			t.Fatalf("%q: %v", c.doc, err)
		}
		if err := checkCurlSteps("doc.md", steps); (err == nil) != c.ok {
			t.Errorf("checkCurlSteps(%q) = %v, want ok=%v", c.doc, err, c.ok)
		}
	}
}
