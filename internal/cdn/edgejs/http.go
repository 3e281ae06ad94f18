package edgejs

import (
	"net"
	"net/http"
	"strings"
)

// ViewerEvent is r as CloudFront hands it to a viewer-request function:
// header names lower-cased, query names and values as sent (not
// decoded), a repeated field with every value in MultiValue.
func ViewerEvent(r *http.Request, requestID string) Event {
	var e Event
	e.Context.RequestID = requestID
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		e.Viewer.IP = ip
	}
	e.Request = Request{Method: r.Method, URI: r.URL.EscapedPath(), Headers: map[string]Field{}, Querystring: map[string]Field{}}
	for name, vs := range r.Header {
		for _, v := range vs {
			add(e.Request.Headers, strings.ToLower(name), v)
		}
	}
	if r.Host != "" {
		add(e.Request.Headers, "host", r.Host)
	}
	for p := range strings.SplitSeq(r.URL.RawQuery, "&") {
		if p != "" {
			k, v, _ := strings.Cut(p, "=")
			add(e.Request.Querystring, k, v)
		}
	}
	return e
}

func add(m map[string]Field, k, v string) {
	f, ok := m[k]
	if !ok {
		m[k] = Field{Value: v}
		return
	}
	if f.MultiValue == nil {
		f.MultiValue = []Value{{Value: f.Value}}
	}
	f.MultiValue = append(f.MultiValue, Value{Value: v})
	m[k] = f
}

// Write writes r, the function's answer, as CloudFront sends it: its
// status, headers and body, and CloudFront's X-Cache of a response a
// function generated.
func (r *Response) Write(w http.ResponseWriter) {
	for name, v := range r.Headers {
		w.Header().Set(name, v.Value)
	}
	w.Header().Set("X-Cache", "FunctionGeneratedResponse from cloudfront")
	w.WriteHeader(r.StatusCode)
	_, _ = w.Write([]byte(r.Body.Data))
}
