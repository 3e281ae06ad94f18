package app

import (
	"context"
	"io"
	"log/slog"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// NewLogger returns the JSON slog logger of every Sluice process, Lambda
// or local: CloudWatch's field names (timestamp, level, message), and the
// invocation's requestId taken from the context, so the …Context logging
// calls tie a line to its request.
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: lambdacontext.ReplaceAttr})
	return slog.New(requestIDHandler{h})
}

// requestIDHandler adds the Lambda request id to every record it can.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		r.AddAttrs(slog.String("requestId", lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(as)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
