package ratelimit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// TestContextKeyNumberTypes: a context value of any Go number type names
// the subject as the Lambda runtime's JSON writes it (so as API Gateway
// passes it on), never a 401: the package promises "a string, number or
// boolean". Equal values of different types are one subject.
func TestContextKeyNumberTypes(t *testing.T) {
	s := newSetup(t)
	byTenant := s.limiter(t, "tenant")
	ev := sample[events.APIGatewayCustomAuthorizerRequestTypeRequest](t, "authorizer-rest.json")
	answer := func(v any) string {
		r, err := byTenant.WrapREST(restAnswer("Allow", "", "alice", map[string]any{"tenant": v}, nil))(context.Background(), ev)
		if err != nil {
			return "error: " + err.Error()
		}
		return r.PolicyDocument.Statement[0].Effect
	}
	for i, v := range []any{
		int(-1), int8(-2), int16(-3), int32(-4), int64(-5),
		uint(6), uint8(7), uint16(8), uint32(9), uint64(10), uintptr(11),
		float32(12.5), float64(13.25), json.Number("14"), true, "tenant-15",
	} {
		if got := answer(v); got != "Allow" {
			t.Errorf("%d: context tenant %T(%v) = %s, want Allow", i, v, v, got)
		}
	}
	// uint32(42), int16(42) and float32(42) are the tenant "42": its two
	// tokens, then a deny.
	var got []string
	for _, v := range []any{uint32(42), int16(42), float32(42)} {
		got = append(got, fmt.Sprintf("%T:%s", v, answer(v)))
	}
	if want := "[uint32:Allow int16:Allow float32:Deny]"; fmt.Sprint(got) != want {
		t.Errorf("tenant 42 as three types = %v, want %s: one subject", got, want)
	}
}
