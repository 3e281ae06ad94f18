package rules

// RouteProblem says what is wrong with route as a rule names it: "*" or
// "METHOD /resource/{param}" as API Gateway names resources. It returns ""
// when route is valid. Callers that take a route from a request (the check
// API) use it so that a request can name exactly what a rule can.
func RouteProblem(route string) string { return routeProblem(route) }
