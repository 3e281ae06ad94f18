package local

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/identity"
)

// stateDir is where `sluice local` keeps what must survive a restart: the
// subject hash key (so buckets in a persistent Redis keep their names) and
// the development JWT issuer's signing key (so tokens stay valid).
// dir when given (SLUICE_STATE_DIR), else <user config dir>/sluice.
func stateDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find a directory for local state (set SLUICE_STATE_DIR): %w", err)
	}
	return filepath.Join(base, "sluice"), nil
}

// localSecret returns the hex secret of n random bytes kept in file name
// of the state directory, creating it on first use.
func localSecret(dir, name string, n int) (string, error) {
	b, err := localFile(dir, name, func() ([]byte, error) {
		return []byte(randomHex(n) + "\n"), nil
	})
	return strings.TrimSpace(string(b)), err
}

// localFile returns the content of file name in the state directory,
// creating it (mode 0600, directory 0700) with gen on first use.
func localFile(dir, name string, gen func() ([]byte, error)) ([]byte, error) {
	dir, err := stateDir(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err == nil && len(bytes.TrimSpace(b)) > 0 {
		return b, nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	content, err := gen()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	// Write then rename, so two sluices started at once never read half a
	// file; the second rename wins and both re-read it below.
	tmp, err := os.CreateTemp(dir, name+".*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := tmp.Write(content)
	if err := cmp.Or(werr, tmp.Close(), os.Rename(tmp.Name(), path)); err != nil {
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if b, err = os.ReadFile(path); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// startDevIssuer starts `sluice local`'s development JWT issuer when a
// jwt: source is configured and JWT_ISSUER is not: it opens the listener
// now (the JWKS URL names its address), loads or makes the signing
// key in the state directory, and sets JWT_ISSUER and JWT_AUDIENCE in
// overlay for the configuration (JWT_JWKS_URL too).
func startDevIssuer(c *Config, getenv func(string) string, overlay map[string]string) error {
	srcs, err := identity.ParseSources(cmp.Or(getenv("SUBJECT_SOURCES"), Defaults["SUBJECT_SOURCES"]))
	jwt := err == nil && identity.HasKind(srcs, identity.SourceJWT)
	if dims, err := identity.ParseDimensions(getenv("DIMENSIONS")); err == nil {
		for _, d := range dims {
			jwt = jwt || identity.HasKind(d.Sources, identity.SourceJWT)
		}
	}
	if !jwt || getenv("JWT_ISSUER") != "" {
		return nil // a bad SUBJECT_SOURCES or DIMENSIONS is reported by FromEnv
	}
	pemKey, err := localFile(c.StateDir, "dev-issuer.pem", identity.NewDevKey)
	if err != nil {
		return err
	}
	key, err := identity.ParseDevKey(pemKey)
	if err != nil {
		return fmt.Errorf("development issuer key in the state directory (delete it to make a new one): %w", err)
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.Addr, err)
	}
	// The issuer's name does not depend on the port (0 picks another at
	// each start), so tokens outlive a restart; its keys are served here.
	if c.dev, err = identity.NewDevIssuer(identity.DevIssuerName, key); err != nil {
		ln.Close()
		return err
	}
	c.ln = ln
	overlay["JWT_ISSUER"] = identity.DevIssuerName
	overlay["JWT_AUDIENCE"] = identity.DevAudience
	overlay["JWT_JWKS_URL"] = "http://" + ln.Addr().String() + "/.well-known/jwks.json"
	return nil
}

// jwtClaim returns the claim of the first jwt: source.
func jwtClaim(sources []identity.Source) string {
	for _, s := range sources {
		if s.Kind == identity.SourceJWT {
			return s.Name
		}
	}
	return ""
}

// mountJWKS serves the development issuer's JWKS on mux, when there is
// an issuer.
func mountJWKS(mux *http.ServeMux, dev *identity.DevIssuer) {
	if dev == nil {
		return
	}
	jwks := dev.JWKS()
	mux.HandleFunc(jwksPattern, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(jwks) //nolint:errcheck // the client has gone
	})
}

// addDevToken gives the banner a day's token of the development issuer
// for its curl line, and the claim the subject is read from, when there
// is an issuer.
func (bi *bannerInfo) addDevToken(dev *identity.DevIssuer, sources []identity.Source) error {
	if dev == nil {
		return nil
	}
	t, err := dev.Sign("alice", nil, 24*time.Hour, time.Now())
	if err != nil {
		return err
	}
	bi.devToken, bi.jwtClaim = t, jwtClaim(sources)
	return nil
}
