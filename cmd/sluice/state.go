package main

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// stateDir is where `sluice local` keeps what must survive a restart: the
// subject hash key (so buckets in a persistent Redis keep their names) and
// the development JWT issuer's signing key (so tokens stay valid).
// SLUICE_STATE_DIR, else <user config dir>/sluice.
func stateDir() (string, error) {
	if d := os.Getenv("SLUICE_STATE_DIR"); d != "" {
		return d, nil
	}
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find a directory for local state (set SLUICE_STATE_DIR): %w", err)
	}
	return filepath.Join(base, "sluice"), nil
}

// localSecret returns the hex secret of n random bytes kept in file name of
// the state directory, creating it (mode 0600) on first use.
func localSecret(name string, n int) (string, error) {
	dir, err := stateDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err == nil {
		if s := strings.TrimSpace(string(b)); len(s) >= 2*n {
			return s, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	raw := make([]byte, n)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generate %s: %w", name, err)
	}
	s := hex.EncodeToString(raw)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create state directory: %w", err)
	}
	// Write then rename, so two sluices started at once never read half a
	// key; the second rename wins and both re-read it below.
	tmp, err := os.CreateTemp(dir, name+".*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := tmp.WriteString(s + "\n")
	if err := cmp.Or(werr, tmp.Close(), os.Rename(tmp.Name(), path)); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	b, err = os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}
