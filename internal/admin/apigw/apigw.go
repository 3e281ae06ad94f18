// Package apigw adapts API Gateway REST proxy events
// (events.APIGatewayProxyRequest/Response) to the admin API in
// internal/admin, which knows HTTP but not Lambda. It is all the admin
// Lambda functions share besides their wiring.
package apigw

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/httpapi"
)

// Handler returns the Lambda handler for one admin route (an admin.Route
// constant), for lambda.Start. An event with another method gets 405; the
// event's resource is not compared, so the admin API may sit under any base
// path, but its path parameters must be named as in the route ({id},
// {name}, {subject}). route "" serves every admin route from one function,
// routing on the event's method and resource.
//
// The handler never returns an error: every failure is a problem response
// (a Lambda error would reach the client as a bare 502).
func Handler(svc *admin.Service, route string) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		req, err := Request(ev, svc.MaxBody())
		var resp admin.Response
		switch {
		case err != nil:
			resp = svc.Problem(ctx, req, err)
		case route == "":
			resp = svc.Handle(ctx, req)
		default:
			resp = svc.HandleRoute(ctx, route, req)
		}
		return Response(resp), nil
	}
}

// Request turns a proxy event into an admin.Request. A base64-encoded body
// is decoded, reading at most one byte past maxBody so that an oversized
// body costs little and still gets 413. The actor is the IAM caller:
// requestContext.identity.userArn, else caller, else "" (the Service
// records "unknown"). The error, for a body that is not valid base64, is a
// 400 *httpapi.Error; the request is then complete but for its body.
func Request(ev events.APIGatewayProxyRequest, maxBody int) (admin.Request, error) {
	req := admin.Request{
		Method:     strings.ToUpper(ev.HTTPMethod),
		Resource:   ev.Resource,
		Path:       ev.Path,
		PathParams: ev.PathParameters,
		Query:      query(ev),
		Header:     header(ev),
		Actor:      actor(ev.RequestContext.Identity),
		RequestID:  ev.RequestContext.RequestID,
	}
	if !ev.IsBase64Encoded {
		req.Body = []byte(ev.Body)
		return req, nil
	}
	enc := strings.TrimRight(ev.Body, "=")
	if n := base64.RawStdEncoding.EncodedLen(maxBody + 1); len(enc) > n {
		enc = enc[:n]
	}
	b, err := base64.RawStdEncoding.DecodeString(enc)
	if err != nil {
		return req, &httpapi.Error{Status: http.StatusBadRequest,
			Detail: "The request body is marked base64-encoded but is not valid base64.", Err: err}
	}
	req.Body = b
	return req, nil
}

// Response turns an admin.Response into a proxy response.
func Response(r admin.Response) events.APIGatewayProxyResponse {
	h := make(map[string]string, len(r.Header))
	for k, v := range r.Header {
		h[k] = strings.Join(v, ", ")
	}
	return events.APIGatewayProxyResponse{StatusCode: r.Status, Headers: h, Body: string(r.Body)}
}

// header merges the event's headers; multi-value headers win, as API
// Gateway fills both.
func header(ev events.APIGatewayProxyRequest) http.Header {
	h := make(http.Header, len(ev.Headers))
	for k, v := range ev.Headers {
		h.Set(k, v)
	}
	for k, vs := range ev.MultiValueHeaders {
		h[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	return h
}

func query(ev events.APIGatewayProxyRequest) url.Values {
	q := make(url.Values, len(ev.QueryStringParameters))
	for k, v := range ev.QueryStringParameters {
		q.Set(k, v)
	}
	for k, vs := range ev.MultiValueQueryStringParameters {
		q[k] = append([]string(nil), vs...)
	}
	return q
}

func actor(id events.APIGatewayRequestIdentity) string {
	if id.UserArn != "" {
		return id.UserArn
	}
	return id.Caller
}
