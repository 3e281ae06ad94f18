package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sluicehq/sluice/internal/app"
)

// TestLogger: CloudWatch's field names, and the Lambda request id on every
// line logged with a context that carries one, also through With.
func TestLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := app.NewLogger(&buf, slog.LevelInfo).With(slog.String("function", "f"))
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	log.InfoContext(ctx, "hello", slog.String("ruleId", "r1"))
	log.DebugContext(ctx, "hidden")
	log.InfoContext(context.Background(), "no request")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("logged %d lines, want 2 (debug is below the level):\n%s", len(lines), buf.String())
	}
	var first, second map[string]any
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatalf("log line %q: %v", lines[0], err)
	}
	if err := json.Unmarshal(lines[1], &second); err != nil {
		t.Fatalf("log line %q: %v", lines[1], err)
	}
	if first["message"] != "hello" || first["ruleId"] != "r1" || first["timestamp"] == nil || first["requestId"] != "req-1" || first["function"] != "f" {
		t.Errorf("first line = %v, want message, ruleId, timestamp, requestId req-1 and function f", first)
	}
	if _, ok := second["requestId"]; ok {
		t.Errorf("second line = %v, want no requestId without a Lambda context", second)
	}
}
