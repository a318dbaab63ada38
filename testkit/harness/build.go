package harness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// ModulePath is the import path of the Fence module, whose root ModuleRoot
// looks for.
const ModulePath = "github.com/fenceworks/fence"

var (
	buildMu  sync.Mutex
	buildDir string                // made on the first Build, removed by RemoveBuilds
	built    = map[string]string{} // key -> binary
	buildErr = map[string]error{}  // key -> the error of a failed build (not retried)
)

// Build builds the main package pkg ("./cmd/fence", relative to the Fence
// module's root) once per process and returns the executable's path. With
// race the program is built with -race (tests pass RaceEnabled, so that a
// data race in a server fails the test that started it; see HasRace). A
// failed build is not retried: later calls return the same error.
//
// The binaries live in a temporary directory until RemoveBuilds (call it
// from TestMain after m.Run, or when the runner ends).
func Build(pkg string, race bool) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	key := pkg
	if race {
		key += " -race"
	}
	if err, ok := buildErr[key]; ok {
		return "", err
	}
	if path, ok := built[key]; ok {
		return path, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	if buildDir == "" {
		if buildDir, err = os.MkdirTemp("", "fence-harness-bin-"); err != nil {
			return "", err
		}
	}
	out := filepath.Join(buildDir, strings.ReplaceAll(strings.Trim(pkg, "./"), "/", "_"))
	args := []string{"build", "-o", out}
	if race {
		out += "-race"
		args = []string{"build", "-race", "-o", out}
	}
	cmd := exec.Command(GoTool(), append(args, pkg)...)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		buildErr[key] = fmt.Errorf("harness: go build %s: %v\n%s", pkg, err, msg)
		return "", buildErr[key]
	}
	built[key] = out
	return out, nil
}

// FenceBinary is Build("./cmd/fence", RaceEnabled).
func FenceBinary() (string, error) { return Build("./cmd/fence", RaceEnabled) }

// RemoveBuilds removes the binaries Build made. Later Builds build again.
func RemoveBuilds() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	buildDir = ""
	clear(built)
	clear(buildErr)
}

// GoTool is the go command: the one on PATH, else GOROOT's.
func GoTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// ModuleRoot is the directory of the Fence module's go.mod: the first
// directory upward from the working directory whose go.mod declares
// ModulePath (bench/ has a go.mod of its own, which is passed over).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if modulePathOf(filepath.Join(dir, "go.mod")) == ModulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("harness: no go.mod of " + ModulePath + " above the working directory")
		}
		dir = parent
	}
}

func modulePathOf(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(p), `"`)
		}
	}
	return ""
}

// HasRace reports whether a race-built program's output reports a data
// race (a process killed with SIGKILL reports nothing of the races it had
// not yet printed).
func HasRace(output string) bool { return strings.Contains(output, "WARNING: DATA RACE") }
