// Command sluice is Sluice's developer tool:
//
//	sluice local      a local API Gateway: a demo API behind the real authorizer,
//	                  the admin API, embedded Redis and rules store (`make run`)
//	sluice rules      list, show, create/update, delete rules and their history
//	sluice plans      the same for plans
//	sluice subjects   a subject's limits and remaining tokens; reset its buckets
//	sluice stats      top limiting rules and denied subjects
//	sluice load       a load generator with an over-admission report
//	sluice console    the web console for a deployed admin API
//	sluice token      a JWT from sluice local's development issuer
//	sluice apply      converge a set's rules and plans to a file (diff, export, lint)
//	sluice verify     check a deployed stack (or sluice local) end to end
//
// The command line is parsed by kong (github.com/alecthomas/kong): flags go
// anywhere after the command that owns them, defaults come from the
// environment, help is generated. Package main only wires: the programs
// live in internal/local, internal/adminclient and internal/load.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/sluicehq/sluice/internal/adminclient"
)

// cli is the command tree. -o is global: every command prints a table or
// JSON, and it may come before or after the command's words.
type cli struct {
	Output string `short:"o" enum:"table,json" default:"table" placeholder:"table|json" help:"Output: table or json."`

	Local    localCmd    `cmd:"" help:"Run the local stack: demo API, admin API, console."`
	Rules    rulesCmd    `cmd:"" help:"Manage rules."`
	Plans    plansCmd    `cmd:"" help:"Manage plans."`
	Subjects subjectsCmd `cmd:"" help:"A subject's limits and buckets."`
	Load     loadCmd     `cmd:"" help:"Load a URL; check nothing was over-admitted."`
	Stats    statsCmd    `cmd:"" help:"Top limiting rules and denied subjects."`
	Console  consoleCmd  `cmd:"" help:"Serve the web console for an admin API on loopback."`
	Token    tokenCmd    `cmd:"" help:"Print a JWT from sluice local's issuer."`
	Apply    applyCmd    `cmd:"" help:"Converge a set's rules and plans to a file, all or nothing."`
	Diff     diffCmd     `cmd:"" help:"Show what apply would change (exit 0: none, 2: some)."`
	Export   exportCmd   `cmd:"" help:"Write a set's rules and plans as a file apply reads."`
	Lint     lintCmd     `cmd:"" help:"Check rules files offline."`
	Verify   verifyCmd   `cmd:"" help:"Check a deployed stack or sluice local end to end."`
}

// env carries a command's streams and context, so tests can run commands
// in process.
type env struct {
	ctx            context.Context
	stdout, stderr io.Writer
	stdin          io.Reader
	// getenv reads the environment; nil is os.Getenv. Tests give each
	// command line its own.
	getenv func(string) string
	output string // -o: table or json
}

// env returns the variable k.
func (e *env) env(k string) string {
	if e.getenv == nil {
		return os.Getenv(k)
	}
	return e.getenv(k)
}

// envResolver gives each flag tagged envvar:"NAME" the value of NAME as e
// reads it, when not empty: a variable set to "" is unset, as before kong.
// (Kong's own env tag reads os.Getenv, which a test running command lines
// in parallel cannot set for one of them, and takes "" as a value.)
func envResolver(e *env) kong.Resolver {
	return kong.ResolverFunc(func(_ *kong.Context, _ *kong.Path, f *kong.Flag) (any, error) {
		if name := f.Tag.Get("envvar"); name != "" {
			if v := e.env(name); v != "" {
				return v, nil
			}
		}
		return nil, nil
	})
}

// showEnvVars adds "($NAME)" to the help of each flag tagged envvar, as
// kong's own env tag does.
func showEnvVars(k *kong.Kong) {
	_ = kong.Visit(k.Model, func(n kong.Visitable, next kong.Next) error {
		if f, ok := n.(*kong.Flag); ok && f.Tag.Get("envvar") != "" {
			f.Help += " ($" + f.Tag.Get("envvar") + ")"
		}
		return next(nil)
	})
}

// print writes v as JSON with -o json, else calls table.
func (e *env) print(v any, table func()) error {
	if e.output == "json" {
		return printJSON(e.stdout, v)
	}
	table()
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, &env{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin}, os.Args[1:])
	stop()
	os.Exit(code)
}

// Exit codes: 0 success, 1 failure, 2 bad usage, 3 over-admission found by
// `load --strict`.
const (
	exitFailure = 1
	exitUsage   = 2
)

// exitError ends the program with a specific code.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// usageError is a command line that cannot be used, found after parsing
// (a missing --sub, a non-loopback --addr): exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// parser builds the kong parser writing to e's streams. exit is called
// with 0 once --help has printed the help; parsing goes on, and run then
// stops.
func parser(e *env, c *cli, exit func(int)) (*kong.Kong, error) {
	k, err := kong.New(c,
		kong.Name("sluice"),
		kong.Description("Sluice's developer tool: the local stack, the admin API's commands, a load generator and the console."),
		kong.Writers(e.stdout, e.stderr),
		kong.Exit(exit),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, NoExpandSubcommands: true}),
		kong.Vars{"default_endpoint": adminclient.DefaultEndpoint, "dimension_usage": dimensionUsage},
		kong.Vars(localVars()),
		kong.Resolvers(envResolver(e)),
	)
	if err != nil {
		return nil, err
	}
	showEnvVars(k)
	return k, nil
}

// run executes one command line and returns the exit code. Every error is
// printed as "sluice: <command>: <what went wrong>".
func run(ctx context.Context, e *env, args []string) int {
	var c cli
	helped := false
	k, err := parser(e, &c, func(int) { helped = true })
	if err != nil {
		fmt.Fprintf(e.stderr, "sluice: %v\n", err)
		return exitFailure
	}
	noArgs := len(args) == 0
	switch {
	case noArgs:
		// The usage, on stderr, and exit 2: nothing was asked.
		k.Stdout = e.stderr
		args = []string{"--help"}
	case args[0] == "help":
		args = append([]string{"--help"}, args[1:]...)
	}
	kctx, err := k.Parse(shortValues(args))
	switch {
	case helped && noArgs:
		return exitUsage
	case helped:
		return 0 // what follows --help (a missing argument) does not matter
	}
	if err != nil {
		var pe *kong.ParseError
		name, node := "sluice", k.Model.Node
		if errors.As(err, &pe) && pe.Context != nil {
			name = commandName(pe.Context)
			if n := pe.Context.Selected(); n != nil {
				node = n
			}
		}
		fmt.Fprintf(e.stderr, "sluice: %s%s\nRun `%s --help` for usage.\n", prefix(name), explain(err, args, node), name)
		return exitUsage
	}
	sel := kctx.Selected()
	if sel == nil {
		sel = k.Model.Node
	}
	if msg := repeatedFlag(args, sel); msg != "" {
		name := commandName(kctx)
		fmt.Fprintf(e.stderr, "sluice: %s%s\nRun `%s --help` for usage.\n", prefix(name), msg, name)
		return exitUsage
	}
	e.ctx, e.output = ctx, c.Output
	kctx.Bind(e)
	for _, p := range kctx.Path {
		if p.Command == nil {
			continue
		}
		if h, ok := p.Command.Target.Addr().Interface().(interface{ admin() *adminFlags }); ok {
			// Its commands take the flags, or the client they make, built
			// as the command's Run is called.
			kctx.Bind(h.admin())
			_ = kctx.BindToProvider(h.admin().connect) // fails only for a provider not a func
		}
	}
	name := commandName(kctx)
	err = kctx.Run()
	var ue *usageError
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "sluice: %s%s\nRun `%s --help` for usage.\n", prefix(name), ue.msg, name)
		return exitUsage
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintf(e.stderr, "sluice: %s%s\n", prefix(name), ee.msg)
		}
		return ee.code
	default:
		fmt.Fprintf(e.stderr, "sluice: %s%v\n", prefix(name), err)
		return exitFailure
	}
}

// shortValues keeps two forms the flag package took and kong does not:
// -o=json becomes --output=json, and a value that starts with a dash (a
// negative number, "-" for stdin) joins its flag: --rate -1 becomes
// --rate=-1, refused with a reason later. After "--" nothing changes.
func shortValues(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if v, ok := strings.CutPrefix(a, "-o="); ok {
			a = "--output=" + v
		}
		if strings.HasPrefix(a, "-") && !strings.Contains(a, "=") && i+1 < len(args) && dashValue.MatchString(args[i+1]) {
			if long, ok := shortFlags[a]; ok {
				a = long
			}
			a += "=" + args[i+1]
			i++
		}
		out = append(out, a)
	}
	return out
}

// shortFlags are the one-letter flags that take a value, by long name.
var shortFlags = map[string]string{"-o": "--output", "-f": "--file"}

// dashValue is a flag value that starts with a dash: "-", "-1", "-0.5".
var dashValue = regexp.MustCompile(`^-([0-9][0-9.]*)?$`)

// commandName is the selected command's words, such as "sluice rules get".
func commandName(ctx *kong.Context) string {
	words := []string{"sluice"}
	for _, p := range ctx.Path {
		if p.Command != nil {
			words = append(words, p.Command.Name)
		}
	}
	return strings.Join(words, " ")
}

// prefix is "rules get: " for "sluice rules get", "" for "sluice".
func prefix(name string) string {
	if rest, ok := strings.CutPrefix(name, "sluice "); ok {
		return rest + ": "
	}
	return ""
}

// commonMistakes are words people type for a command that has another
// name here.
var commonMistakes = map[string]string{
	"list": "ls", "delete": "rm", "remove": "rm", "del": "rm", "show": "get", "describe": "get",
	"create": "put", "update": "put", "set": "put", "add": "put", "log": "history",
}

// explain words kong's parse errors for the mistakes people make: a
// command under another name (one node has), a boolean flag's value after
// a space.
func explain(err error, args []string, node *kong.Node) string {
	msg := err.Error()
	if m := missingValue.FindStringSubmatch(msg); m != nil {
		if f := findFlag(node, m[1]); f != nil {
			return fmt.Sprintf("--%s needs a value after it, such as --%s %s (%s)", m[1], m[1], f.FormatPlaceHolder(), strings.TrimSuffix(f.Help, "."))
		}
		return fmt.Sprintf("--%s needs a value after it", m[1])
	}
	arg, ok := strings.CutPrefix(msg, "unexpected argument ")
	if !ok {
		return msg
	}
	arg, _, _ = strings.Cut(arg, ",")
	if want, ok := commonMistakes[arg]; ok {
		if slices.ContainsFunc(node.Children, func(c *kong.Node) bool { return c.Name == want }) {
			return fmt.Sprintf("unexpected argument %s, did you mean %q?", arg, want)
		}
		// A word for another command (list is ls): kong's nearest
		// spelling (lint) would be a false hint.
		return "unexpected argument " + arg
	}
	if arg == "true" || arg == "false" {
		if i := slices.Index(args, arg); i > 0 && strings.HasPrefix(args[i-1], "-") {
			return fmt.Sprintf("unexpected argument %s: a boolean flag takes its value after \"=\": %s=%s", arg, args[i-1], arg)
		}
	}
	return msg
}

// missingValue is kong's error for a flag given without its value: at the
// end of the line ("EOL") or before another flag.
var missingValue = regexp.MustCompile(`^--([\w-]+): expected \w+ value but got "(EOL|-.*?)"`)

// findFlag finds the flag name on node or its ancestors.
func findFlag(node *kong.Node, name string) *kong.Flag {
	for n := node; n != nil; n = n.Parent {
		for _, f := range n.Flags {
			if f.Name == name {
				return f
			}
		}
	}
	return nil
}

// repeatedFlag says what is wrong when a flag of the selected command
// (node, or a command above it) that takes one value is given more than
// once (kong keeps the last): "" when none is. Flags that take a list
// (lint's -f) may repeat.
func repeatedFlag(args []string, node *kong.Node) string {
	flags := map[string]*kong.Flag{}
	for n := node; n != nil; n = n.Parent {
		for _, f := range n.Flags {
			if _, inner := flags["--"+f.Name]; inner {
				continue // the command's own flag shadows an outer one
			}
			flags["--"+f.Name] = f
			if f.Short != 0 {
				flags["-"+string(f.Short)] = f
			}
		}
	}
	seen := map[*kong.Flag]int{}
	for _, a := range args {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(a, "=")
		f, ok := flags[name]
		if !ok || f.Value.IsCumulative() || f.Value.IsCounter() {
			continue
		}
		if seen[f]++; seen[f] == 2 {
			return fmt.Sprintf("--%s is given more than once; it takes one value: give it once", f.Name)
		}
	}
	return ""
}
