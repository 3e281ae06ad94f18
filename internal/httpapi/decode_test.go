package httpapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/rules"
)

// sample has a field of every kind the APIs' bodies use.
type sample struct {
	Name   string       `json:"name"`
	Count  int64        `json:"count"`
	Limit  *int64       `json:"limit,omitempty"`
	On     bool         `json:"on"`
	Period rules.Period `json:"period"`
	At     time.Time    `json:"at"`
	Tags   []string     `json:"tags"`
	Note   string       // no tag: matched by its Go name
	Secret string       `json:"-"`
}

func fe(field, reason string) rules.FieldError { return rules.FieldError{Field: field, Reason: reason} }

// bodyErr is the 400 DecodeBody returns for a body-wide problem.
func bodyErr(detail string) *httpapi.Error { return &httpapi.Error{Status: 400, Detail: detail} }

func TestDecodeBody(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", 100)
	var many, manyWant = []string{}, []rules.FieldError{}
	for i := range 30 {
		k := fmt.Sprintf("f%02d", i)
		many = append(many, `"`+k+`":1`)
		if i < httpapi.MaxFieldErrors {
			manyWant = append(manyWant, fe(k, "unknown field"))
		}
	}
	tests := []struct {
		name     string
		body     string
		required []string
		want     sample // what dst holds when err is nil
		problems []rules.FieldError
		err      *httpapi.Error
	}{
		{name: "every field",
			body: `{"name":"a","count":3,"limit":0,"on":true,"period":"1m","at":"2026-11-29T23:15:00Z","tags":["x"],"Note":"n"}`,
			want: sample{Name: "a", Count: 3, Limit: new(int64(0)), On: true, Period: rules.Period(time.Minute),
				At: time.Date(2026, 11, 29, 23, 15, 0, 0, time.UTC), Tags: []string{"x"}, Note: "n"}},
		{name: "empty object", body: ` {} `},
		{name: "null values leave the zero value", body: `{"name":null,"limit":null,"period":null}`},
		{name: "NUL is for validation", body: `{"name":"a\u0000b"}`, want: sample{Name: "a\x00b"}},
		{name: "required present as 0", body: `{"count":0}`, required: []string{"count"}},
		{name: "required missing", body: `{"name":"a"}`, required: []string{"count", "on"},
			want: sample{Name: "a"}, problems: []rules.FieldError{fe("count", "is required"), fe("on", "is required")}},
		{name: "unknown field", body: `{"nmae":"a","count":2}`, want: sample{Count: 2},
			problems: []rules.FieldError{fe("nmae", "unknown field")}},
		{name: "field in another case", body: `{"Name":"a"}`, problems: []rules.FieldError{fe("Name", "unknown field")}},
		{name: "untagged field by Go name", body: `{"note":"a"}`, problems: []rules.FieldError{fe("note", "unknown field")}},
		{name: "field tagged -", body: `{"Secret":"a","-":"b"}`,
			problems: []rules.FieldError{fe("-", "unknown field"), fe("Secret", "unknown field")}},
		{name: "long unknown key is cut", body: `{"` + long + `":1}`,
			problems: []rules.FieldError{fe(strings.Repeat("k", 64)+"…", "unknown field")}},
		{name: "string for integer", body: `{"count":"10"}`, problems: []rules.FieldError{fe("count", "must be an integer, not string")}},
		{name: "fractional integer", body: `{"count":1.5}`, problems: []rules.FieldError{fe("count", "must be an integer (got number 1.5)")}},
		{name: "integer 1e400", body: `{"limit":1e400}`, want: sample{Limit: new(int64(0))}, problems: []rules.FieldError{fe("limit", "must be an integer (got number 1e400)")}},
		{name: "integer overflow", body: `{"count":99999999999999999999}`,
			problems: []rules.FieldError{fe("count", "must be an integer (got number 99999999999999999999)")}},
		{name: "string for boolean", body: `{"on":"yes"}`, problems: []rules.FieldError{fe("on", "must be a boolean, not string")}},
		{name: "object for string", body: `{"name":{"$ne":null}}`, problems: []rules.FieldError{fe("name", "must be a string, not object")}},
		{name: "string for array", body: `{"tags":"x"}`, problems: []rules.FieldError{fe("tags", "must be an array, not string")}},
		{name: "type's own validation", body: `{"period":"1.5s"}`,
			problems: []rules.FieldError{fe("period", "must be a whole number of seconds")}},
		{name: "bad timestamp", body: `{"at":"yesterday"}`, problems: []rules.FieldError{fe("at", "has an invalid value")}},
		{name: "every problem, sorted, others decoded", body: `{"zz":1,"on":"no","name":"kept","aa":2}`, required: []string{"count"},
			want: sample{Name: "kept"},
			problems: []rules.FieldError{fe("aa", "unknown field"), fe("on", "must be a boolean, not string"),
				fe("zz", "unknown field"), fe("count", "is required")}},
		{name: "at most MaxFieldErrors", body: "{" + strings.Join(many, ",") + "}", required: []string{"count"},
			problems: manyWant},

		{name: "empty", body: "", err: bodyErr("The request body is empty; send a JSON object.")},
		{name: "white space", body: " \n\t", err: bodyErr("The request body is empty; send a JSON object.")},
		{name: "invalid UTF-8 in a string", body: "{\"name\":\"\xff\"}", err: bodyErr("The request body is not valid UTF-8.")},
		{name: "invalid UTF-8 after", body: "{}\xfe", err: bodyErr("The request body is not valid UTF-8.")},
		{name: "truncated", body: `{"name":`, err: bodyErr("The request body is truncated JSON.")},
		{name: "unquoted key", body: `{name:1}`,
			err: bodyErr("The request body is not valid JSON (at byte 2: invalid character 'n' looking for beginning of object key string).")},
		{name: "too deep", body: `{"tags":` + strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000) + `}`,
			err: bodyErr("The request body is not valid JSON (at byte 10008: invalid character '[' exceeded max depth).")},
		{name: "array", body: `[{}]`, err: bodyErr("The request body must be a JSON object, not array.")},
		{name: "string", body: `"s"`, err: bodyErr("The request body must be a JSON object, not string.")},
		{name: "number", body: `12`, err: bodyErr("The request body must be a JSON object, not number.")},
		{name: "null", body: `null`, err: bodyErr("The request body must be a JSON object.")},
		{name: "two objects", body: `{"name":"a"} {}`, err: bodyErr("The request body has data after the JSON object.")},
		{name: "trailing garbage", body: `{"name":"a"} x`, err: bodyErr("The request body has data after the JSON object.")},
		{name: "duplicate key", body: `{"name":"a","count":1,"name":"b"}`,
			err: httpapi.BadRequest(fe("name", "appears more than once"))},
		{name: "duplicate unknown key", body: `{"x":1,"x":2}`, err: httpapi.BadRequest(fe("x", "appears more than once"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got sample
			problems, err := httpapi.DecodeBody([]byte(tc.body), &got, tc.required...)
			if tc.err != nil {
				var e *httpapi.Error
				if !errors.As(err, &e) {
					t.Fatalf("DecodeBody(%.40q) error = %v, want %v", tc.body, err, tc.err)
				}
				if diff := cmp.Diff(tc.err, e); diff != "" {
					t.Errorf("DecodeBody(%.40q) error mismatch (-want +got):\n%s", tc.body, diff)
				}
				if problems != nil {
					t.Errorf("DecodeBody(%.40q) problems = %v with an error, want none", tc.body, problems)
				}
				if diff := cmp.Diff(sample{}, got); diff != "" {
					t.Errorf("DecodeBody(%.40q) wrote dst with an error (-want +got):\n%s", tc.body, diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeBody(%.40q) error = %v, want none", tc.body, err)
			}
			if diff := cmp.Diff(tc.problems, problems, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("DecodeBody(%.40q) problems mismatch (-want +got):\n%s", tc.body, diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DecodeBody(%.40q) decoded mismatch (-want +got):\n%s", tc.body, diff)
			}
		})
	}
}

// batch nests objects as POST /batch does: a slice of structs holding
// pointers to structs.
type batch struct {
	Set  string `json:"set"`
	Ops  []op   `json:"ops"`
	Head *op    `json:"head,omitempty"`
}

type op struct {
	Action string  `json:"action"`
	Item   *sample `json:"item,omitempty"`
}

// TestDecodeBodyNested: a body's nested objects are decoded as strictly as
// its top level, every problem named by its path.
func TestDecodeBodyNested(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		body     string
		want     batch
		problems []rules.FieldError
		err      *httpapi.Error
	}{
		{name: "every level", body: `{"set":"s","ops":[{"action":"a","item":{"name":"x","period":"1m"}},{"action":"b"}],"head":{"action":"h"}}`,
			want: batch{Set: "s", Ops: []op{{Action: "a", Item: &sample{Name: "x", Period: rules.Period(time.Minute)}}, {Action: "b"}}, Head: &op{Action: "h"}}},
		{name: "null", body: `{"ops":null,"head":null}`},
		{name: "empty array", body: `{"ops":[]}`, want: batch{Ops: []op{}}},
		{name: "key in another case", body: `{"Set":"s","ops":[{"Action":"a"}]}`, want: batch{Ops: []op{{}}},
			problems: []rules.FieldError{fe("Set", "unknown field"), fe("ops[0].Action", "unknown field")}},
		{name: "deep problems, others decoded", body: `{"ops":[{"action":"a","item":{"Name":"x","count":"1","on":true}}]}`,
			want:     batch{Ops: []op{{Action: "a", Item: &sample{On: true}}}},
			problems: []rules.FieldError{fe("ops[0].item.Name", "unknown field"), fe("ops[0].item.count", "must be an integer, not string")}},
		{name: "type's own validation", body: `{"ops":[{"item":{"period":"0s"}}]}`, want: batch{Ops: []op{{Item: &sample{}}}},
			problems: []rules.FieldError{fe("ops[0].item.period", "must be at least 1s")}},
		{name: "array for object", body: `{"head":[]}`, want: batch{Head: &op{}},
			problems: []rules.FieldError{fe("head", "must be an object, not array")}},
		{name: "number for object", body: `{"ops":[1]}`, want: batch{Ops: []op{{}}},
			problems: []rules.FieldError{fe("ops[0]", "must be an object, not number")}},
		{name: "object for array", body: `{"ops":{}}`, problems: []rules.FieldError{fe("ops", "must be an array, not object")}},
		{name: "duplicate key in an element", body: `{"ops":[{"action":"a","action":"b"}]}`,
			err: httpapi.BadRequest(fe("ops[0].action", "appears more than once"))},
		{name: "duplicate key deeper", body: `{"ops":[{},{"item":{"name":"a","count":1,"name":"b"}}]}`,
			err: httpapi.BadRequest(fe("ops[1].item.name", "appears more than once"))},
		{name: "same key in two objects", body: `{"ops":[{"action":"a"},{"action":"b"}],"head":{"action":"c"}}`,
			want: batch{Ops: []op{{Action: "a"}, {Action: "b"}}, Head: &op{Action: "c"}}},
		{name: "trailing data", body: `{"set":"s"}{"set":"t"}`, err: bodyErr("The request body has data after the JSON object.")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got batch
			problems, err := httpapi.DecodeBody([]byte(tc.body), &got)
			if tc.err != nil {
				if diff := cmp.Diff(error(tc.err), err); diff != "" {
					t.Errorf("DecodeBody(%.60q) error mismatch (-want +got):\n%s", tc.body, diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeBody(%.60q) error = %v, want none", tc.body, err)
			}
			if diff := cmp.Diff(tc.problems, problems, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("DecodeBody(%.60q) problems mismatch (-want +got):\n%s", tc.body, diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DecodeBody(%.60q) decoded mismatch (-want +got):\n%s", tc.body, diff)
			}
		})
	}
}

func TestWithValidation(t *testing.T) {
	t.Parallel()
	other := errors.New("store down")
	invalid := func(fs ...rules.FieldError) func() error {
		return func() error { return &rules.ValidationError{Fields: fs} }
	}
	valid := func() error { return nil }
	var nineteen []rules.FieldError
	for i := range httpapi.MaxFieldErrors - 1 {
		nineteen = append(nineteen, fe(fmt.Sprintf("f%02d", i), "unknown field"))
	}
	tests := []struct {
		name     string
		decoded  []rules.FieldError
		validate func() error
		want     []rules.FieldError // the 400's fields; nil means no 400
		wantErr  error              // when not a 400
	}{
		{name: "all good", validate: valid},
		{name: "validation only", validate: invalid(fe("limit", "must be positive")),
			want: []rules.FieldError{fe("limit", "must be positive")}},
		{name: "decoding only", decoded: []rules.FieldError{fe("x", "unknown field")}, validate: valid,
			want: []rules.FieldError{fe("x", "unknown field")}},
		{name: "both, decoding wins on a field",
			decoded:  []rules.FieldError{fe("limit", "must be an integer, not string"), fe("x", "unknown field")},
			validate: invalid(fe("limit", "is required"), fe("period", "is required")),
			want:     []rules.FieldError{fe("limit", "must be an integer, not string"), fe("x", "unknown field"), fe("period", "is required")}},
		{name: "at most MaxFieldErrors", decoded: nineteen, validate: invalid(fe("a", "bad"), fe("b", "bad")),
			want: append(append([]rules.FieldError(nil), nineteen...), fe("a", "bad"))},
		{name: "another error stands", decoded: []rules.FieldError{fe("x", "unknown field")},
			validate: func() error { return other }, wantErr: other},
		{name: "another error without decoding problems", validate: func() error { return other }, wantErr: other},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := httpapi.WithValidation(tc.decoded, tc.validate)
			switch {
			case tc.wantErr != nil:
				if err != tc.wantErr {
					t.Errorf("WithValidation() = %v, want %v", err, tc.wantErr)
				}
			case tc.want == nil:
				if err != nil {
					t.Errorf("WithValidation() = %v, want nil", err)
				}
			default:
				var e *httpapi.Error
				if !errors.As(err, &e) || e.Status != http.StatusBadRequest {
					t.Fatalf("WithValidation() = %v, want a 400 *Error", err)
				}
				if diff := cmp.Diff(tc.want, e.Fields); diff != "" {
					t.Errorf("WithValidation() fields mismatch (-want +got):\n%s", diff)
				}
				var ve *rules.ValidationError
				if fromValidate := tc.validate() != nil; errors.As(e, &ve) != fromValidate {
					t.Errorf("WithValidation() = %#v: wraps a ValidationError %v, want %v", e, !fromValidate, fromValidate)
				}
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"limit", "limit"},
		{strings.Repeat("a", 64), strings.Repeat("a", 64)},
		{strings.Repeat("a", 65), strings.Repeat("a", 64) + "…"},
		{strings.Repeat("€", 30), strings.Repeat("€", 21) + "…"}, // 90 bytes; 64 falls inside the 22nd
		{strings.Repeat("a", 63) + "\xff\xfe", strings.Repeat("a", 63) + "…"},
	}
	for _, tc := range tests {
		if got := httpapi.Truncate(tc.in); got != tc.want {
			t.Errorf("Truncate(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzDecodeBody: DecodeBody never panics, into a flat struct or a nested
// one; every failure is a 400 that renders as a problem; what it accepts
// without a problem, encoding/json decodes to the same value; and field
// problems are few and short.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","count":3,"limit":0,"on":true,"period":"1m","at":"2026-11-29T23:15:00Z","tags":["x"],"Note":"n"}`,
		`{}`, `{"count":1e400}`, `{"period":"1.5s"}`, `{"count":-1}`, `[[[[`, `{"a":`, `null`, `{"name":"\u0000"}`,
		"{\"name\":\"\xff\"}", `{"Name":1}`, `{} {}`, `{"name":"a","name":"b"}`, `{"tags":[1,{}]}`, `{"at":5}`,
		`{"subject":"s","api":"a","route":"GET /x","cost":2}`,
		`{"set":"s","ops":[{"action":"a","item":{"name":"x","count":1}}],"head":null}`, `{"ops":[{"Action":"a"}]}`,
		`{"ops":[{"item":{"name":"a","name":"b"}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzDecode[sample](t, body, "count")
		fuzzDecode[batch](t, body)
	})
}

func fuzzDecode[T any](t *testing.T, body []byte, required ...string) {
	var got T
	problems, err := httpapi.DecodeBody(body, &got, required...)
	if err != nil {
		var e *httpapi.Error
		if !errors.As(err, &e) || e.Status != 400 || e.Detail == "" || problems != nil {
			t.Fatalf("DecodeBody(%q) = %v, %v; want a 400 *Error with a detail and no problems", body, problems, err)
		}
		status, _, b := httpapi.Render(httpapi.TypeBase, err)
		if status != 400 || !json.Valid(b) {
			t.Fatalf("Render(DecodeBody(%q)) = %d %q, want a 400 problem", body, status, b)
		}
		return
	}
	if len(problems) > httpapi.MaxFieldErrors {
		t.Fatalf("DecodeBody(%q) gave %d problems, want at most %d", body, len(problems), httpapi.MaxFieldErrors)
	}
	for _, p := range problems {
		if p.Reason == "" || !utf8.ValidString(p.Field) {
			t.Fatalf("DecodeBody(%q) problem %+v, want a reason and a UTF-8 field", body, p)
		}
		for _, part := range strings.Split(p.Field, ".") { // each key of the path is cut short
			if len(part) > 64+len("…")+len("[99999]") {
				t.Fatalf("DecodeBody(%q) problem %+v, want each key of the path short", body, p)
			}
		}
	}
	if len(problems) > 0 {
		return
	}
	var std T
	if err := json.Unmarshal(body, &std); err != nil {
		t.Fatalf("DecodeBody(%q) accepted what encoding/json rejects: %v", body, err)
	}
	if diff := cmp.Diff(std, got); diff != "" {
		t.Fatalf("DecodeBody(%q) and encoding/json disagree (-json +DecodeBody):\n%s", body, diff)
	}
}

// BenchmarkDecodeBodyNested decodes a body shaped as a batch of 5,000
// ops, the size of sluice apply's largest (TestApplyLarge).
func BenchmarkDecodeBodyNested(b *testing.B) {
	var s strings.Builder
	s.WriteString(`{"set":"bulk","ops":[`)
	for i := range 5000 {
		if i > 0 {
			s.WriteString(",")
		}
		fmt.Fprintf(&s, `{"action":"update","item":{"name":"r%d","count":20,"limit":20,"period":"1m","tags":["a"]}}`, i)
	}
	s.WriteString("]}")
	body := []byte(s.String())
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var got batch
		if problems, err := httpapi.DecodeBody(body, &got); err != nil || problems != nil {
			b.Fatal(problems, err)
		}
	}
}
