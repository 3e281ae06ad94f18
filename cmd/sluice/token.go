package main

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/local"
)

type tokenCmd struct {
	adminFlags `embed:""`

	Sub   string            `required:"" help:"The token's sub claim."`
	TTL   time.Duration     `name:"ttl" default:"1h" help:"Token lifetime."`
	Claim map[string]string `placeholder:"NAME=VALUE" help:"Another claim, such as custom:tenant=acme (repeatable)."`
}

func (cmd *tokenCmd) Help() string {
	return `Prints a JWT signed by the development issuer of ` + "`sluice local`" + ` (started
with --subject-sources jwt:<claim> and no JWT_ISSUER), for trying JWT limits:

  curl -H "Authorization: Bearer $(sluice token --sub alice)" http://127.0.0.1:8080/hello

It uses the admin endpoint and token, as the other admin commands do.`
}

func (cmd *tokenCmd) Run(e *env, a *adminFlags) error {
	for k := range cmd.Claim {
		if strings.TrimSpace(k) == "" {
			return usageErrorf("--claim: want name=value")
		}
	}
	c, err := a.connect(e)
	if err != nil {
		return err
	}
	var out local.TokenResponse
	in := local.TokenRequest{Sub: cmd.Sub, Claims: cmd.Claim, TTL: cmd.TTL.String()}
	if err := c.SendJSON(e.ctx, http.MethodPost, "/token", in, 0, &out); err != nil {
		return fmt.Errorf("get a token: %w", err)
	}
	return e.print(out, func() { fmt.Fprintln(e.stdout, out.Token) })
}
