// Package migrations holds Sluice's PostgreSQL schema as plain SQL files in
// goose v3 format (`-- +goose Up` / `-- +goose Down`), numbered in the order
// they apply, and embeds them so every binary that migrates (the migrate
// Lambda, `sluice local`, the tests) carries the same schema.
//
// Never edit a migration that has shipped: add a new numbered file.
// internal/store/postgres.Migrate applies them.
package migrations

import "embed"

// FS holds every migration file at its root.
//
//go:embed *.sql
var FS embed.FS
