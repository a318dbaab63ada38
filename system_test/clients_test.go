//go:build e2e

package system_test

// TestClientsDoc runs every snippet of docs/clients.md — grpcurl, Node (fetch,
// Connect-ES over four transports, @grpc/grpc-js), Python's urllib, PHP's curl
// and Go — as written, each against its own fresh `fence serve` that has
// granted 98 leases first, so that the snippet's two workers get tokens 99 and
// 100: the pair a text comparison orders wrongly. The rules a snippet follows
// are at the bottom of that page.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

type clientSnippet struct {
	line       int    // of the code block's first line
	file, code string // the name to save it as, and its text
	want       string // the ```text block after it
}

var snippetMarker = regexp.MustCompile(`^<!-- clients-test: (\S+) -->$`)

// parseClientSnippets finds the marked code blocks of docs/clients.md and
// their expected outputs; a js, python, php or go block without a marker is
// an error (it would never be run).
func parseClientSnippets(doc string) ([]clientSnippet, error) {
	lines := strings.Split(doc, "\n")
	var out []clientSnippet
	block := func(i int) (lang, body string, end int) { // i: the opening fence line
		lang = strings.TrimPrefix(strings.TrimSpace(lines[i]), "```")
		end = i + 1
		for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
			end++
		}
		return lang, strings.Join(lines[i+1:min(end, len(lines))], "\n") + "\n", end
	}
	for i := 0; i < len(lines); i++ {
		if m := snippetMarker.FindStringSubmatch(lines[i]); m != nil {
			if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
				return nil, fmt.Errorf("line %d: marker %q is not followed by a code block", i+1, m[1])
			}
			_, code, end := block(i + 1)
			s := clientSnippet{line: i + 3, file: m[1], code: code}
			for j := end + 1; j < len(lines) && !snippetMarker.MatchString(lines[j]); j++ {
				if strings.TrimSpace(lines[j]) == "```text" {
					_, s.want, _ = block(j)
					break
				}
			}
			if s.want == "" {
				return nil, fmt.Errorf("line %d: %s has no ```text block of expected output after it", i+1, s.file)
			}
			out = append(out, s)
			i = end
			continue
		}
		if strings.HasPrefix(lines[i], "```") {
			lang, _, end := block(i)
			switch lang {
			case "js", "javascript", "python", "php", "go":
				return nil, fmt.Errorf("line %d: a ```%s block without a <!-- clients-test: FILE --> marker would not be run", i+1, lang)
			}
			i = end
		}
	}
	return out, nil
}

// outputMatches reports whether got matches the documented output want:
// line by line, runs of white space equal, "..." in a line matching any
// text and a line that is only "..." any number of lines.
func outputMatches(want, got string) bool {
	norm := func(s string) []string {
		var ls []string
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			ls = append(ls, strings.Join(strings.Fields(l), " "))
		}
		return ls
	}
	var re strings.Builder
	re.WriteString(`^`)
	for _, l := range norm(want) {
		if l == "..." {
			re.WriteString(`(?:[^\n]*\n)*?`)
			continue
		}
		re.WriteString(strings.ReplaceAll(regexp.QuoteMeta(l), `\.\.\.`, `[^\n]*`) + `\n`)
	}
	re.WriteString(`$`)
	return regexp.MustCompile(re.String()).MatchString(strings.Join(norm(got), "\n") + "\n")
}

func TestClientsDocParse(t *testing.T) {
	t.Parallel()
	if !outputMatches("a 1\n...\nc ... d\n", "a  1\nx\ny\nc 2 d\n") || outputMatches("a\nb\n", "a\nc\n") || outputMatches("a\n", "a\nb\n") {
		t.Fatal("outputMatches is wrong")
	}
	if _, err := parseClientSnippets("x\n```python\nprint(1)\n```\n"); err == nil {
		t.Fatal("an unmarked python block was accepted")
	}
}

func TestClientsDoc(t *testing.T) {
	root := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "clients.md"))
	if err != nil {
		t.Fatal(err)
	}
	snippets, err := parseClientSnippets(string(doc))
	if err != nil {
		t.Fatalf("docs/clients.md: %v", err)
	}
	// The page must keep a snippet for each client the issue names.
	have := map[string]bool{}
	for _, s := range snippets {
		have[s.file] = true
	}
	for _, f := range []string{"grpcurl.sh", "fetch.mjs", "connect.mjs", "grpc-js.mjs", "fence_story.py", "fence_story.php", "main.go"} {
		if !have[f] {
			t.Errorf("docs/clients.md lost its snippet %s", f)
		}
	}
	bin := fenceBinary(t)
	for _, s := range snippets {
		t.Run(s.file, func(t *testing.T) {
			t.Parallel()
			cmd, saveDir := snippetCommand(t, root, s.file)
			srv := startServerWith(t, bin, filepath.Join(t.TempDir(), "data"))
			grantTokens(t, srv.URL(), 98)
			code := strings.ReplaceAll(s.code, "127.0.0.1:7420", srv.Addr())
			if err := os.WriteFile(filepath.Join(saveDir, s.file), []byte(code), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			run := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
			run.Dir, run.Env = cmd.Dir, cmd.Env
			var out bytes.Buffer
			run.Stdout, run.Stderr = &out, &out
			err := run.Run()
			if err != nil || !outputMatches(s.want, out.String()) {
				t.Fatalf("docs/clients.md line %d, %s: %v\nprinted:\n%s\nwant (docs/clients.md):\n%s", s.line, s.file, err, out.String(), s.want)
			}
		})
	}
}

// snippetCommand returns the command that runs file, once the caller has
// saved it in dir: the runtime its extension names, skipping the test when
// that runtime is missing outside CI.
func snippetCommand(t *testing.T, root, file string) (cmd *exec.Cmd, dir string) {
	t.Helper()
	need := func(prog, why string) string {
		t.Helper()
		p, err := exec.LookPath(prog)
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true and %s is not installed: %s", prog, why)
			}
			t.Skipf("SKIP !!! %s is not installed: %s did NOT run (CI=true makes this fail)", prog, why)
		}
		return p
	}
	dir = t.TempDir()
	cmd = &exec.Cmd{Dir: dir, Env: os.Environ()}
	switch filepath.Ext(file) {
	case ".sh":
		need("jq", "the grpcurl snippet")
		bindir := t.TempDir()
		if err := os.Symlink(grpcurlBinary(t, root), filepath.Join(bindir, "grpcurl")); err != nil {
			t.Fatal(err)
		}
		cmd.Path, cmd.Args = need("sh", "the grpcurl snippet"), []string{"sh", file}
		cmd.Env = append(cmd.Env, "PATH="+bindir+string(os.PathListSeparator)+os.Getenv("PATH"))
	case ".mjs":
		cmd.Path = need("node", "the Node snippet "+file)
		nodeDir := filepath.Join(root, "examples", "node")
		if _, err := os.Stat(filepath.Join(nodeDir, "node_modules")); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true and examples/node has no node_modules (.ci/run runs npm ci there): %v", err)
			}
			t.Skipf("SKIP !!! run `npm ci` in examples/node: the Node snippet %s did NOT run", file)
		}
		// The snippet imports as if saved in examples/node, and runs there.
		for _, l := range []string{"node_modules", "gen"} {
			if err := os.Symlink(filepath.Join(nodeDir, l), filepath.Join(dir, l)); err != nil {
				t.Fatal(err)
			}
		}
		cmd.Args, cmd.Dir = []string{"node", filepath.Join(dir, file)}, nodeDir
	case ".py":
		cmd.Path, cmd.Args = need("python3", "the Python snippet"), []string{"python3", file}
	case ".php":
		p, err := exec.LookPath("php")
		if err != nil {
			t.Skip("php is not installed (.ci/run installs php-cli and php-curl): the PHP snippet did not run")
		}
		cmd.Path, cmd.Args = p, []string{"php", file}
	case ".go":
		cmd.Path, cmd.Args = need("go", "the Go snippet"), []string{"go", "run", "."}
		// A module of its own that requires this one, as a user's would,
		// built from the module cache this module's go.sum already covers.
		sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		mod := "module fenceclientsnippet\n\ngo 1.26\n\nrequire github.com/fenceworks/fence v0.0.0\n\nreplace github.com/fenceworks/fence => " + root + "\n"
		if os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644) != nil || os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644) != nil {
			t.Fatal("cannot write the snippet's module")
		}
		cmd.Env = append(cmd.Env, "GOFLAGS=-mod=mod", "GOWORK=off")
	default:
		t.Fatalf("%s: no runtime for this extension", file)
	}
	return cmd, dir
}

// grantTokens makes the server at url grant n leases (tokens 1..n).
func grantTokens(t *testing.T, url string, n int) {
	t.Helper()
	svc := client.NewService(url)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for i := 1; i <= n; i++ {
		g, err := svc.Acquire(ctx, fence.AcquireRequest{Name: fmt.Sprintf("warm-up/%d", i), TTL: time.Minute})
		if err != nil || g.Lease.Token != fence.Token(i) {
			t.Fatalf("warm-up grant %d: token %d, %v", i, g.Lease.Token, err)
		}
	}
}

// grpcurlBinary is bin/tools/grpcurl-VERSION, built by `make grpcurl` (which
// .ci/run runs before the tests) when it is missing.
func grpcurlBinary(t *testing.T, root string) string {
	t.Helper()
	find := func() string {
		m, _ := filepath.Glob(filepath.Join(root, "bin", "tools", "grpcurl-v*"))
		if len(m) == 0 {
			return ""
		}
		return m[len(m)-1]
	}
	if p := find(); p != "" {
		return p
	}
	if out, err := exec.Command("make", "-C", root, "-s", "grpcurl").CombinedOutput(); err != nil {
		t.Fatalf("make grpcurl: %v\n%s", err, out)
	}
	if p := find(); p != "" {
		return p
	}
	t.Fatal("make grpcurl built no bin/tools/grpcurl-v*")
	return ""
}

// TestClientsNodeGenerated: the Connect-ES code committed in examples/node/gen
// is what `npm run generate` makes from api/fence/v1/fence.proto now (a field
// added to the proto and not regenerated would be missing in Node).
func TestClientsNodeGenerated(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	nodeDir := filepath.Join(root, "examples", "node")
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Skip("SKIP !!! protoc is not installed (make proto-tools): examples/node/gen was not checked")
	}
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", ".bin", "protoc-gen-es")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and examples/node has no node_modules (.ci/run runs npm ci there): %v", err)
		}
		t.Skip("SKIP !!! run `npm ci` in examples/node: examples/node/gen was not checked")
	}
	var pkg struct{ Scripts map[string]string }
	raw, err := os.ReadFile(filepath.Join(nodeDir, "package.json"))
	if err == nil {
		err = json.Unmarshal(raw, &pkg)
	}
	gen := pkg.Scripts["generate"]
	if err != nil || !strings.Contains(gen, "--es_out=gen ") {
		t.Fatalf("examples/node/package.json: no scripts.generate writing --es_out=gen (%v)", err)
	}
	out := t.TempDir()
	script := strings.ReplaceAll(strings.ReplaceAll(gen, "--es_out=gen ", "--es_out="+out+" "), "mkdir -p gen &&", "")
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = nodeDir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm run generate: %v\n%s", err, b)
	}
	for _, f := range []string{"fence_pb.js", "fence_pb.d.ts"} {
		want, err1 := os.ReadFile(filepath.Join(out, "fence", "v1", f))
		got, err2 := os.ReadFile(filepath.Join(nodeDir, "gen", "fence", "v1", f))
		if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
			t.Errorf("examples/node/gen/fence/v1/%s is not what fence.proto generates now (%v, %v): run `npm run generate` in examples/node and commit", f, err1, err2)
		}
	}
}
