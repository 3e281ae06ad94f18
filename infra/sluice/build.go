package sluice

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// ModulePath is the module whose functions/ the construct compiles.
const ModulePath = "github.com/sluicehq/sluice"

// Build compiles the Lambda main functions/<name> of the ModulePath version
// that the Go module in the working directory requires (the CDK app's
// go.mod; a replace directive is honoured, since go build reads it) and
// returns the directory holding its `bootstrap`, ready for
// awslambda.Code_FromAsset. It needs the Go toolchain on PATH, not Docker:
//
//	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -trimpath -tags lambda.norpc -ldflags '-s -w'
//
// the flags of `make build`. -trimpath makes the binary, and so the asset
// hash, the same on every machine with the same Go version, so a synth
// elsewhere does not redeploy an unchanged function.
//
// The binaries live under the user cache directory ($XDG_CACHE_HOME or
// ~/.cache on Linux, ~/Library/Caches on macOS), in sluice/lambda/<module
// version>/linux_arm64/<name>. A tagged version (v1.2.3 or a pseudo-version)
// never changes, so its binary is built once and reused by every later
// synth; a module replaced by a local directory, or the sluice module
// itself, is rebuilt on every call (go's build cache keeps that to the link,
// about a second) because its source may have changed. One process builds
// each function once.
func Build(name string) (string, error) {
	builds.Lock()
	defer builds.Unlock()
	if dir, ok := builds.dirs[name]; ok {
		return dir, nil
	}
	dir, err := build(name)
	if err != nil {
		return "", err
	}
	builds.dirs[name] = dir
	return dir, nil
}

var builds = struct {
	sync.Mutex
	dirs map[string]string
}{dirs: map[string]string{}}

// goModule is the part of `go list -m -json` read here.
type goModule struct {
	Path    string
	Version string
	Dir     string
	Main    bool
	Replace *goModule
}

func build(name string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("sluice: build the %s Lambda: the Go toolchain is not on PATH (%w); install Go, "+
			"or build the linux/arm64 bootstrap yourself and set FunctionProps.AssetDir", name, err)
	}
	mod, err := sluiceModule(goBin)
	if err != nil {
		return "", fmt.Errorf("sluice: build the %s Lambda: %w", name, err)
	}
	key, immutable := cacheKey(mod)
	root, err := os.UserCacheDir()
	if err != nil {
		root = os.TempDir()
	}
	root = filepath.Join(root, "sluice", "lambda")
	dir := filepath.Join(root, key, "linux_arm64", name)
	if immutable {
		if fi, err := os.Stat(filepath.Join(dir, "bootstrap")); err == nil && fi.Mode().IsRegular() {
			return dir, nil
		}
	}
	// Built beside the asset directory, then renamed into it: a synth
	// running at the same time never stages a half-written binary or a
	// temporary file.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("sluice: build the %s Lambda: %w", name, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dir), name+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("sluice: build the %s Lambda: %w", name, err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())

	pkg := ModulePath + "/functions/" + name
	cmd := exec.Command(goBin, "build", "-trimpath", "-tags", "lambda.norpc", "-ldflags", "-s -w", "-o", tmp.Name(), pkg)
	// The last value of a duplicated variable wins: these override the
	// caller's, whatever its own platform.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := cmd.CombinedOutput(); err != nil {
		hint := ""
		if bytes.Contains(out, []byte("go.sum")) || bytes.Contains(out, []byte("go mod")) {
			hint = "\nRun `go mod tidy` in your CDK app so that its go.sum covers what the Lambda imports."
		}
		return "", fmt.Errorf("sluice: build the %s Lambda (%s, GOOS=linux GOARCH=arm64): %w\n%s%s",
			name, pkg, err, strings.TrimSpace(string(out)), hint)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, "bootstrap")); err != nil {
		return "", fmt.Errorf("sluice: build the %s Lambda: %w", name, err)
	}
	return dir, nil
}

// sluiceModule asks go which ModulePath the working directory's module
// builds with.
func sluiceModule(goBin string) (*goModule, error) {
	cmd := exec.Command(goBin, "list", "-m", "-json", ModulePath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m %s (run the CDK app from a Go module that requires it): %w: %s",
			ModulePath, err, strings.TrimSpace(stderr.String()))
	}
	var m goModule
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("go list -m %s: %w", ModulePath, err)
	}
	if m.Dir == "" && m.Replace == nil && !m.Main {
		return nil, errors.New("go list -m " + ModulePath + ": the module is not downloaded; run `go mod download` in your CDK app")
	}
	return &m, nil
}

// cacheKey names the cache directory of m's binaries and reports whether
// m's source is immutable: a version from a module proxy (replaced by
// another version or not), rather than a local directory.
func cacheKey(m *goModule) (key string, immutable bool) {
	src := m
	if m.Replace != nil {
		src = m.Replace
	}
	if !m.Main && src.Version != "" {
		return safeName(src.Path + "@" + src.Version), true
	}
	dir := src.Dir
	if dir == "" {
		dir = src.Path // a local replace: go list reports the path as given
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	sum := sha256.Sum256([]byte(dir))
	return "local-" + hex.EncodeToString(sum[:6]), false
}

// safeName makes a module path@version usable as one directory name.
func safeName(s string) string {
	return strings.NewReplacer("/", "_", "\\", "_", ":", "_").Replace(s)
}
