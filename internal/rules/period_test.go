package rules

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParsePeriod(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		str  string // String of the result
	}{
		{"1s", time.Second, "1s"},
		{"30s", 30 * time.Second, "30s"},
		{"60s", time.Minute, "1m"},
		{"1m", time.Minute, "1m"},
		{"15m", 15 * time.Minute, "15m"},
		{"1h", time.Hour, "1h"},
		{"1h30m", 90 * time.Minute, "90m"},
		{"90m", 90 * time.Minute, "90m"},
		{"1m30s", 90 * time.Second, "90s"},
		{"1d", Day, "1d"},
		{"24h", Day, "1d"},
		{"36h", 36 * time.Hour, "36h"},
		{"7d", Week, "1w"},
		{"1w", Week, "1w"},
		{"8d", 8 * Day, "8d"},
		{"1y", Year, "1y"},
		{"365d", Year, "1y"},
		{"52w1d", Year, "1y"},
		{"86401s", Day + time.Second, "1d1s"},
		{"1d1s", Day + time.Second, "1d1s"},
		{"59s364d23h59m1s", Year, "1y"}, // units in any order
		{"1.5h", 90 * time.Minute, "90m"},
		{"2000ms", 2 * time.Second, "2s"},
		{"1h0m0s", time.Hour, "1h"}, // time.Duration.String's output reads back
		{"8760h", Year, "1y"},
		{"+1m", time.Minute, "1m"},
	}
	for _, tt := range tests {
		got, err := ParsePeriod(tt.in)
		if err != nil {
			t.Errorf("ParsePeriod(%q) error = %v, want %v", tt.in, err, tt.want)
			continue
		}
		if got.Duration() != tt.want {
			t.Errorf("ParsePeriod(%q) = %v, want %v", tt.in, got.Duration(), tt.want)
		}
		if s := got.String(); s != tt.str {
			t.Errorf("ParsePeriod(%q).String() = %q, want %q", tt.in, s, tt.str)
		}
	}
}

func TestParsePeriodErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, reason string
	}{
		{"", `is empty; use a number and a unit such as "1m"`},
		{"0s", "must be at least 1s"},
		{"0", "must be at least 1s"},
		{"0y", "must be at least 1s"},
		{"-1m", "must not be negative"},
		{"-0s", "must be at least 1s"},
		{"1500ms", "must be a whole number of seconds"},
		{"1.5s", "must be a whole number of seconds"},
		{"999ms", "must be a whole number of seconds"},
		{"1ns", "must be a whole number of seconds"},
		{"2y", "is longer than 1 year"},
		{"366d", "is longer than 1 year"},
		{"1y1s", "is longer than 1 year"},
		{"53w", "is longer than 1 year"},
		{"8761h", "is longer than 1 year"},
		{"99999999999999999999s", "is longer than 1 year"},
		{"9223372036854775807y", "is longer than 1 year"},
		{"1", "is not a period: use a number and a unit among s, m, h, d, w, y, such as \"1m\" or \"1h30m\""},
		{"m", "is not a period: use a number and a unit among s, m, h, d, w, y, such as \"1m\" or \"1h30m\""},
		{"2mo", "is not a period: use a number and a unit among s, m, h, d, w, y, such as \"1m\" or \"1h30m\""},
		{"1 m", "is not a period: use a number and a unit among s, m, h, d, w, y, such as \"1m\" or \"1h30m\""},
		{" 1m", "is not a period: use a number and a unit among s, m, h, d, w, y, such as \"1m\" or \"1h30m\""},
		{"1M", "is not a period: use a number and a unit among s, m, h, d, w, y, such as \"1m\" or \"1h30m\""},
		{"1m\x00", "is not a period: use a number and a unit among s, m, h, d, w, y, such as \"1m\" or \"1h30m\""},
		{"one minute", "is not a period: use a number and a unit among s, m, h, d, w, y, such as \"1m\" or \"1h30m\""},
		{strings.Repeat("1", 65) + "s", "is too long"},
	}
	for _, tt := range tests {
		got, err := ParsePeriod(tt.in)
		if err == nil {
			t.Errorf("ParsePeriod(%q) = %v, want error %q", tt.in, got, tt.reason)
			continue
		}
		if err.Error() != tt.reason {
			t.Errorf("ParsePeriod(%q) error = %q, want %q", tt.in, err, tt.reason)
		}
	}
}

func TestPeriodString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p    Period
		want string
	}{
		{Period(time.Second), "1s"},
		{Period(59 * time.Second), "59s"},
		{Period(61 * time.Second), "61s"},
		{Period(2 * time.Hour), "2h"},
		{Period(48 * time.Hour), "2d"},
		{Period(14 * Day), "2w"},
		{Period(Year + Day), "366d"},
		{Period(Year + time.Second), "1y1s"},
		// Values no parse gives still print, as Go durations.
		{0, "0s"},
		{Period(-time.Minute), "-1m0s"},
		{Period(1500 * time.Millisecond), "1.5s"},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("Period(%d).String() = %q, want %q", int64(tt.p), got, tt.want)
		}
	}
}

func TestPeriodJSON(t *testing.T) {
	t.Parallel()
	type doc struct {
		Period Period `json:"period"`
	}
	ok := []struct {
		in   string
		want Period
		out  string
	}{
		{`{"period":"1m"}`, Period(time.Minute), `{"period":"1m"}`},
		{`{"period":"3600s"}`, Period(time.Hour), `{"period":"1h"}`},
		{`{"period":"1h30m"}`, Period(90 * time.Minute), `{"period":"90m"}`},
		{`{"period":"\u0031d"}`, Period(Day), `{"period":"1d"}`},
		{`{"period":null}`, 0, `{"period":"0s"}`},
		{`{}`, 0, `{"period":"0s"}`},
	}
	for _, tt := range ok {
		var d doc
		if err := json.Unmarshal([]byte(tt.in), &d); err != nil {
			t.Errorf("Unmarshal(%s) error = %v, want %v", tt.in, err, tt.want)
			continue
		}
		if d.Period != tt.want {
			t.Errorf("Unmarshal(%s) = %v, want %v", tt.in, d.Period, tt.want)
		}
		b, err := json.Marshal(d)
		if err != nil || string(b) != tt.out {
			t.Errorf("Marshal(%v) = %s, %v, want %s", d.Period, b, err, tt.out)
		}
	}

	bad := []struct {
		in, reason string
	}{
		{`{"period":60}`, `must be a string such as "1m"`},
		{`{"period":1.5}`, `must be a string such as "1m"`},
		{`{"period":true}`, `must be a string such as "1m"`},
		{`{"period":["1m"]}`, `must be a string such as "1m"`},
		{`{"period":{"s":1}}`, `must be a string such as "1m"`},
		{`{"period":"0s"}`, "must be at least 1s"},
		{`{"period":"-5m"}`, "must not be negative"},
		{`{"period":"0.5s"}`, "must be a whole number of seconds"},
		{`{"period":"2y"}`, "is longer than 1 year"},
		{`{"period":"soon"}`, `is not a period: use a number and a unit among s, m, h, d, w, y, such as "1m" or "1h30m"`},
	}
	for _, tt := range bad {
		var d doc
		wantFields(t, "Unmarshal("+tt.in+")", json.Unmarshal([]byte(tt.in), &d), []FieldError{{Field: "period", Reason: tt.reason}})
	}
}

// TestPeriodOmitEmpty pins that a rule naming a plan marshals without a
// period, so its JSON reads back.
func TestPeriodOmitEmpty(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Rule{Plan: "gold"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "period") {
		t.Errorf("Marshal(Rule{Plan: gold}) = %s, want no period", b)
	}
	var r Rule
	if err := json.Unmarshal(b, &r); err != nil {
		t.Errorf("Unmarshal(%s) error = %v, want nil", b, err)
	}
}

// FuzzPeriod checks that ParsePeriod never panics, that what it accepts is a
// valid period, and that String and JSON read back to the same value.
func FuzzPeriod(f *testing.F) {
	for _, s := range []string{"1s", "1m", "1h30m", "1d", "1w", "1y", "86401s", "1.5h", "2000ms", "-1m", "0s", "2y", "1mo", "9223372036854775807ns", "1e3s", ".5m", "1y1s", "52w1d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePeriod(s)
		if err != nil {
			if p != 0 {
				t.Fatalf("ParsePeriod(%q) = %v, %v; want 0 with an error", s, p, err)
			}
			return
		}
		if p < MinPeriod || p > MaxPeriod || p%Period(time.Second) != 0 {
			t.Fatalf("ParsePeriod(%q) = %d, want a whole number of seconds in [1s, 1y]", s, int64(p))
		}
		str := p.String()
		back, err := ParsePeriod(str)
		if err != nil || back != p {
			t.Fatalf("ParsePeriod(%q) = %v, %v; want %d (from %q)", str, back, err, int64(p), s)
		}
		// In our own units the printed form is never longer than the input.
		if _, ok, _ := parseUnits(s); ok && len(str) > len(s) {
			t.Fatalf("Period(%q).String() = %q, longer than the input", s, str)
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("Marshal(%v) error = %v", p, err)
		}
		var q Period
		if err := json.Unmarshal(b, &q); err != nil || q != p {
			t.Fatalf("Unmarshal(%s) = %v, %v; want %v", b, q, err, p)
		}
	})
}
