//go:build e2e

package server

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// buf.yaml and buf.gen.yaml work and agree with what is committed: buf lint
// passes, and buf generate (the Go plugins built from go.mod's versions,
// the Node examples' protoc-gen-es) reproduces api/fence/v1 and
// examples/node/gen byte for byte, but for the protoc version that
// protoc-gen-go writes into a comment (buf has none). So a .proto edited
// without `make proto`, or a buf.gen.yaml that drifted from `make proto`,
// fails here. buf comes from examples/node (npm ci installs
// @bufbuild/buf; .ci/run does it when node is there).
func TestBufGenerateMatchesCommitted(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	buf := filepath.Join(root, "examples", "node", "node_modules", ".bin", "buf")
	if _, err := os.Stat(buf); err != nil {
		t.Skipf("no %s (npm ci in examples/node installs it)", buf)
	}
	plugins := t.TempDir()
	for _, pkg := range []string{"google.golang.org/protobuf/cmd/protoc-gen-go", "connectrpc.com/connect/cmd/protoc-gen-connect-go"} {
		cmd := exec.Command("go", "build", "-o", plugins, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(buf, args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "PATH="+plugins+string(os.PathListSeparator)+os.Getenv("PATH"), "BUF_CACHE_DIR="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("buf %v: %v\n%s", args, err, out)
		}
	}
	run("lint")
	gen := t.TempDir()
	run("generate", "-o", gen)

	protocLine := regexp.MustCompile(`(?m)^// \tprotoc +\S+\n`)
	n := 0
	err = filepath.WalkDir(gen, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(gen, p)
		got, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		want, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Errorf("buf generate wrote %s, which is not committed: %v", rel, err)
			return nil
		}
		if filepath.Ext(p) == ".go" {
			got, want = protocLine.ReplaceAll(got, nil), protocLine.ReplaceAll(want, nil)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: buf generate's differs from the committed file (run make proto / buf generate)", rel)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 4 { // fence.pb.go, fence.connect.go, fence_pb.js, fence_pb.d.ts
		t.Fatalf("buf generate wrote %d files, want 4", n)
	}
}

// docs/grpc.md's client recipes work as written: its TypeScript template
// (protoc-gen-es from examples/node) on a checkout of this repository and
// on a protoset fetched from a real server by reflection with grpcurl, its
// Python template (protoc's built-in generators, when protoc is there) on
// the repository.
func TestBufClientRecipes(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "examples", "node", "node_modules", ".bin")
	if _, err := os.Stat(filepath.Join(bin, "buf")); err != nil {
		t.Skipf("no buf in %s (npm ci in examples/node installs it)", bin)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "grpc.md"))
	if err != nil {
		t.Fatal(err)
	}
	recipe := func(name string) string {
		m := regexp.MustCompile("(?s)<!-- recipe: " + name + " -->\n```yaml\n(.*?)```").FindSubmatch(doc)
		if m == nil {
			t.Fatalf("docs/grpc.md has no %s recipe", name)
		}
		return string(m[1])
	}
	generate := func(template, input string) string {
		t.Helper()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "buf.gen.yaml"), []byte(template), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(bin, "buf"), "generate", input)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "BUF_CACHE_DIR="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("buf generate %s with\n%s: %v\n%s", input, template, err, out)
		}
		return dir
	}
	contains := func(file string, wants ...string) {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wants {
			if !bytes.Contains(b, []byte(w)) {
				t.Errorf("%s lacks %q", file, w)
			}
		}
	}

	ts := recipe("typescript")
	dir := generate(ts, root)
	contains(filepath.Join(dir, "src/gen/fence/v1/fence_pb.ts"), "export const LockService", "Acquire grants the lock")

	_, url := startServer(t)
	protoset := filepath.Join(t.TempDir(), "fence.binpb")
	out, err := exec.Command(grpcurl(t), "-plaintext", "-protoset-out", protoset, strings.TrimPrefix(url, "http://"), "describe", "fence.v1.LockService").CombinedOutput()
	if err != nil {
		t.Fatalf("grpcurl -protoset-out: %v\n%s", err, out)
	}
	dir = generate(ts, protoset)
	contains(filepath.Join(dir, "src/gen/fence/v1/fence_pb.ts"), "export const LockService", "export const SessionService")

	if _, err := exec.LookPath("protoc"); err != nil {
		t.Logf("no protoc: the Python recipe is not run")
		return
	}
	dir = generate(recipe("python"), root)
	contains(filepath.Join(dir, "gen/fence/v1/fence_pb2.py"), "fence/v1/fence.proto")
	contains(filepath.Join(dir, "gen/fence/v1/fence_pb2.pyi"), "class AcquireRequest")
}
