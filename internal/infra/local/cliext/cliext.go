// Package cliext is what the local infrastructure adds to the sky command
// line: `sky local up` and `sky local down`, which enable and disable it
// on the API server. SkyPilot's flags for its kind and remote deployments
// are refused with what to do instead.
package cliext

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/cliext"
	"github.com/skygo/skygo/internal/op"
)

func init() {
	cliext.Register(cliext.Command{Name: "local", Group: "infra", New: newLocalCmd})
}

// UpOptions is everything `sky local up` needs.
type UpOptions struct {
	GPUs        bool
	IPsFile     string
	SSHUser     string
	SSHKeyPath  string
	Cleanup     bool
	ContextName string
	Password    string
	Name        string
	PortStart   int
	Async       bool
}

func newLocalCmd(e cliext.Env) *cobra.Command {
	return e.Group("local", "Enable or disable the local infrastructure (clusters on this machine)",
		newUpCmd(e), newDownCmd(e))
}

func newUpCmd(e cliext.Env) *cobra.Command {
	opts := &UpOptions{}
	var checkConfig func() error
	var gpus, async func() bool
	cmd := &cobra.Command{
		Use:   "up [flags]",
		Short: "Enable the local infrastructure: clusters that run on this machine (--infra local)",
		Long: `Enable SkyGo's embedded local infrastructure, where each cluster node runs
as a set of processes on this machine (no VM, container or Kubernetes is
created). Once enabled, the optimizer may choose it and ` + "`sky launch --infra local`" + `
runs there. It is enabled by default; ` + "`sky local down`" + ` disables it.

SkyPilot's ` + "`sky local up`" + ` creates a kind Kubernetes cluster instead; SkyGo does not
create one. To run on other machines, describe them as an SSH node pool and
run ` + "`sky ssh up`" + `: --ips, --ssh-user, --ssh-key-path, --cleanup, --context-name
and --password are refused with that hint, and so are --name and --port-start,
which only name and expose a kind cluster.`,
		Example: `  sky local up
  sky launch --infra local 'echo hello'
  sky local down`,
		Args: e.NoArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkConfig(); err != nil {
				return err
			}
			opts.GPUs, opts.Async = gpus(), async()
			if err := checkUpFlags(e, cmd, opts); err != nil {
				return err
			}
			remote := []bool{opts.IPsFile != "", opts.SSHUser != "", opts.SSHKeyPath != ""}
			if (remote[0] || remote[1] || remote[2]) && !(remote[0] && remote[1] && remote[2]) {
				return e.UsageErrorf("--ips, --ssh-user and --ssh-key-path go together: give all three to deploy on remote machines")
			}
			for _, p := range []struct{ flag, path string }{{"--ips", opts.IPsFile}, {"--ssh-key-path", opts.SSHKeyPath}} {
				if p.path == "" {
					continue
				}
				if _, err := os.Stat(p.path); err != nil {
					return e.UsageErrorf("%s %s: file not found", p.flag, p.path)
				}
			}
			if cmd.Flags().Changed("port-start") && (opts.PortStart < 1 || opts.PortStart > 65535-1000) {
				return e.UsageErrorf("invalid --port-start %d: want a port from 1 to %d", opts.PortStart, 65535-1000)
			}
			return cliext.Send(e, apiop.LocalUp, op.NoBody{}, opts.Async, true)
		},
	}
	fs := cmd.Flags()
	checkConfig = e.ConfigFlag(cmd)
	gpus = e.BoolPair(fs, "gpus", true, "Local clusters see this machine's GPUs", "[Refused] Hide the machine's GPUs")
	fs.StringVar(&opts.IPsFile, "ips", "", "[Refused: use SSH node pools, sky ssh up] File of remote machine IPs")
	fs.StringVar(&opts.SSHUser, "ssh-user", "", "[Refused: use SSH node pools] SSH user for the remote machines")
	fs.StringVar(&opts.SSHKeyPath, "ssh-key-path", "", "[Refused: use SSH node pools] SSH private key for the remote machines")
	fs.BoolVar(&opts.Cleanup, "cleanup", false, "[Refused: use sky ssh down] Remove the cluster from the remote machines")
	fs.StringVar(&opts.ContextName, "context-name", "", "[Refused: no Kubernetes cluster is created] Kubernetes context name")
	fs.StringVar(&opts.Password, "password", "", "[Refused: use SSH node pools] sudo password on the remote machines")
	fs.StringVar(&opts.Name, "name", "", "[Refused: no kind cluster is created] Name of the kind cluster")
	fs.IntVar(&opts.PortStart, "port-start", 0, "[Refused: no kind cluster is created] First host port mapped for services")
	async = e.AsyncFlag(cmd)
	return cmd
}

// checkUpFlags refuses the flags of SkyPilot's kind and remote
// deployments, which the embedded local infrastructure has no use for.
func checkUpFlags(e cliext.Env, cmd *cobra.Command, opts *UpOptions) error {
	for _, name := range []string{"ips", "ssh-user", "ssh-key-path", "cleanup", "context-name", "password"} {
		if cmd.Flags().Changed(name) {
			return e.UsageErrorf("--%s deploys on remote machines, which SkyGo does with SSH node pools: list them in ~/.sky/ssh_node_pools.yaml and run `sky ssh up`", name)
		}
	}
	for _, name := range []string{"name", "port-start"} {
		if cmd.Flags().Changed(name) {
			return e.UsageErrorf("--%s configures a kind Kubernetes cluster, and SkyGo's local infrastructure runs clusters as processes on this machine without one", name)
		}
	}
	if !opts.GPUs {
		return e.UsageErrorf("--no-gpus: local clusters are processes on this machine and see its GPUs; hiding them is not available")
	}
	return nil
}

// DownOptions is everything `sky local down` needs.
type DownOptions struct {
	Name  string
	Async bool
}

func newDownCmd(e cliext.Env) *cobra.Command {
	opts := &DownOptions{}
	var checkConfig func() error
	var async func() bool
	cmd := &cobra.Command{
		Use:   "down [flags]",
		Short: "Tear down every cluster of the local infrastructure and disable it",
		Long: `Tear down every cluster that runs on this machine's local infrastructure
(as ` + "`sky down`" + ` would) and disable the infrastructure, so the optimizer no longer
chooses it. ` + "`sky local up`" + ` enables it again.`,
		Args: e.NoArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkConfig(); err != nil {
				return err
			}
			opts.Async = async()
			if opts.Name != "" {
				return e.UsageErrorf("--name names a kind cluster of SkyPilot's `sky local up`; SkyGo's local infrastructure has none (run `sky local down` without it)")
			}
			return cliext.Send(e, apiop.LocalDown, op.NoBody{}, opts.Async, true)
		},
	}
	checkConfig = e.ConfigFlag(cmd)
	cmd.Flags().StringVar(&opts.Name, "name", "", "Name of SkyPilot's kind cluster; refused, SkyGo's local infrastructure has none")
	async = e.AsyncFlag(cmd)
	return cmd
}
