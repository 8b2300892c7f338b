package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// referenceFlags lists, per command, the flags of seeds/cli-reference.md
// (read by hand; "a/b/c" are spellings of one option, long name first as
// in the reference). ssh, local and validate are not in the reference;
// their lists are SkyPilot's flags for those commands.
var referenceFlags = []struct {
	cmd   string
	flags string
}{
	{"launch", "--config --cluster/-c --dryrun --detach-run/-d/-no-d --docker --name/-n --workdir --infra --cloud --region --zone --num-nodes --cpus --memory --disk-size --disk-tier --network-tier --use-spot/--no-use-spot --image-id --env-file --env --secret-file --secret --local-disk --gpus --instance-type/-t --ports --priority --async/--no-async --idle-minutes-to-autostop/-i --wait-for --down --retry-until-up/-r --yes/-y --no-setup --clone-disk-from/--clone --fast --resize --git-url --git-ref --workspace/-w"},
	{"exec", "--config --cluster/-c --detach-run/-d --name/-n --workdir --infra --cloud --region --zone --num-nodes --cpus --memory --disk-size --disk-tier --network-tier --use-spot/--no-use-spot --image-id --env-file --env --secret-file --secret --local-disk --gpus --instance-type/-t --ports --async/--no-async --git-url --git-ref"},
	{"status", "--config --verbose/-v --refresh/-r --ip --endpoints --endpoint --show-managed-jobs/--no-show-managed-jobs --show-services/--no-show-services --show-pools/--no-show-pools --all-users/-u --output/-o"},
	{"stop", "--config --all/-a --all-users/-u --yes/-y --graceful --graceful-timeout --async/--no-async"},
	{"start", "--config --all/-a --yes/-y --idle-minutes-to-autostop/-i --wait-for --down --retry-until-up/-r --force/-f --async/--no-async"},
	{"down", "--config --all/-a --all-users/-u --yes/-y --purge/-p --graceful --graceful-timeout --async/--no-async"},
	{"autostop", "--config --all/-a --all-users/-u --idle-minutes/-i --wait-for --cancel --down --yes/-y --async/--no-async"},
	{"cost-report", "--config --all/-a --days --output/-o"},
	{"queue", "--config --all-users/-u --skip-finished/-s --output/-o"},
	{"logs", "--config --provision --hook --autostop --worker/-w --sync-down/-s --status --follow/--no-follow --tail"},
	{"cancel", "--config --all/-a --all-users/-u --yes/-y --async/--no-async"},
	{"check", "--config --verbose/-v --workspace/-w --output/-o"},
	{"dashboard", "--config"},
	{"gpus label", "--config --context/-c --cleanup --async"},
	{"gpus list", "--config --all/-a --infra --cloud --region --all-regions --verbose/-v --output/-o"},
	{"jobs cancel", "--config --name/-n --pool/-p --task --graceful --graceful-timeout --all/-a --yes/-y --all-users/-u"},
	{"jobs dashboard", "--config"},
	{"jobs launch", "--config --name/-n --workdir --infra --cloud --region --zone --num-nodes --cpus --memory --disk-size --disk-tier --network-tier --use-spot/--no-use-spot --image-id --env-file --env --secret-file --secret --local-disk --gpus --instance-type/-t --ports --priority --async/--no-async --cluster/-c --job-recovery --detach-run/-d --pool/-p --num-jobs --job-group --no-job-group --depends-on --git-url --git-ref --workspace/-w --output/-o --yes/-y"},
	{"jobs logs", "--config --name/-n --follow/--no-follow --controller --refresh/-r --sync-down/-s --tail"},
	{"jobs pool", ""},
	{"jobs pool apply", "--config --pool/-p --mode --workers --workdir --infra --cloud --region --zone --num-nodes --cpus --memory --disk-size --disk-tier --network-tier --use-spot/--no-use-spot --image-id --env-file --env --secret-file --secret --local-disk --gpus --instance-type/-t --ports --async/--no-async --yes/-y"},
	{"jobs pool down", "--config --all/-a --purge/-p --yes/-y --async/--no-async"},
	{"jobs pool logs", "--config --follow/--no-follow --controller --sync-down/-s --tail"},
	{"jobs pool status", "--config --verbose/-v --all/-a"},
	{"jobs queue", "--config --verbose/-v --limit/-l --refresh/-r --skip-finished --status/-s --since --after --before --infra --all-users/-u --all/-a --output/-o"},
	{"serve down", "--config --all/-a --purge/-p --yes/-y --replica-id --async/--no-async"},
	{"serve logs", "--config --follow/--no-follow --controller --load-balancer --sync-down/-s --tail"},
	{"serve status", "--config --verbose/-v --endpoint"},
	{"serve up", "--config --service-name/-n --git-url --git-ref --workdir --infra --cloud --region --zone --num-nodes --cpus --memory --disk-size --disk-tier --network-tier --use-spot/--no-use-spot --image-id --env-file --env --secret-file --secret --local-disk --gpus --instance-type/-t --ports --async/--no-async --yes/-y"},
	{"serve update", "--config --workdir --infra --cloud --region --zone --num-nodes --cpus --memory --disk-size --disk-tier --network-tier --use-spot/--no-use-spot --image-id --env-file --env --secret-file --secret --local-disk --gpus --instance-type/-t --ports --async/--no-async --mode --yes/-y"},
	{"storage delete", "--config --all/-a --yes/-y --async/--no-async"},
	{"storage ls", "--config --verbose/-v --output/-o"},
	{"volumes apply", "--config --name/-n --infra --type --size --use-existing/--no-use-existing --yes/-y --async/--no-async"},
	{"volumes delete", "--config --all/-a --purge/-p --yes/-y --async/--no-async"},
	{"volumes ls", "--config --verbose/-v --refresh/-r --output/-o"},
	// Not in the reference.
	{"ssh up", "--config --infra --file/-f --async/--no-async"},
	{"ssh down", "--config --infra --async/--no-async"},
	{"local up", "--config --gpus/--no-gpus --ips --ssh-user --ssh-key-path --cleanup --context-name --password --name --port-start --async/--no-async"},
	{"local down", "--config --name --async/--no-async"},
	{"slurm convert", "--output/-o --cluster --gpu-type"},
	{"validate", "--env --env-file --secret --secret-file"},
	{"completion", ""},
	{"show-gpus", "--all/-a --infra --cloud --region --all-regions --verbose/-v --output/-o"},
}

// referenceDefaults are the defaults the reference states.
var referenceDefaults = []struct {
	cmd, flag, def string
}{
	{"status", "--output", `(default "table")`},
	{"cost-report", "--days", "(default 30)"},
	{"logs", "--tail", "(default -1)"},
	{"jobs logs", "--tail", "(default -1)"},
	{"jobs queue", "--limit", "(default 50)"},
	{"jobs pool apply", "--mode", `(default "rolling")`},
	{"serve update", "--mode", `(default "rolling")`},
	{"volumes ls", "--output", `(default "table")`},
	{"logs", "--follow", "(default true)"},
}

// flagLine finds the help line of a long flag: "  -s, --long ..." or
// "      --long ...".
func flagLine(help, long string) (line string, ok bool) {
	re := regexp.MustCompile(`(?m)^\s+(-[a-zA-Z], )?` + regexp.QuoteMeta(long) + `(\s|$).*$`)
	m := re.FindString(help)
	return m, m != ""
}

func TestHelpListsReferenceFlags(t *testing.T) {
	for _, tc := range referenceFlags {
		t.Run(tc.cmd, func(t *testing.T) {
			t.Parallel()
			args := append(strings.Fields(tc.cmd), "--help")
			out, errOut, code := runBinary(t, nil, args...)
			if code != 0 {
				t.Fatalf("sky %s --help: exit %d, stderr %q", tc.cmd, code, errOut)
			}
			for _, opt := range strings.Fields(tc.flags) {
				names := strings.Split(opt, "/")
				long := names[0]
				line, ok := flagLine(out, long)
				if !ok {
					t.Errorf("sky %s --help does not list %s", tc.cmd, long)
					continue
				}
				for _, alt := range names[1:] {
					switch {
					case len(alt) == 2: // a shorthand: must be paired with long
						if !strings.Contains(line, alt+", "+long) {
							t.Errorf("sky %s: %s is not the shorthand of %s: %q", tc.cmd, alt, long, line)
						}
					case strings.HasPrefix(alt, "--"):
						if _, ok := flagLine(out, alt); !ok && !strings.Contains(out, alt) {
							t.Errorf("sky %s --help does not list %s", tc.cmd, alt)
						}
					default: // Click-only spellings such as -no-d are mentioned
						if !strings.Contains(out, alt) {
							t.Errorf("sky %s --help does not mention %s", tc.cmd, alt)
						}
					}
				}
			}
		})
	}
}

func TestHelpShowsReferenceDefaults(t *testing.T) {
	for _, tc := range referenceDefaults {
		out, _, code := runInProcess(t, append(strings.Fields(tc.cmd), "--help")...)
		if code != 0 {
			t.Fatalf("sky %s --help: exit %d", tc.cmd, code)
		}
		line, ok := flagLine(out, tc.flag)
		if !ok || !strings.Contains(line, tc.def) {
			t.Errorf("sky %s %s: want %s in %q", tc.cmd, tc.flag, tc.def, line)
		}
	}
}

// Every command in the tree is covered by referenceFlags, so a command added
// later without a reference row fails here.
func TestEveryCommandHasAReferenceRow(t *testing.T) {
	io, _, _ := testIO("", false)
	root := newRootCmd(testFactory(io, nil))
	known := map[string]bool{}
	for _, tc := range referenceFlags {
		known[tc.cmd] = true
	}
	for _, c := range allCommands(root) {
		path := commandPath(c)
		switch {
		case path == "sky", path == "help", path == "agent", path == "serve-lb", path == "k8s-exec", strings.HasPrefix(path, "api"), strings.HasPrefix(path, "agent "):
			continue // not this package's commands
		case c.HasAvailableSubCommands() && path != "jobs pool":
			continue // groups have no flags of their own
		}
		if !known[path] {
			t.Errorf("command %q has no row in referenceFlags", path)
		}
	}
}

// allCommands returns root and every command below it.
func allCommands(root *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{root}
	for _, c := range root.Commands() {
		out = append(out, allCommands(c)...)
	}
	return out
}
