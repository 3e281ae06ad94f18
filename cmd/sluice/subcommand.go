package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// adminFlags are the flags every admin subcommand takes.
type adminFlags struct {
	client clientOptions
	output string
}

func addAdminFlags(fs *flagSet) *adminFlags {
	a := &adminFlags{}
	endpoint := os.Getenv("SLUICE_ENDPOINT")
	if endpoint == "" {
		endpoint = defaultEndpoint
	}
	fs.StringVar(&a.client.Endpoint, "endpoint", endpoint, "admin API URL (env SLUICE_ENDPOINT); an execute-api URL turns on SigV4")
	// The token's default is read in check, not here: -h would print it.
	fs.StringVar(&a.client.Token, "token", "", "bearer token of the local admin API (env SLUICE_ADMIN_TOKEN)")
	fs.BoolVar(&a.client.SigV4, "sigv4", false, "sign requests with SigV4 (service execute-api, default AWS credential chain)")
	fs.StringVar(&a.client.Region, "region", "", "AWS region for SigV4 (default: from the endpoint, then AWS_REGION)")
	fs.DurationVar(&a.client.Timeout, "timeout", 30*time.Second, "timeout of each HTTP request")
	fs.StringVar(&a.output, "o", "table", "output: table or json")
	return a
}

func (a *adminFlags) check(fs *flagSet) error {
	if a.client.Token == "" {
		a.client.Token = os.Getenv("SLUICE_ADMIN_TOKEN")
	}
	if a.output != "table" && a.output != "json" {
		return fs.usageErrorf("-o %q: want table or json", a.output)
	}
	return nil
}

// env carries a command's streams, so tests can run commands in-process.
type env struct {
	stdout, stderr io.Writer
	stdin          io.Reader
}

// subcommand is one leaf command such as `rules ls`.
type subcommand struct {
	name, args, help string
	run              func(ctx context.Context, e env, args []string) error
}

// runGroup dispatches `sluice <group> <sub> ...`.
func runGroup(ctx context.Context, e env, group string, subs []subcommand, args []string) error {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "usage: sluice %s <command> [flags]\n\ncommands:\n", group)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, s := range subs {
			fmt.Fprintf(tw, "  %s %s\t%s\n", s.name, s.args, s.help)
		}
		tw.Flush()
		fmt.Fprintf(w, "\nRun `sluice %s <command> -h` for the flags of one command.\n", group)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(e.stdout)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(ctx, e, args[1:])
		}
	}
	usage(e.stderr)
	return usageErrorf("unknown command %q", group+" "+args[0])
}

// flagSet is a command's flags with what its usage says: the positional
// arguments and the help text.
type flagSet struct {
	*flag.FlagSet
	args, help string
	e          env
}

// newFlagSet returns the flags of command name (such as "rules get"),
// which takes the positional arguments args (such as "ID").
func newFlagSet(e env, name, args, help string) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), args: args, help: help, e: e}
	// The flag package's own messages and its dump of every flag on any
	// error are replaced by parseArgs' usage errors: the wrong argument and
	// the short usage. -h prints the whole usage (fullUsage).
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// shortUsage is the command's synopsis and where its flags are listed.
func (fs *flagSet) shortUsage() string {
	return fmt.Sprintf("%s\nRun `sluice %s -h` for the flags.", fs.synopsis(), fs.Name())
}

// synopsis is "usage: sluice <command> [flags] <arguments>".
func (fs *flagSet) synopsis() string {
	return strings.TrimSpace("usage: sluice " + fs.Name() + " [flags] " + fs.args)
}

// fullUsage writes the synopsis, the help and every flag, for -h.
func (fs *flagSet) fullUsage(w io.Writer) {
	fmt.Fprintf(w, "%s\n\n%s\n\nflags:\n", fs.synopsis(), fs.help)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// usageErrorf is a usage error of this command: the message (which names
// the wrong argument), then the short usage.
func (fs *flagSet) usageErrorf(format string, args ...any) error {
	return usageErrorf("%s: %s\n%s", fs.Name(), fmt.Sprintf(format, args...), fs.shortUsage())
}

// parseArgs parses flags that come before, between or after the positional
// arguments (`load URL --rate 5` and `load --rate 5 URL` are the same) and
// returns the positional ones, in order. The arguments are sorted before
// flag.Parse sees them: a flag that takes a value keeps the next argument
// as its value (`--subject-prefix x`, even `--token -`), a boolean flag
// does not (`--sigv4 ID`), `-flag=value` is one argument, a lone "-" is a
// positional argument (stdin), and everything after "--" is positional
// even if it starts with a dash.
func parseArgs(fs *flagSet, args []string) ([]string, error) {
	flags, pos := splitArgs(fs.FlagSet, args)
	if err := fs.Parse(flags); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.fullUsage(fs.e.stdout)
			return nil, errHelp
		}
		// The flag package's message names the argument: "flag provided
		// but not defined: -x", "invalid value "y" for flag -rate: ...",
		// "flag needs an argument: -o".
		return nil, fs.usageErrorf("%v", err)
	}
	// Nothing is left: splitArgs gave Parse flags and their values only.
	return append(pos, fs.Args()...), nil
}

// splitArgs separates args into flags (with the values they take) and
// positional arguments, keeping the order within each.
func splitArgs(fs *flag.FlagSet, args []string) (flags, pos []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return flags, append(pos, args[i+1:]...)
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // unknown (or -h): Parse reports it
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return flags, pos
}

// wantArgs checks that there are exactly n positional arguments, naming
// the first extra one or what is missing.
func wantArgs(fs *flagSet, pos []string, n int) error {
	switch {
	case len(pos) > n:
		return fs.usageErrorf("unexpected argument %q", pos[n])
	case len(pos) < n:
		missing := strings.Fields(fs.args)
		if len(pos) < len(missing) {
			return fs.usageErrorf("missing %s", strings.Join(missing[len(pos):], " "))
		}
		return fs.usageErrorf("want %d argument(s), got %d", n, len(pos))
	}
	return nil
}

// parse parses a command's arguments, wants n positional ones and checks
// the admin flags; it returns the positional arguments.
func (a *adminFlags) parse(fs *flagSet, args []string, n int) ([]string, error) {
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	if err := wantArgs(fs, pos, n); err != nil {
		return nil, err
	}
	if err := a.check(fs); err != nil {
		return nil, err
	}
	return pos, nil
}

// connect is parse followed by the admin client, for the commands that
// need nothing else first.
func (a *adminFlags) connect(ctx context.Context, fs *flagSet, args []string, n int) ([]string, *adminClient, error) {
	pos, err := a.parse(fs, args, n)
	if err != nil {
		return nil, nil, err
	}
	c, err := newAdminClient(ctx, a.client)
	if err != nil {
		return nil, nil, err
	}
	return pos, c, nil
}

// print writes v as JSON with -o json, else calls table.
func (a *adminFlags) print(w io.Writer, v any, table func()) error {
	if a.output == "json" {
		return printJSON(w, v)
	}
	table()
	return nil
}

// printJSON writes v indented, for scripts.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ---- shared by rules and plans ----

// fetch reads one rule or plan: kind is "rule" or "plan", key its id or
// name.
func fetch[T any](ctx context.Context, c *adminClient, kind, key string) (T, error) {
	var v T
	if _, err := c.getJSON(ctx, "/"+kind+"s/"+url.PathEscape(key), nil, &v); err != nil {
		return v, fmt.Errorf("get %s %s: %w", kind, key, err)
	}
	return v, nil
}

// getCommand is `rules get` and `plans get`: fetch one and show it as
// JSON or with table.
func getCommand[T any](kind, arg string, table func(io.Writer, T)) func(ctx context.Context, e env, args []string) error {
	return func(ctx context.Context, e env, args []string) error {
		fs := newFlagSet(e, kind+"s get", arg, "Show one "+kind+".")
		a := addAdminFlags(fs)
		pos, c, err := a.connect(ctx, fs, args, 1)
		if err != nil {
			return err
		}
		v, err := fetch[T](ctx, c, kind, pos[0])
		if err != nil {
			return err
		}
		return a.print(e.stdout, v, func() { table(e.stdout, v) })
	}
}

// rmCommand is `rules rm` and `plans rm`: DELETE with If-Match --version,
// or the current version when none is given.
func rmCommand(kind, arg string) func(ctx context.Context, e env, args []string) error {
	return func(ctx context.Context, e env, args []string) error {
		fs := newFlagSet(e, kind+"s rm", arg, "Delete a "+kind+". If-Match sends --version, else the current version.")
		a := addAdminFlags(fs)
		version := fs.Int64("version", 0, "If-Match this version (default: the current one)")
		pos, c, err := a.connect(ctx, fs, args, 1)
		if err != nil {
			return err
		}
		key := pos[0]
		v := *version
		if v == 0 {
			// Only the version is needed; the field is "version" in both.
			cur, err := fetch[struct {
				Version int64 `json:"version"`
			}](ctx, c, kind, key)
			if err != nil {
				return err
			}
			v = cur.Version
		}
		if err := c.sendJSON(ctx, http.MethodDelete, "/"+kind+"s/"+url.PathEscape(key), nil, v, nil); err != nil {
			return fmt.Errorf("delete %s %s (If-Match %d): %w", kind, key, v, err)
		}
		return a.print(e.stdout, map[string]any{"deleted": key, "version": v}, func() {
			fmt.Fprintf(e.stdout, "deleted %s %s (version %d)\n", kind, key, v)
		})
	}
}

// readJSON decodes a rule or plan (kind) from file, "-" for stdin,
// refusing fields the type does not have.
func readJSON[T any](e env, kind, file string) (T, error) {
	var v T
	b, err := readInput(e, file)
	if err != nil {
		return v, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, fmt.Errorf("read %s from %s: %w", kind, file, err)
	}
	return v, nil
}

func readInput(e env, name string) ([]byte, error) {
	var (
		b   []byte
		err error
	)
	if name == "-" {
		b, err = io.ReadAll(io.LimitReader(e.stdin, 1<<20))
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b, nil
}
