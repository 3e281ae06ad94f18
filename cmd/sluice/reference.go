package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/alecthomas/kong"
)

// writeReference writes the command reference of docs/cli.md from the
// command tree itself: every command, its arguments and its flags, with
// defaults and variables, so the docs cannot drift from the CLI
// (TestCLIReference).
func writeReference(w io.Writer, k *kong.Kong) {
	root := k.Model.Node
	fmt.Fprintf(w, "Flags of every command: %s. A flag's default and variable are in parentheses.\n\n", flagList(root.Flags))
	seen := map[string]string{}
	for _, n := range root.Children {
		if n.Hidden {
			continue
		}
		writeNode(w, n, seen)
	}
}

// writeNode writes n and its children. seen maps a flag list already
// written to the command it was written for: a group whose flags are
// another's (the admin commands' endpoint and credentials) names that one
// instead of repeating the list.
func writeNode(w io.Writer, n *kong.Node, seen map[string]string) {
	leaf := len(n.Children) == 0
	if leaf || len(n.Flags) > 0 {
		usage := "sluice " + n.Path()
		if !leaf {
			usage += " <command>"
		}
		for _, p := range n.Positional {
			usage += " " + p.Summary()
		}
		fmt.Fprintf(w, "#### `%s`\n\n%s\n\n", usage, mdEscape(n.Help))
		var list strings.Builder
		writeFlags(&list, n.Flags)
		switch first, ok := seen[list.String()]; {
		case list.Len() == 0:
		case ok:
			if leaf {
				fmt.Fprintf(w, "Flags: those of `sluice %s`.\n\n", first)
			} else {
				fmt.Fprintf(w, "Flags of every `sluice %s` command: those of `sluice %s`.\n\n", n.Path(), first)
			}
		default:
			seen[list.String()] = n.Path()
			if !leaf {
				fmt.Fprintf(w, "Flags of every `sluice %s` command:\n\n", n.Path())
			}
			if first, rest := within(list.String(), seen); first != "" {
				fmt.Fprintf(w, "The flags of `sluice %s`, and:\n\n%s", first, rest)
				break
			}
			io.WriteString(w, list.String())
		}
	}
	for _, c := range n.Children {
		if !c.Hidden {
			writeNode(w, c, seen)
		}
	}
}

// writeFlags writes one list item per flag: the flag (with its value's
// placeholder when one is set; else the flag's name says it), its default
// and environment variable in parentheses, then its help.
func writeFlags(w io.Writer, flags []*kong.Flag) {
	n := 0
	for _, f := range flags {
		if f.Hidden || f.Name == "help" {
			continue
		}
		name := "`--" + f.Name
		if !f.IsBool() && f.PlaceHolder != "" {
			name += "=" + f.PlaceHolder
		}
		name += "`"
		if f.Short != 0 {
			name = fmt.Sprintf("`-%c`, %s", f.Short, name)
		}
		var about []string
		if f.HasDefault && f.Default != "" {
			about = append(about, "`"+f.Default+"`")
		}
		help := f.Help
		if e := f.Tag.Get("envvar"); e != "" {
			about = append(about, "`$"+e+"`")
			help = strings.TrimSuffix(help, " ($"+e+")")
		}
		if len(about) > 0 {
			name += " (" + strings.Join(about, ", ") + ")"
		}
		fmt.Fprintf(w, "- %s: %s\n", name, mdEscape(help))
		n++
	}
	if n > 0 {
		fmt.Fprintln(w)
	}
}

// flagList names flags inline: `-o`, `--output=table|json`.
func flagList(flags []*kong.Flag) string {
	var out []string
	for _, f := range flags {
		s := "`--" + f.Name
		if !f.IsBool() {
			s += "=" + placeholder(f)
		}
		s += "`"
		if f.Short != 0 {
			s = fmt.Sprintf("`-%c`/%s", f.Short, s)
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// placeholder is the flag's value as the reference writes it: its
// placeholder tag, else its name in capitals.
func placeholder(f *kong.Flag) string {
	if f.PlaceHolder != "" {
		return f.PlaceHolder
	}
	return strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
}

// mdEscape keeps help text literal in Markdown: pipes, stars and
// angle brackets.
var mdEscape = strings.NewReplacer("|", `\|`, "*", `\*`, "<", "&lt;").Replace

// within reports a list already written (a group's, of more than one
// item) whose every item is in list, and list without those items: so a
// leaf that takes the admin flags besides its own lists only its own.
func within(list string, seen map[string]string) (first, rest string) {
	items := strings.SplitAfter(list, "\n")
	for l, path := range seen {
		sub := strings.SplitAfter(l, "\n")
		if len(sub) <= 3 || len(sub) >= len(items) {
			continue
		}
		var left []string
		n := 0
		for _, r := range items {
			if strings.TrimSpace(r) != "" && slices.Contains(sub, r) {
				n++
			} else {
				left = append(left, r)
			}
		}
		if n == len(sub)-2 && (first == "" || path < first) { // every item of sub (less the blank line and "")
			first, rest = path, strings.Join(left, "")
		}
	}
	return first, rest
}
