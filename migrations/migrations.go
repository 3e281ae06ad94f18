// Package migrations holds Sluice's PostgreSQL schema as plain SQL files in
// goose v3 format (`-- +goose Up` / `-- +goose Down`), numbered in the order
// they apply, and embeds them so every binary that migrates (the migrate
// Lambda, `sluice local`, the tests) carries the same schema.
//
// Never edit a migration that has shipped: add a new numbered file.
// internal/store/postgres.Migrate applies them.
package migrations

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
)

// FS holds every migration file at its root.
//
//go:embed *.sql
var FS embed.FS

// Digest identifies this set of migrations: a SHA-256 over every file's
// name and content, in order, as 64 hex digits. The stack passes it to the
// migration custom resource, so CloudFormation sends an Update only when
// the migrations change, and the migrate function tells a rollback (the
// template names another set than the one it carries) from a deploy.
func Digest() string {
	names, err := fs.Glob(FS, "*.sql")
	if err != nil {
		panic(err) // the pattern is valid and FS is embedded
	}
	h := sha256.New()
	for _, name := range names {
		b, err := fs.ReadFile(FS, name)
		if err != nil {
			panic(err) // embedded: always readable
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}
