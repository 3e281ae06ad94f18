package memory_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/memory"
	"github.com/sluicehq/sluice/internal/store/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o store.Options) store.Store { return memory.NewWithOptions(o) })
}

// FuzzListCursor: any cursor either continues a list or is a
// ValidationError on "cursor"; none panics or errs otherwise.
func FuzzListCursor(f *testing.F) {
	s := memory.New()
	limit := int64(1)
	for i := range 5 {
		if _, err := s.CreateRule(f.Context(), rules.Rule{API: "a", Route: "*", Subject: fmt.Sprint(i), Limit: &limit, Period: rules.Period(time.Second)}, "fuzz"); err != nil {
			f.Fatal(err)
		}
	}
	page, err := s.ListRules(f.Context(), rules.Filter{Limit: 2})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(page.NextCursor)
	f.Add("")
	f.Add("cjE6")
	f.Fuzz(func(t *testing.T, cursor string) {
		_, err := s.ListRules(t.Context(), rules.Filter{Limit: 2, Cursor: cursor})
		var ve *rules.ValidationError
		if err != nil && (!errors.As(err, &ve) || ve.Fields[0].Field != "cursor") {
			t.Errorf("ListRules(cursor %q) error = %v, want nil or a ValidationError on cursor", cursor, err)
		}
	})
}
