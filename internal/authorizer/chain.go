package authorizer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/rules"
)

// upstreamMiss says why the subject sources found no subject in a request
// an upstream authorizer allowed, up being what it said of the caller: f
// is what identity.Find found, from the kind of the source it refused. It
// names the upstream's principalId or context key, never a value; a
// refused value's problem is the one subject hygiene's
// (rules.NormalizeTarget). Only a refusal is worked out here: the
// decision itself never pays for it.
func (a *Authorizer) upstreamMiss(up *identity.UpstreamIdentity, from identity.SourceKind, f identity.Finding) error {
	var names []string
	for i := range a.sources {
		s := &a.sources[i]
		var what, v string
		switch s.Kind {
		case identity.SourcePrincipal:
			what, v = "principalId", up.Principal
		case identity.SourceContext:
			what, v = "context key "+strconv.Quote(s.Name), up.Context[s.Name]
		default:
			if f == identity.Refused && s.Kind == from {
				return fmt.Errorf("the %s source's value is refused: too long, not valid UTF-8 or sent twice", s)
			}
			continue
		}
		if f == identity.Refused && s.Kind == from && strings.TrimSpace(v) != "" {
			_, err := rules.NormalizeTarget(rules.Target{Subject: v}, rules.PartSubject)
			if err == nil {
				err = errors.New("refused") // Find and NormalizeTarget bound a subject alike
			}
			return fmt.Errorf("upstream authorizer's %s: %w", what, err)
		}
		names = append(names, what)
	}
	if len(names) == 0 {
		return fmt.Errorf("no subject source (%s) has a value", identity.FormatSources(a.sources))
	}
	return fmt.Errorf("upstream authorizer gave no %s with a string, number or boolean value", strings.Join(names, " or "))
}
