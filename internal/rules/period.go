package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// Period units beyond time.Duration's: a day is 24 h, a week 7 days and a
// year 365 days, whatever the calendar says, because a token bucket refills
// at a constant rate.
const (
	Day  = 24 * time.Hour
	Week = 7 * Day
	Year = 365 * Day
)

// periodUnits lists the units ParsePeriod reads and String writes, largest
// first.
var periodUnits = [...]struct {
	name string
	d    time.Duration
}{
	{"y", Year}, {"w", Week}, {"d", Day}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second},
}

// reasonNotString is the reason given when a period arrives as a JSON
// number or any other non-string.
const reasonNotString = `must be a string such as "1m"`

// ParsePeriod parses a period: one or more <integer><unit> pairs with units
// y (365 d), w (7 d), d (24 h), h, m and s, such as "30s", "15m", "1d" or
// "1h30m"; anything else time.ParseDuration accepts ("1.5h", "2000ms") is
// read as a Go duration. The result must be a whole number of seconds
// between MinPeriod and MaxPeriod. Errors describe the problem for a person;
// they do not repeat the input.
func ParsePeriod(s string) (Period, error) {
	if s == "" {
		return 0, errors.New("is empty; use a number and a unit such as \"1m\"")
	}
	if len(s) > 64 {
		return 0, errors.New("is too long")
	}
	if s == "1mo" {
		return Month, nil
	}
	d, ok, err := parseUnits(s)
	if ok && err != nil {
		return 0, err
	}
	if !ok {
		var gerr error
		d, gerr = time.ParseDuration(s)
		if gerr != nil {
			if err == nil {
				err = errors.New("is not a period: use a number and a unit among s, m, h, d, w, y, such as \"1m\" or \"1h30m\"")
			}
			return 0, err
		}
	}
	p := Period(d)
	if err := p.check(); err != nil {
		return 0, err
	}
	return p, nil
}

// parseUnits reads a sequence of <digits><unit> pairs with the units of
// periodUnits. ok is false when s is not of that shape (it may still be a Go
// duration); err is set when it is, but overflows.
func parseUnits(s string) (d time.Duration, ok bool, err error) {
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 || i == len(s) {
			return 0, false, nil
		}
		n, perr := strconv.ParseInt(s[:i], 10, 64)
		if perr != nil {
			return 0, false, errors.New("is longer than 1 year")
		}
		var unit time.Duration
		for _, u := range periodUnits {
			if s[i:i+1] == u.name {
				unit = u.d
				break
			}
		}
		// "ms", "us" and "ns" start with a unit letter too: leave them to
		// time.ParseDuration.
		if unit == 0 || (i+1 < len(s) && (s[i+1] < '0' || s[i+1] > '9')) {
			return 0, false, nil
		}
		if n > int64(MaxPeriod)/int64(unit) || d > time.Duration(MaxPeriod)-time.Duration(n)*unit {
			return 0, true, errors.New("is longer than 1 year")
		}
		d += time.Duration(n) * unit
		s = s[i+1:]
	}
	return d, true, nil
}

// check reports why p is not a valid period, or nil.
func (p Period) check() error {
	switch {
	case p == 0:
		return errors.New("must be at least 1s")
	case p < 0:
		return errors.New("must not be negative")
	case p%Period(time.Second) != 0:
		return errors.New("must be a whole number of seconds")
	case p < MinPeriod:
		return errors.New("must be at least 1s")
	case p > MaxPeriod:
		return errors.New("is longer than 1 year")
	}
	return nil
}

// String returns the shortest exact form of p in the units ParsePeriod reads:
// "1m" rather than "60s", "90m" rather than "1h30m", "100d1s" rather than
// "8640001s". Of forms equally short, the one with the larger units wins. A
// period that is not a positive whole number of seconds is printed as a Go
// duration ("1.5s", "0s", "-1m0s").
func (p Period) String() string {
	if p == Month {
		return "1mo"
	}
	if p <= 0 || p%Period(time.Second) != 0 {
		return time.Duration(p).String()
	}
	var counts [len(periodUnits)]int64
	shortestForm(int64(p/Period(time.Second)), 0, &counts)
	b := make([]byte, 0, 24)
	for i, n := range counts {
		if n > 0 {
			b = strconv.AppendInt(b, n, 10)
			b = append(b, periodUnits[i].name...)
		}
	}
	return string(b)
}

// shortestForm sets counts[i:] to the shortest way of writing secs seconds
// with units i and below, and returns its length and number of parts; of
// forms equally long the one with fewer parts wins ("366d" over "1y1d"),
// then the one with larger units. For each unit it tries none and as many as
// fit: a count in between never shortens the form, as it leaves more of the
// unit to smaller units, which take at least as many digits.
func shortestForm(secs int64, i int, counts *[len(periodUnits)]int64) (length, parts int) {
	unit := int64(periodUnits[i].d / time.Second)
	if unit == 1 {
		counts[i] = secs
		if secs == 0 {
			return 0, 0
		}
		return len(strconv.FormatInt(secs, 10)) + 1, 1
	}
	n := secs / unit
	length, parts = shortestForm(secs, i+1, counts) // none of this unit
	counts[i] = 0
	if n == 0 {
		return length, parts
	}
	var alt [len(periodUnits)]int64
	l, p := shortestForm(secs-n*unit, i+1, &alt)
	l, p = l+len(strconv.FormatInt(n, 10))+1, p+1
	if l < length || l == length && p <= parts {
		alt[i] = n
		*counts = alt
		return l, p
	}
	return length, parts
}

// MarshalJSON writes p as a JSON string in the form String gives.
func (p Period) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, p.String()), nil
}

// UnmarshalJSON reads a period from a JSON string in any form ParsePeriod
// accepts. JSON null leaves p unchanged. A number or any other JSON value,
// and a string ParsePeriod rejects, give a *ValidationError on the field
// "period".
func (p *Period) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil { // a number or any other non-string
		return periodError(reasonNotString)
	}
	v, err := ParsePeriod(s)
	if err != nil {
		return periodError(err.Error())
	}
	*p = v
	return nil
}

func periodError(reason string) error {
	return &ValidationError{Fields: []FieldError{{Field: "period", Reason: reason}}}
}
