package httpapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSlugsDocumented keeps every problem type URI under TypeBase
// resolvable: docs/admin-api.md has an anchor for each slug.
func TestSlugsDocumented(t *testing.T) {
	t.Parallel()
	if !strings.HasPrefix(TypeBase, DocsBase) || !strings.HasSuffix(TypeBase, ".md#") {
		t.Fatalf("TypeBase = %q, want a document under %q and a fragment", TypeBase, DocsBase)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", strings.TrimSuffix(strings.TrimPrefix(TypeBase, DocsBase), "#")))
	if err != nil {
		t.Fatal(err)
	}
	for status, slug := range slugs {
		if !strings.Contains(string(doc), `<a id="`+slug+`"></a>`) {
			t.Errorf("docs/admin-api.md has no anchor for %d %s", status, slug)
		}
	}
}
