package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/skygo/skygo/internal/cliext"
)

// A command an infrastructure registers (here a toy one, registered only
// in this test) is part of sky with no other edit: listed in its help
// group, run with the command line's argument checks, flags and usage
// errors.
func TestExtraCommand(t *testing.T) {
	t.Cleanup(cliext.Register(cliext.Command{Name: "toyinfra", Group: "infra", New: func(e cliext.Env) *cobra.Command {
		var check func() error
		var async func() bool
		cmd := &cobra.Command{
			Use:   "hello NAME",
			Short: "Greet from the toy infrastructure",
			Args:  e.Args(1, 1),
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := check(); err != nil {
					return err
				}
				if args[0] == "nobody" {
					return e.UsageErrorf("toy: nobody to greet")
				}
				io := e.IO()
				_, err := io.Out.Write([]byte(io.Green("hello "+args[0]) + map[bool]string{true: " (async)", false: ""}[async()] + "\n"))
				return err
			},
		}
		check, async = e.ConfigFlag(cmd), e.AsyncFlag(cmd)
		return e.Group("toyinfra", "Toy infrastructure commands", cmd)
	}}))
	t.Cleanup(cliext.Register(cliext.Command{Parent: "gpus", Name: "toylabel", New: func(e cliext.Env) *cobra.Command {
		return &cobra.Command{Use: "toylabel", Short: "Label the toy's nodes", Args: e.NoArgs(),
			RunE: func(*cobra.Command, []string) error { return e.NotAvailable("gpus toylabel", "toy labelling") }}
	}}))
	if out, _, code := runInProcess(t, "gpus", "--help"); code != 0 || !strings.Contains(out, "toylabel    Label the toy's nodes") {
		t.Errorf("sky gpus --help (exit %d) does not list toylabel:\n%s", code, out)
	}
	if _, errOut, code := runInProcess(t, "gpus", "toylabel"); code == 0 || !strings.Contains(errOut, "toy labelling") {
		t.Errorf("sky gpus toylabel: exit %d, stderr %q", code, errOut)
	}
	out, _, code := runInProcess(t, "--help")
	if code != 0 || !strings.Contains(out, "toyinfra") || !strings.Contains(out[strings.Index(out, "Infrastructure commands:"):], "toyinfra    Toy infrastructure commands") {
		t.Errorf("sky --help (exit %d) does not list toyinfra under the infrastructure commands:\n%s", code, out)
	}
	for _, c := range []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{"toyinfra", "hello", "ann"}, 0, "hello ann\n", ""},
		{[]string{"toyinfra", "hello", "--async", "ann"}, 0, "hello ann (async)\n", ""},
		{[]string{"toyinfra", "hello", "nobody"}, 2, "", "toy: nobody to greet"},
		{[]string{"toyinfra", "hello"}, 2, "", "missing argument"},
		{[]string{"toyinfra", "hello", "--config", "=x", "ann"}, 2, "", "invalid --config"},
		{[]string{"toyinfra", "helo"}, 2, "", `did you mean "hello"?`},
	} {
		out, errOut, code := runInProcess(t, c.args...)
		if code != c.code || out != c.out || !strings.Contains(errOut, c.err) {
			t.Errorf("sky %s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr with %q", strings.Join(c.args, " "), code, out, errOut, c.code, c.out, c.err)
		}
	}
}
