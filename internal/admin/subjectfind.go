package admin

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/stats"
)

// FindSubjectRequest is the body of POST /subjects/find. The subject
// travels in a body, not a path or query, so that access logs and browser
// history never hold it: it may be an API key.
type FindSubjectRequest struct {
	// Subject is the subject as a request carries it: "customer-42".
	Subject string `json:"subject"`
	// Window and Top pick the lists to look in, as GET /stats's window
	// and top do; defaults 5m and 10.
	Window string `json:"window,omitempty"`
	Top    int    `json:"top,omitempty"`
}

// FindSubjectResponse is the answer to POST /subjects/find. It never
// repeats the subject.
type FindSubjectResponse struct {
	// Hash is the subject's keyed hash, how the decision log, the stats
	// and the bucket keys name it (the deployment's subject HMAC key).
	Hash string `json:"hash"`
	// Window is the window looked in, such as "5m".
	Window string `json:"window"`
	// Searched is false when no decision statistics are configured here
	// (GET /stats answers 503): then only Hash is an answer.
	Searched bool `json:"searched"`
	// Found reports whether the subject is among the top denied subjects
	// of the window; Matches says where.
	Found   bool           `json:"found"`
	Matches []SubjectMatch `json:"matches"`
}

// SubjectMatch is one entry of GET /stats's subjects that is the subject's.
type SubjectMatch struct {
	// Rank is the entry's place in the top denied subjects, from 1.
	Rank int `json:"rank"`
	stats.SubjectStat
}

// findSubject answers POST /subjects/find: the subject's keyed hash and
// where it is in the top denied subjects, so an operator can tell whether
// customer-42 is the one being limited without reading hashes by eye.
func (s *Service) findSubject(ctx context.Context, c *call) (reply, error) {
	var in FindSubjectRequest
	problems, err := httpapi.DecodeBody(c.Body, &in, "subject")
	if err != nil {
		return reply{}, err
	}
	t, err := rules.NormalizeTarget(rules.Target{Subject: in.Subject}, rules.PartSubject)
	var ve *rules.ValidationError
	if errors.As(err, &ve) && !slices.ContainsFunc(problems, func(f rules.FieldError) bool { return f.Field == "subject" }) {
		problems = append(problems, ve.Fields...)
	}
	window, top, fs := s.statsParams(in.Window, in.Top)
	if problems = append(problems, fs...); len(problems) > 0 {
		return reply{}, httpapi.BadRequest(problems...)
	}
	if s.o.SubjectHash == nil {
		return reply{}, &httpapi.Error{Status: http.StatusServiceUnavailable,
			Detail: "Subject hashing is not configured here: the admin service has no subject hash key."}
	}
	out := FindSubjectResponse{Hash: s.o.SubjectHash(t.Subject), Window: shortDuration(window), Matches: []SubjectMatch{}}
	if s.o.Stats == nil {
		// The hash alone still answers "which of these hashes is it" in
		// logs and in another view of the lists.
		return reply{status: http.StatusOK, body: out}, nil
	}
	rep, err := s.topContributors(ctx, window, top)
	if err != nil {
		return reply{}, err
	}
	out.Searched = true
	for i, st := range rep.Subjects {
		if st.Subject == out.Hash {
			out.Matches = append(out.Matches, SubjectMatch{Rank: i + 1, SubjectStat: st})
		}
	}
	out.Found = len(out.Matches) > 0
	return reply{status: http.StatusOK, body: out}, nil
}
