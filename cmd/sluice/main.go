// Command sluice is Sluice's developer tool:
//
//	sluice local      a local API Gateway: a demo API behind the real authorizer,
//	                  the admin API, embedded Redis and rules store (`make run`)
//	sluice rules      list, show, create/update, delete rules and their history
//	sluice plans      the same for plans
//	sluice subjects   a subject's limits and remaining tokens; reset its buckets
//	sluice load       a load generator with an over-admission report
//	sluice token      a JWT from sluice local's development issuer
//
// The admin commands talk to `sluice local` with its bearer token, or to a
// deployed Admin REST API with SigV4-signed requests.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"text/tabwriter"
)

// errUsage reports a command line that could not be used; the usage has
// already been printed. errHelp: -h was asked for.
var (
	errUsage = errors.New("usage")
	errHelp  = errors.New("help")
)

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }
func (e *usageError) Unwrap() error { return errUsage }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

type command struct {
	name, help string
	run        func(ctx context.Context, e env, args []string) error
}

func commands() []command {
	return []command{
		{"local", "run the local stack: demo API behind the authorizer, admin API, embedded Redis and store", runLocal},
		{"rules", "manage rules: ls, get, put, rm, history", func(ctx context.Context, e env, args []string) error {
			return runGroup(ctx, e, "rules", rulesCommands(), args)
		}},
		{"plans", "manage plans: ls, get, put, rm, history", func(ctx context.Context, e env, args []string) error {
			return runGroup(ctx, e, "plans", plansCommands(), args)
		}},
		{"subjects", "a subject's limits and buckets: limits, reset", func(ctx context.Context, e env, args []string) error {
			return runGroup(ctx, e, "subjects", subjectsCommands(), args)
		}},
		{"load", "generate load against a URL and check nothing was over-admitted", runLoad},
		{"stats", "top limiting rules and top denied subjects over the last minutes", runStats},
		{"console", "serve the web console on 127.0.0.1 for an admin API (a deployed stack's, signed with your AWS credentials)", runConsole},
		{"token", "print a JWT from sluice local's development issuer (--sub alice --claim k=v)", runToken},
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, "usage: sluice <command> [arguments]\n\ncommands:\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.help)
	}
	tw.Flush()
	fmt.Fprint(w, "\nRun `sluice <command> -h` for a command's flags.\n")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, env{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin}, os.Args[1:])
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit code: 0 success, 1
// failure, 2 bad usage, 3 over-admission found by `load --strict`.
func run(ctx context.Context, e env, args []string) int {
	if len(args) == 0 {
		usage(e.stderr)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(e.stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, e, args[1:])
		var ue *usageError
		var ee exitError
		switch {
		case err == nil, errors.Is(err, errHelp):
			return 0
		case errors.As(err, &ue):
			fmt.Fprintf(e.stderr, "sluice: %s\n", ue.msg)
			return 2
		case errors.Is(err, errUsage):
			return 2
		case errors.As(err, &ee):
			if ee.msg != "" {
				fmt.Fprintf(e.stderr, "sluice: %s\n", ee.msg)
			}
			return ee.code
		default:
			fmt.Fprintf(e.stderr, "sluice %s: %v\n", args[0], err)
			return 1
		}
	}
	usage(e.stderr)
	fmt.Fprintf(e.stderr, "sluice: unknown command %q\n", args[0])
	return 2
}

// exitError ends the program with a specific code.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// sortedKeys returns m's keys in order.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
