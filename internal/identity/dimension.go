package identity

import (
	"errors"
	"fmt"
	"strings"
)

// MaxDimensions bounds the named dimensions beside the default one: each
// adds up to four buckets (the rate and quota rules of the API-wide and
// route scopes) to the limiter's MaxBuckets (16).
const MaxDimensions = 3

// DefaultDimension names the dimension SUBJECT_SOURCES finds.
const DefaultDimension = "default"

// Dimension is one more subject a request is limited on, beside the
// default one: a name the rules refer to (rules.Rule.Dimension) and the
// sources its subject is read from, in order.
type Dimension struct {
	Name    string
	Sources []Source
}

// String returns d in the form ParseDimensions reads.
func (d Dimension) String() string { return d.Name + "=" + FormatSources(d.Sources) }

// FormatDimensions returns ds in the form ParseDimensions reads.
func FormatDimensions(ds []Dimension) string { return join(ds, ";") }

// ParseDimensions reads DIMENSIONS: "name=sources;name=sources", such as
// "ip=ip;tenant=jwt:custom:tenant", each sources a SUBJECT_SOURCES list.
// Names are 1 to 32 of [a-z0-9_-] starting with a letter, unique, and not
// "default"; at most MaxDimensions. Empty gives none. Every problem is
// reported.
func ParseDimensions(s string) ([]Dimension, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	seen := map[string]bool{}
	return parseList(s, ";", MaxDimensions, "%d dimensions, at most %d beside the default", func(item string) (Dimension, error) {
		name, sources, ok := strings.Cut(item, "=")
		name = strings.ToLower(strings.TrimSpace(name))
		switch {
		case !ok || strings.TrimSpace(sources) == "":
			return Dimension{}, fmt.Errorf("dimension %q: want <name>=<sources>, such as ip=ip", item)
		case !validDimension(name):
			return Dimension{}, fmt.Errorf("dimension %q: a name is 1 to 32 lower-case letters, digits, '_' or '-', starting with a letter", name)
		case name == DefaultDimension:
			return Dimension{}, errors.New(`dimension "default" is SUBJECT_SOURCES: name the others`)
		case seen[name]:
			return Dimension{}, fmt.Errorf("dimension %q given twice", name)
		}
		seen[name] = true
		src, err := ParseSources(sources)
		if err != nil {
			return Dimension{}, fmt.Errorf("dimension %q: %w", name, err)
		}
		return Dimension{Name: name, Sources: src}, nil
	})
}

// validDimension mirrors rules.ValidDimension (identity imports nothing of
// the module).
func validDimension(name string) bool {
	return name != "" && len(name) <= 32 && 'a' <= name[0] && name[0] <= 'z' &&
		strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") == ""
}
