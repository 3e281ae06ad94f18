package apigw_test

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer/apigw"
)

// TestALBRequest: the ip source reads the address the load balancer
// appended to X-Forwarded-For, never one a client wrote before it; a
// multi-value target group's headers reach the sources as single values
// too, and a value sent twice stays visible to them.
func TestALBRequest(t *testing.T) {
	for _, tt := range []struct {
		name string
		ev   events.ALBTargetGroupRequest
		ip   string
		key  string
	}{
		{"one address", events.ALBTargetGroupRequest{Headers: map[string]string{"x-forwarded-for": "25.12.198.67", "x-api-key": "k"}}, "25.12.198.67", "k"},
		{"client-written addresses first", events.ALBTargetGroupRequest{Headers: map[string]string{"x-forwarded-for": "1.1.1.1, 2.2.2.2,25.12.198.67"}}, "25.12.198.67", ""},
		{"not an address", events.ALBTargetGroupRequest{Headers: map[string]string{"x-forwarded-for": "1.1.1.1, bogus"}}, "", ""},
		{"IPv6", events.ALBTargetGroupRequest{Headers: map[string]string{"x-forwarded-for": "2001:DB8::1"}}, "2001:db8::1", ""},
		{"multi-value", events.ALBTargetGroupRequest{MultiValueHeaders: map[string][]string{
			"x-forwarded-for": {"9.9.9.9", "1.1.1.1, 72.21.198.67"}, "x-api-key": {"a", "b"}}}, "72.21.198.67", "b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := apigw.ALBRequest(&tt.ev)
			if req.SourceIP != tt.ip || req.Headers["x-api-key"] != tt.key {
				t.Errorf("ALBRequest() source IP %q, x-api-key %q; want %q, %q", req.SourceIP, req.Headers["x-api-key"], tt.ip, tt.key)
			}
			if tt.ev.MultiValueHeaders != nil && len(req.MultiHeaders["x-api-key"]) != 2 {
				t.Errorf("MultiHeaders = %v, want both x-api-key values (the sources refuse a key sent twice)", req.MultiHeaders)
			}
		})
	}
}
