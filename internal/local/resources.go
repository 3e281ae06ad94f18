package local

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Resources is the answer of GET /admin/resources: the APIs this local
// stack serves and their resources, so a client can tell a rule that can
// never match before it is written (see Warnings).
type Resources struct {
	APIs []APIResources `json:"apis"`
}

// APIResources is one API: its id (a rule's api) and its resource
// templates, API Gateway style (/items/{id}); every one takes any method.
type APIResources struct {
	API       string   `json:"api"`
	Stage     string   `json:"stage,omitempty"` // none for the service
	Resources []string `json:"resources"`
}

// resourcesHandler serves GET /admin/resources.
func resourcesHandler(api, stage string) http.Handler {
	body := Resources{APIs: []APIResources{
		{API: api, Stage: stage, Resources: demoResources},
		{API: HTTPAPIID, Stage: "$default", Resources: resources(httpAPIRoutes)},
		{API: ServiceAPI, Resources: resources(serviceRoutes)},
	}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		writeJSON(w, http.StatusOK, body)
	})
}

// Warnings says why a rule on api and route can never match a request to
// the APIs in rs: an api that is none of them, or a route whose path is
// not a resource template (a concrete path such as /items/42 where the
// template is /items/{id}). Empty when it can match; api "*" and route
// "*" always can.
func (rs Resources) Warnings(api, route string) []string {
	if api == "" {
		return nil // no api at all: the admin API refuses it with its reason
	}
	var out []string
	var ids []string
	for _, a := range rs.APIs {
		ids = append(ids, fmt.Sprintf("%q", a.API))
	}
	for _, a := range rs.APIs {
		if api != "*" && api != a.API {
			continue
		}
		if w := a.routeWarning(route); w != "" {
			out = append(out, w)
		}
		if api != "*" {
			return out
		}
	}
	if api != "*" {
		out = append(out, fmt.Sprintf("api %q is not an API of this stack (it has %s): the rule will never match", api, strings.Join(ids, ", ")))
	}
	return out
}

// routeWarning is Warnings for one API.
func (a APIResources) routeWarning(route string) string {
	if route == "*" || route == "" {
		return ""
	}
	method, path, ok := strings.Cut(route, " ")
	if !ok {
		return "" // not a route at all: the admin API refuses it with its reason
	}
	if slices.Contains(a.Resources, path) {
		return ""
	}
	if t, _, ok := newGateway("", "", a.Resources, nil, nil).route(path); ok {
		return fmt.Sprintf("route %q is a path, not a resource of api %q: did you mean %q? A rule names the template API Gateway matched", route, a.API, method+" "+t.path)
	}
	return fmt.Sprintf("route %q names no resource of api %q (it has %s): the rule will never match", route, a.API, strings.Join(a.Resources, " "))
}
