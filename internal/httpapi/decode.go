package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/rules"
)

// DecodeBody decodes a JSON object into dst, a pointer to a struct, field by
// field, so that every problem names its field: unknown fields (names match
// exactly, not case-insensitively as encoding/json would), keys that appear
// twice, wrong types, values out of range; what a value may hold (NUL bytes
// included) is for the caller's validation. An empty body, malformed JSON,
// a non-object, trailing data and invalid UTF-8 are reported on the body as
// a whole. The fields named in required must be present (for non-pointer
// numbers, where absent and 0 look the same). Struct fields are matched by
// their json tag's name, else their Go name; fields tagged "-" and
// unexported fields are unknown, and embedded structs are not flattened.
// dst must be a non-nil pointer to a struct, or DecodeBody panics.
//
// The same holds at every depth: a field that is a struct, a pointer to
// one or a slice of either (without its own UnmarshalJSON) is decoded
// member by member too, and its problems are named by path, such as
// "ops[1].rule.limit". A key twice in any object is a body-wide problem
// naming its path.
//
// A body-wide problem comes back as err, a 400 *Error, and dst is then
// untouched. Field problems come back as problems (at most
// MaxFieldErrors of them, sorted by key, then the missing required fields),
// with every other field decoded into dst, so that the caller can validate
// the rest and report everything at once (WithValidation); a field that did
// not decode may hold a zero or partial value. The body's size is the
// caller's to bound.
func DecodeBody(body []byte, dst any, required ...string) (problems []rules.FieldError, err error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, bodyError("The request body is empty; send a JSON object.")
	}
	if !utf8.Valid(body) {
		// encoding/json would silently replace invalid bytes with U+FFFD.
		return nil, bodyError("The request body is not valid UTF-8.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		return nil, syntaxProblem(err)
	}
	if obj == nil {
		return nil, bodyError("The request body must be a JSON object.")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, bodyError("The request body has data after the JSON object.")
	}
	if k := duplicateKey(body); k != "" {
		// Parsers disagree on which copy wins; refuse to guess.
		return nil, BadRequest(FieldError(k, "appears more than once"))
	}

	d := decoder{}
	d.object("", obj, reflect.ValueOf(dst).Elem())
	problems = d.problems
	for _, k := range required {
		if _, ok := obj[k]; !ok && len(problems) < MaxFieldErrors {
			problems = append(problems, FieldError(k, "is required"))
		}
	}
	return problems, nil
}

// WithValidation joins the field problems DecodeBody found with those of
// validate (run on the fields that did decode), so that one 400 lists
// everything wrong with a body. A field already reported by decoding is not
// reported again: validate sees its zero value, not what was sent.
//
// It returns nil when there is no problem; a 400 *Error listing them (at
// most MaxFieldErrors) when decoding found some or validate returns a
// *rules.ValidationError, which is then the Error's Err; or validate's
// error as it is when that is something else.
func WithValidation(decoded []rules.FieldError, validate func() error) error {
	err := validate()
	var ve *rules.ValidationError
	if err != nil && !errors.As(err, &ve) {
		return err
	}
	if len(decoded) == 0 && ve == nil {
		return nil
	}
	problems := decoded
	if ve != nil {
		for _, p := range ve.Fields {
			reported := slices.ContainsFunc(decoded, func(d rules.FieldError) bool { return d.Field == p.Field })
			if !reported && len(problems) < MaxFieldErrors {
				problems = append(problems, p)
			}
		}
	}
	e := BadRequest(problems...)
	if ve != nil {
		e.Err = err
	}
	return e
}

// MaxFieldErrors bounds the field problems reported for one body, so that a
// 64 KiB body of unknown fields does not get a megabyte of problems back.
const MaxFieldErrors = 20

// duplicateKey returns the path of a key that appears twice in one object
// of the JSON value in body (already known to be valid, so at most
// encoding/json's 10,000 levels deep), or "".
func duplicateKey(body []byte) string {
	dup, _ := duplicateIn(json.NewDecoder(bytes.NewReader(body)), "")
	return dup
}

// duplicateIn reads one JSON value from dec, at path, and returns the path
// of the first key repeated in an object of it.
func duplicateIn(dec *json.Decoder, path string) (string, error) {
	t, err := dec.Token()
	if err != nil {
		return "", err
	}
	switch t {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return "", err
			}
			k, _ := t.(string)
			p := member(path, k)
			if seen[k] {
				return p, nil
			}
			seen[k] = true
			if dup, err := duplicateIn(dec, p); dup != "" || err != nil {
				return dup, err
			}
		}
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if dup, err := duplicateIn(dec, element(path, i)); dup != "" || err != nil {
				return dup, err
			}
		}
	default:
		return "", nil
	}
	_, err = dec.Token() // the closing delimiter
	return "", err
}

// member is the path of key k in the object at path; element that of
// element i of the array at path. A key is cut short (Truncate).
func member(path, k string) string {
	if path == "" {
		return Truncate(k)
	}
	return path + "." + Truncate(k)
}

func element(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// decoder decodes a body's members one by one, collecting the problems.
type decoder struct {
	problems []rules.FieldError
}

func (d *decoder) add(fs ...rules.FieldError) {
	for _, f := range fs {
		if len(d.problems) < MaxFieldErrors {
			d.problems = append(d.problems, f)
		}
	}
}

// object decodes the members of obj, at path, into the struct v, each by
// its exact name, in key order.
func (d *decoder) object(path string, obj map[string]json.RawMessage, v reflect.Value) {
	fields := jsonFields(v.Type())
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if len(d.problems) >= MaxFieldErrors {
			return
		}
		p := member(path, k)
		idx, ok := fields[k]
		if !ok {
			d.add(FieldError(p, "unknown field"))
			continue
		}
		d.value(p, obj[k], v.Field(idx))
	}
}

// value decodes raw, at path, into v: member by member when v is nested,
// else as encoding/json does. null leaves a struct as it is and sets a
// pointer or slice to nil, as encoding/json does.
func (d *decoder) value(path string, raw json.RawMessage, v reflect.Value) {
	t := v.Type()
	if !nested(t) {
		if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
			d.add(fieldProblems(path, t, err)...)
		}
		return
	}
	null := bytes.Equal(raw, []byte("null"))
	switch t.Kind() {
	case reflect.Pointer:
		if null {
			v.SetZero()
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		d.value(path, raw, v.Elem())
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			d.add(fieldProblems(path, t, err)...)
			return
		}
		if obj != nil { // null
			d.object(path, obj, v)
		}
	case reflect.Slice:
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			d.add(fieldProblems(path, t, err)...)
			return
		}
		if null {
			v.SetZero()
			return
		}
		s := reflect.MakeSlice(t, len(elems), len(elems))
		for i, e := range elems {
			if len(d.problems) >= MaxFieldErrors {
				break
			}
			d.value(element(path, i), e, s.Index(i))
		}
		v.Set(s)
	}
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// nested reports whether DecodeBody decodes a value of type t member by
// member: a struct without its own UnmarshalJSON, or a pointer to or a
// slice of such.
func nested(t reflect.Type) bool {
	if t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler) {
		return false
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice:
		return nested(t.Elem())
	case reflect.Struct:
		return true
	}
	return false
}

func bodyError(detail string) *Error {
	return &Error{Status: 400, Detail: detail}
}

// syntaxProblem describes why the body is not one JSON object.
func syntaxProblem(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return bodyError(fmt.Sprintf("The request body is not valid JSON (at byte %d: %s).", se.Offset,
			strings.TrimPrefix(se.Error(), "json: ")))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return bodyError("The request body is truncated JSON.")
	case errors.As(err, &te):
		return bodyError("The request body must be a JSON object, not " + te.Value + ".")
	}
	return bodyError("The request body is not a JSON object.")
}

// fieldProblems describes why one field's JSON value does not fit its Go
// type.
func fieldProblems(key string, t reflect.Type, err error) []rules.FieldError {
	var ve *rules.ValidationError
	if errors.As(err, &ve) {
		fs := make([]rules.FieldError, len(ve.Fields))
		for i, f := range ve.Fields {
			fs[i] = FieldError(key, f.Reason)
		}
		return fs
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := describe(t)
		if strings.HasPrefix(te.Value, "number") && want == "an integer" {
			return []rules.FieldError{FieldError(key, "must be "+want+" (got "+Truncate(te.Value)+")")}
		}
		return []rules.FieldError{FieldError(key, "must be "+want+", not "+firstWord(te.Value))}
	}
	return []rules.FieldError{FieldError(key, "has an invalid value")}
}

// describe names the JSON a Go type expects, for a person.
func describe(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.String() == "time.Time" {
		return "an RFC 3339 timestamp string"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.Kind().String()
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(s, " ")
	return w
}

// Truncate keeps client text echoed back in a problem short: at most 64
// bytes, cut at a rune boundary and marked with "…" when cut.
func Truncate(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

var fieldCache sync.Map // reflect.Type → map[string]int

// jsonFields maps the JSON names of a struct's fields to their indexes.
func jsonFields(t reflect.Type) map[string]int {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]int)
	}
	m := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = i
	}
	fieldCache.Store(t, m)
	return m
}
