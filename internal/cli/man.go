package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The man pages are written here rather than with cobra's doc package:
// that package renders through a Markdown library whose initializers
// (with those of the YAML library it also brings) ran in every agentrun
// process, the supervisor and the sandbox's pid 1 too, for a command run
// once per install.

// writeManPages writes a page for root and for each command under it that
// a user can run, named after the command's path (agentrun.1,
// agentrun-submit.1, agentrun-server-hosts.1), and returns their paths.
func writeManPages(root *cobra.Command, dir, source string) ([]string, error) {
	var paths []string
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		if c != root && (!c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand()) {
			return nil
		}
		p := filepath.Join(dir, manName(c)+".1")
		if err := os.WriteFile(p, manPage(c, source), 0o644); err != nil {
			return err
		}
		paths = append(paths, p)
		for _, sub := range c.Commands() {
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	return paths, walk(root)
}

// manName is the page's name: the command's path joined by '-'.
func manName(c *cobra.Command) string { return strings.ReplaceAll(c.CommandPath(), " ", "-") }

// manPage is one command's page in man(7) markup.
func manPage(c *cobra.Command, source string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, ".TH \"AGENTRUN\" \"1\" \"\" \"%s\" \"agentrun manual\"\n.nh\n.ad l\n", roffQuoted(source))
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", roffText(manName(c)), roffText(c.Short))
	b.WriteString(".SH SYNOPSIS\n")
	if c.Runnable() {
		fmt.Fprintf(&b, "\\fB%s\\fP\n.br\n", roffText(c.UseLine()))
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\\fB%s COMMAND\\fP\n", roffText(c.CommandPath()))
	}
	b.WriteString(".SH DESCRIPTION\n")
	desc := c.Long
	if desc == "" {
		desc = c.Short
	}
	roffBlock(&b, desc)
	manFlags(&b, "OPTIONS", c.NonInheritedFlags())
	manFlags(&b, "OPTIONS INHERITED FROM PARENT COMMANDS", c.InheritedFlags())
	if c.Example != "" {
		b.WriteString(".SH EXAMPLE\n.nf\n")
		for _, l := range strings.Split(strings.TrimRight(c.Example, "\n"), "\n") {
			b.WriteString(roffLine(l) + "\n")
		}
		b.WriteString(".fi\n")
	}
	var see []*cobra.Command
	if c.HasParent() {
		see = append(see, c.Parent())
	}
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() && !sub.IsAdditionalHelpTopicCommand() {
			see = append(see, sub)
		}
	}
	if len(see) > 0 {
		b.WriteString(".SH SEE ALSO\n")
		for i, s := range see {
			sep := ",\n"
			if i == len(see)-1 {
				sep = "\n"
			}
			fmt.Fprintf(&b, "\\fB%s\\fP(1)%s", roffText(manName(s)), sep)
		}
	}
	return b.Bytes()
}

// manFlags lists the flags of fs that are not hidden under heading.
func manFlags(b *bytes.Buffer, heading string, fs *pflag.FlagSet) {
	first := true
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if first {
			b.WriteString(".SH " + heading + "\n")
			first = false
		}
		varname, usage := pflag.UnquoteUsage(f)
		b.WriteString(".TP\n")
		if f.Shorthand != "" && f.ShorthandDeprecated == "" {
			fmt.Fprintf(b, "\\fB\\-%s\\fP, ", roffOption(f.Shorthand))
		}
		fmt.Fprintf(b, "\\fB\\-\\-%s\\fP", roffOption(f.Name))
		if varname != "" {
			fmt.Fprintf(b, " \\fI%s\\fP", roffText(varname))
		}
		b.WriteString("\n" + roffLine(usage))
		switch f.DefValue {
		case "", "false", "0", "[]", "map[]":
		default:
			b.WriteString(" (default " + roffText(f.DefValue) + ")")
		}
		b.WriteString("\n")
	})
}

// roffBlock writes text: paragraphs apart, indented lines (examples,
// lists of values) kept as they are.
func roffBlock(b *bytes.Buffer, text string) {
	literal := false
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		indented := strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")
		switch {
		case indented && !literal:
			b.WriteString(".PP\n.nf\n")
			literal = true
		case !indented && literal && strings.TrimSpace(l) != "":
			b.WriteString(".fi\n")
			literal = false
		}
		if strings.TrimSpace(l) == "" {
			if !literal {
				b.WriteString(".PP\n")
			} else {
				b.WriteString("\n")
			}
			continue
		}
		b.WriteString(roffLine(l) + "\n")
	}
	if literal {
		b.WriteString(".fi\n")
	}
}

// roffText escapes s for a line of text: backslashes are printed, not
// read as escapes.
func roffText(s string) string { return strings.ReplaceAll(s, `\`, `\e`) }

// roffLine is roffText for a whole line, which must not start with a
// control character either (a dot or an apostrophe).
func roffLine(s string) string {
	s = roffText(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// roffOption is an option's name, its hyphens minus signs (what a reader
// copies from the page is then what the shell is given).
func roffOption(s string) string { return strings.ReplaceAll(roffText(s), "-", `\-`) }

// roffQuoted escapes s for a quoted macro argument.
func roffQuoted(s string) string { return strings.ReplaceAll(roffText(s), `"`, `\(dq`) }
