// Package console is Sluice's web console: static HTML, CSS and JavaScript
// embedded in the binary, with no framework, no CDN and no request to
// anywhere but the admin API on the same origin, so it works offline.
//
// The package only serves the files. It knows nothing of AWS or of how
// the admin API is reached: the page calls ../admin/... relative to
// itself, which `sluice local` answers with its admin API and `sluice
// console` with a proxy that signs each call with the operator's AWS
// credentials. Both guard /admin/ with a bearer token, which the page
// reads from its URL fragment (#token=…; never sent to a server) and keeps
// in sessionStorage.
package console

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// files is the embedded assets directory.
var files = func() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the directory is embedded above: cannot happen
	}
	return sub
}()

// securityHeaders lock the page to its own origin: scripts, styles and
// fetches from itself only, no framing, no referrer.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"X-Frame-Options":        "DENY",
	// The assets change with the binary; revalidate rather than serve a
	// stale console against a newer API.
	"Cache-Control": "no-cache",
}

// Handler serves the console at the root of whatever prefix it is mounted
// under (strip it with http.StripPrefix): "/" is the page, the rest are its
// assets. Only GET and HEAD are answered.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name == "" {
			name = "index.html"
		}
		b, err := fs.ReadFile(files, name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		// Embedded files have no modification time: ServeContent sets the
		// type from the name and answers ranges and HEAD.
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
	})
}

// Size returns the total size in bytes of the embedded files: the whole
// page weight, uncompressed.
func Size() (int64, error) {
	var total int64
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		return nil
	})
	return total, err
}
