package main

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/load"
)

type loadCmd struct {
	URL           string        `arg:"" name:"url" help:"The URL to send requests to."`
	Method        string        `default:"GET" help:"HTTP method."`
	Rate          float64       `default:"50" help:"Requests per second in all (0: no bound)."`
	Concurrency   int           `default:"8" help:"Concurrent requests."`
	Duration      time.Duration `default:"10s" help:"Stop after this long."`
	Requests      int64         `default:"0" help:"Stop after this many requests (0: no bound)."`
	Subjects      int           `default:"1" help:"Subjects; k sends <subject-header>: <subject-prefix><k> (0: none)."`
	SubjectHeader string        `default:"x-api-key" help:"Header carrying the subject."`
	SubjectPrefix string        `default:"load-" help:"Subject name prefix."`
	Header        []string      `placeholder:"'NAME: VALUE'" help:"Extra header (repeatable)."`
	Timeout       time.Duration `default:"5s" help:"Timeout of each request."`
	Limit         int64         `help:"Limit to check (default: RateLimit-Policy's)."`
	Burst         int64         `help:"Burst to check (default: the header's)."`
	Period        time.Duration `help:"Period to check (default: RateLimit-Policy's)."`
	Strict        bool          `help:"Exit 3 when over-admitted, 1 when nothing was admitted."`
	Quiet         bool          `help:"No progress line."`
}

func (cmd *loadCmd) Help() string {
	return `Sends requests to URL at a steady rate from many subjects, then reports
allowed (2xx/3xx), denied (429) and error counts, latency percentiles, and for
each subject whether its admitted count fits its rule:

  admitted <= burst + limit * elapsed / period

with limit, burst and period from the flags or from the RateLimit-Policy
response header (every policy it lists must hold).`
}

func (cmd *loadCmd) Run(e *env) error {
	c := load.Config{
		URL: cmd.URL, Method: cmd.Method, Rate: cmd.Rate, Concurrency: cmd.Concurrency, Duration: cmd.Duration,
		Requests: cmd.Requests, Subjects: cmd.Subjects, SubjectHeader: cmd.SubjectHeader, SubjectPrefix: cmd.SubjectPrefix,
		Timeout: cmd.Timeout, Limit: cmd.Limit, Burst: cmd.Burst, Period: cmd.Period,
	}
	for _, h := range cmd.Header {
		if err := c.Headers.Set(h); err != nil {
			return usageErrorf("--header %v", err)
		}
	}
	if err := c.Check(); err != nil {
		return &usageError{err.Error()}
	}
	var progress io.Writer = e.stderr
	if cmd.Quiet {
		progress = nil
	}
	rep, err := load.Run(e.ctx, c, progress, load.IsTerminal(e.stderr))
	if err != nil {
		return err
	}
	if err := e.print(rep, func() { rep.Print(e.stdout) }); err != nil {
		return err
	}
	if !cmd.Strict {
		return nil
	}
	switch {
	case rep.OverAdmitted > 0:
		return exitError{code: 3, msg: fmt.Sprintf("%d subject(s) over-admitted", rep.OverAdmitted)}
	case rep.Allowed == 0:
		// Nothing admitted proves nothing about over-admission: a wrong
		// URL (all 404), a server that is down, or a limit of 0.
		return exitError{code: exitFailure, msg: noneAdmitted(rep)}
	}
	return nil
}

// noneAdmitted says why a strict run proves nothing.
func noneAdmitted(rep *load.Report) string {
	msg := fmt.Sprintf("no request was admitted (%d sent, %d denied, %d errors)", rep.Sent, rep.Denied, rep.Errors)
	if rep.FirstError != "" {
		msg += "; first error: " + rep.FirstError
	}
	if n := rep.Statuses[fmt.Sprint(http.StatusNotFound)]; n > 0 {
		msg += fmt.Sprintf("; %d answered 404: is the URL right?", n)
	}
	return msg
}
