package cli

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/client"
	"github.com/skygo/skygo/internal/task"
)

// `sky serve up/update/status/logs/down`: SkyServe services (a load
// balancer in front of replica clusters <service>-<id>), through the
// serve.* operations. The client reads the YAML, makes the checks of
// `sky serve up` time (task.ServiceSpecOf) and prints; the controller runs
// in the API server.

func newServeCmd(f *Factory) *cobra.Command {
	g := newGroupCmd("serve", "SkyServe: serve models and APIs across regions and clouds",
		newServeUpCmd(f, nil), newServeUpdateCmd(f, nil), newServeStatusCmd(f, nil),
		newServeLogsCmd(f, nil),
		newServeDownCmd(f, nil))
	g.Long = `SkyServe runs a task YAML with a service: section as a service: a set of
replica clusters (<service>-<replica id>) behind one load balancer, scaled
by the section's replica policy. 'sky serve up' starts one, 'sky serve
status' shows its endpoint and replicas, 'sky serve update' rolls out a new
version, 'sky serve logs' reads its logs and 'sky serve down' tears it down.`
	return g
}

// ServeUpOptions is everything `sky serve up` needs.
type ServeUpOptions struct {
	IO          *IOStreams
	Config      []string
	ServiceName string
	Task        *taskInput
	Yes         bool
	Async       bool
}

func newServeUpCmd(f *Factory, runF func(*ServeUpOptions) error) *cobra.Command {
	opts := &ServeUpOptions{IO: f.IO}
	var (
		tf    taskFlags
		async boolPair
	)
	cmd := &cobra.Command{
		Use:   "up [flags] SERVICE_YAML",
		Short: "Launch a service",
		Long: `Launch a service from a task YAML with a service: section. Replicas are
launched as clusters <service>-<replica id> and put behind a load balancer;
the command ends with the service's endpoint URL and the commands to watch
it ('sky serve status NAME --endpoint' prints the URL alone). Task flags
override the YAML as in 'sky launch'.`,
		Args: rangeArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			entry, err := yamlEntrypoint(args[0])
			if err != nil {
				return err
			}
			if opts.ServiceName != "" {
				if err := checkServiceName(opts.ServiceName); err != nil {
					return err
				}
			}
			if opts.Task, err = tf.resolve(entry, f.LookupEnv); err != nil {
				return err
			}
			opts.Async = async.Value
			if runF != nil {
				return runF(opts)
			}
			return serveUpRun(f, opts)
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().StringVarP(&opts.ServiceName, "service-name", "n", "", "Service name, unique per service (default: generated)")
	addTaskFlags(cmd, &tf, taskFlagSet{git: true})
	addAsyncFlag(cmd, &async)
	addYesFlag(cmd, &opts.Yes)
	return cmd
}

// ServeUpdateOptions is everything `sky serve update` needs.
type ServeUpdateOptions struct {
	IO          *IOStreams
	Config      []string
	ServiceName string
	Task        *taskInput
	Mode        string
	Yes         bool
	Async       bool
}

func newServeUpdateCmd(f *Factory, runF func(*ServeUpdateOptions) error) *cobra.Command {
	opts := &ServeUpdateOptions{IO: f.IO}
	var (
		tf    taskFlags
		async boolPair
	)
	cmd := &cobra.Command{
		Use:   "update [flags] SERVICE_NAME SERVICE_YAML",
		Short: "Update a service to a new version",
		Long: `Make SERVICE_YAML the service's next version. With --mode rolling (the
default) new replicas replace old ones as they become ready, and traffic may
reach both versions meanwhile; with --mode blue_green the old replicas serve
until enough new ones are ready, then traffic switches at once.`,
		Args: rangeArgs(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			opts.ServiceName = args[0]
			entry, err := yamlEntrypoint(args[1])
			if err != nil {
				return err
			}
			if opts.Task, err = tf.resolve(entry, f.LookupEnv); err != nil {
				return err
			}
			if opts.Mode, err = choice("--mode", opts.Mode, api.UpdateRolling, api.UpdateBlueGreen); err != nil {
				return err
			}
			opts.Async = async.Value
			if runF != nil {
				return runF(opts)
			}
			return serveUpdateRun(f, opts)
		},
	}
	addConfigFlag(cmd, &opts.Config)
	addTaskFlags(cmd, &tf, taskFlagSet{})
	addAsyncFlag(cmd, &async)
	cmd.Flags().StringVar(&opts.Mode, "mode", "rolling", "rolling (replace replicas gradually) or blue_green (switch once the new ones are ready)")
	addYesFlag(cmd, &opts.Yes)
	return cmd
}

// ServeStatusOptions is everything `sky serve status` needs.
type ServeStatusOptions struct {
	IO       *IOStreams
	Config   []string
	Services []string
	Verbose  bool
	Endpoint bool
	Output   string
}

func newServeStatusCmd(f *Factory, runF func(*ServeStatusOptions) error) *cobra.Command {
	opts := &ServeStatusOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "status [flags] [SERVICE_NAMES]...",
		Short: "Show services and their replicas",
		Long: `Show your services (or the named ones) in the Services table — version,
uptime, status, ready/total replicas, endpoint — and their replicas in the
Service Replicas table. --endpoint prints only the endpoint URL of the one
named service, for scripts: ENDPOINT=$(sky serve status NAME --endpoint).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			opts.Services = args
			if opts.Endpoint && len(args) != 1 {
				return flagErrorf("--endpoint needs exactly one SERVICE_NAME, got %d", len(args))
			}
			var err error
			if opts.Output, err = parseOutput(opts.Output); err != nil {
				return err
			}
			if opts.Endpoint && opts.Output == "json" {
				return flagErrorf("--endpoint prints only the URL; drop -o json (or --endpoint)")
			}
			if runF != nil {
				return runF(opts)
			}
			return serveStatusRun(f, opts)
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().BoolVarP(&opts.Verbose, "verbose", "v", false, "Show all details: policies, requested resources, replica clusters and reasons")
	cmd.Flags().BoolVar(&opts.Endpoint, "endpoint", false, "Print only the service's endpoint URL")
	addOutputFlag(cmd, &opts.Output)
	return cmd
}

// ServeLogsOptions is everything `sky serve logs` needs.
type ServeLogsOptions = serviceLogsOptions

func newServeLogsCmd(f *Factory, runF func(*ServeLogsOptions) error) *cobra.Command {
	if runF == nil {
		runF = func(o *ServeLogsOptions) error { return serveLogsRun(f, o) }
	}
	cmd := serviceLogsCmd(f, runF, "serve logs", "SERVICE_NAME", "REPLICA_IDS", true)
	cmd.Long = `Stream one log of a service: a replica's (its launch, then its job's
output), the controller's (--controller) or the load balancer's
(--load-balancer). --sync-down downloads them all (or those named) to
~/sky_logs/service/<service>/ instead.`
	return cmd
}

// ServeDownOptions is everything `sky serve down` needs.
type ServeDownOptions struct {
	IO        *IOStreams
	Config    []string
	Services  []string
	All       bool
	Purge     bool
	Yes       bool
	ReplicaID int // -1: the whole service
	Async     bool
}

func newServeDownCmd(f *Factory, runF func(*ServeDownOptions) error) *cobra.Command {
	opts := &ServeDownOptions{IO: f.IO}
	var async boolPair
	cmd := &cobra.Command{
		Use:   "down [flags] [SERVICE_NAMES]...",
		Short: "Tear down services",
		Long: `Tear down the named services (or all with -a): the load balancer stops and
every replica cluster is terminated. --replica-id N terminates only that
replica of the one named service (the autoscaler launches another if the
service needs it). --purge also removes services in a failed status.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validateConfigArgs(opts.Config); err != nil {
				return err
			}
			opts.Services = args
			if len(args) > 0 && opts.All {
				return flagErrorf("name services or use -a/--all, not both")
			}
			if len(args) == 0 && !opts.All {
				return flagErrorf("no service given: name the service(s) to tear down, or use -a/--all")
			}
			if cmd.Flags().Changed("replica-id") {
				if len(args) != 1 {
					return flagErrorf("--replica-id needs exactly one SERVICE_NAME")
				}
				if opts.ReplicaID < 0 {
					return flagErrorf("invalid --replica-id %d: want a replica ID >= 0", opts.ReplicaID)
				}
			} else {
				opts.ReplicaID = -1
			}
			opts.Async = async.Value
			if runF != nil {
				return runF(opts)
			}
			return serveDownRun(f, opts)
		},
	}
	addConfigFlag(cmd, &opts.Config)
	cmd.Flags().BoolVarP(&opts.All, "all", "a", false, "Tear down all services")
	cmd.Flags().BoolVarP(&opts.Purge, "purge", "p", false, "Also remove services in a failed status")
	addYesFlag(cmd, &opts.Yes)
	cmd.Flags().IntVar(&opts.ReplicaID, "replica-id", 0, "Tear down only this replica of the service")
	addAsyncFlag(cmd, &async)
	return cmd
}

// checkServiceName applies the cluster name rule: replicas are clusters
// named after the service.
func checkServiceName(name string) error {
	if err := api.CheckClusterName(name); err != nil {
		return flagErrorf("invalid service name %q: it must start with a letter, end with a letter or digit, contain only letters, digits, '-', '_' and '.', and be at most %d characters", name, api.MaxClusterNameLen)
	}
	return nil
}

// generatedServiceName is SkyPilot's name for an unnamed service.
func generatedServiceName() string {
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	return "sky-service-" + hex.EncodeToString(b)
}

// prepareService loads a service YAML with the command line's flags and
// returns what serve.up and serve.update send (uploads not yet done).
func prepareService(f *Factory, io *IOStreams, in *taskInput) (api.TaskSpec, api.ServiceSpec, error) {
	dag, err := prepareTask(f, in)
	if err != nil {
		return api.TaskSpec{}, api.ServiceSpec{}, err
	}
	for _, w := range dag.Warnings {
		fmt.Fprintln(io.ErrOut, io.Yellow("Warning: ")+w)
	}
	spec, svc, err := task.ServiceSubmission(dag, in.Entry.YAMLPath, task.ValidateForLaunch)
	if err != nil {
		return api.TaskSpec{}, api.ServiceSpec{}, kindAsFlagError(err)
	}
	return spec, svc, nil
}

// writeServiceSpec is the "Service spec:" block shown before the prompt.
func writeServiceSpec(s *IOStreams, svc api.ServiceSpec) {
	p := svc.Probe
	// The probe's body and headers are left out: either may hold a
	// secret substituted from secrets:.
	method := "GET " + p.Path
	if p.PostData != "" {
		method = "POST " + p.Path
	}
	tls := "No TLS Enabled"
	if svc.TLS != nil {
		tls = fmt.Sprintf("Keyfile: %s, Certfile: %s", svc.TLS.Keyfile, svc.TLS.Certfile)
	}
	lb := svc.LoadBalancingPolicy
	if lb == "" {
		lb = api.PolicyLeastLoad
	}
	rows := [][2]string{
		{"Readiness probe method:", method},
		{"Readiness initial delay seconds:", fmt.Sprintf("%g", p.InitialDelaySeconds)},
		{"Readiness probe timeout seconds:", fmt.Sprintf("%g", p.TimeoutSeconds)},
		{"Replica autoscaling policy:", svc.PolicyString()},
		{"Service port:", fmt.Sprintf("%d", svc.Port)},
		{"TLS Certificates:", tls},
		{"Spot Policy:", spotPolicyString(svc)},
		{"Load Balancing Policy:", lb},
	}
	for _, r := range rows {
		fmt.Fprintf(s.Out, "%-34s%s\n", r[0], r[1])
	}
}

func spotPolicyString(svc api.ServiceSpec) string {
	rp := svc.ReplicaPolicy
	if rp == nil || (rp.BaseOndemandFallbackReplicas == 0 && !rp.DynamicOndemandFallback) {
		return "No spot fallback policy"
	}
	var parts []string
	if rp.BaseOndemandFallbackReplicas > 0 {
		parts = append(parts, fmt.Sprintf("Static spot mixture with %d base on-demand replica(s)", rp.BaseOndemandFallbackReplicas))
	}
	if rp.DynamicOndemandFallback {
		parts = append(parts, "Dynamic on-demand fallback")
	}
	return strings.Join(parts, "; ")
}

// estimateReplicas shows, before a prompt, where replicas would run.
func (f *Factory) estimateReplicas(heading, name string, spec api.TaskSpec) error {
	fmt.Fprintln(f.IO.Out, f.IO.Cyan(heading))
	return sendOp(f, apiop.Optimize, api.OptimizeBody{LaunchBody: api.LaunchBody{Task: spec, ClusterName: name + "-1", EnvVars: api.ClientEnv()}}, callOptions{Stream: true})
}

func serveUpRun(f *Factory, opts *ServeUpOptions) error {
	io := f.IO
	spec, svc, err := prepareService(f, io, opts.Task)
	if err != nil {
		return err
	}
	name := opts.ServiceName
	if name == "" {
		name = generatedServiceName()
	}
	if !opts.Yes {
		fmt.Fprintln(io.Out, io.Cyan("Service spec:"))
		writeServiceSpec(io, svc)
		if err := f.estimateReplicas("Each replica will use the following resources (estimated):", name, spec); err != nil {
			return err
		}
		if err := io.Confirm(fmt.Sprintf("Launching a new service '%s'. Proceed?", name), false); err != nil {
			return err
		}
	}
	if err := f.uploadTaskFiles(io, &spec, true); err != nil {
		return err
	}
	var res api.ServeUpResult
	body := api.ServeUpBody{Name: name, Task: spec, Service: svc, EnvVars: api.ClientEnv()}
	if err := callOp(f, apiop.ServeUp, body, &res, callOptions{Async: opts.Async, Stream: true}); err != nil {
		return err
	}
	if opts.Async {
		return nil
	}
	if res.Name != "" {
		name = res.Name
	}
	printServeUpDone(io, name, serviceURL(res.Endpoint, svc.TLS != nil, f.apiHost()))
	return nil
}

// printServeUpDone is the block that ends `sky serve up`
// (cli-output.md "Managed jobs / serve").
func printServeUpDone(s *IOStreams, name, endpoint string) {
	curl := "curl " + endpoint
	if endpoint == "" {
		// The load balancer has no port yet; status will show it.
		endpoint = "- (not assigned yet; see sky serve status " + name + " --endpoint)"
		curl = "curl $(sky serve status " + name + " --endpoint)"
	}
	fmt.Fprintln(s.Out, s.Cyan("Service name: ")+s.Bold(name))
	fmt.Fprintln(s.Out, s.Cyan("Endpoint URL: ")+s.Bold(endpoint))
	tree(s, s.Bold("📋 Useful Commands"), [][2]string{
		{"To check service status:\t", "sky serve status " + name + " [--endpoint]"},
		{"To teardown the service:\t", "sky serve down " + name},
		{"To see replica logs:\t", "sky serve logs " + name + " [REPLICA_ID]"},
		{"To see load balancer logs:\t", "sky serve logs --load-balancer " + name},
		{"To see controller logs:\t", "sky serve logs --controller " + name},
		{"To monitor the status:\t", "watch -n10 sky serve status " + name},
		{"To send a test request:\t", curl},
	})
	fmt.Fprintln(s.Out)
	fmt.Fprintln(s.Out, s.Green("✓ Service is spinning up and replicas will be ready shortly."))
}

func serveUpdateRun(f *Factory, opts *ServeUpdateOptions) error {
	io := f.IO
	name := opts.ServiceName
	spec, svc, err := prepareService(f, io, opts.Task)
	if err != nil {
		return err
	}
	if !opts.Yes {
		fmt.Fprintln(io.Out, io.Cyan("Service spec:"))
		writeServiceSpec(io, svc)
		if err := f.estimateReplicas("New replicas will use the following resources (estimated):", name, spec); err != nil {
			return err
		}
		if err := io.Confirm(fmt.Sprintf("Updating service '%s'. Proceed?", name), false); err != nil {
			return err
		}
	}
	if err := f.uploadTaskFiles(io, &spec, true); err != nil {
		return err
	}
	var res api.ServeUpdateResult
	body := api.ServeUpdateBody{Name: name, Task: spec, Service: svc, Mode: opts.Mode, EnvVars: api.ClientEnv()}
	if err := callOp(f, apiop.ServeUpdate, body, &res, callOptions{Async: opts.Async, Stream: true}); err != nil {
		return err
	}
	if opts.Async {
		return nil
	}
	printServeUpdated(io, name, opts.Mode, res.Version)
	return nil
}

func printServeUpdated(s *IOStreams, name, mode string, version int) {
	fmt.Fprintln(s.Out, s.Green(fmt.Sprintf("Service '%s' update scheduled: version %d (%s update).", name, version, mode)))
	fmt.Fprintln(s.Out, "Please use "+s.Bold("sky serve status "+name)+" to check the latest status, or "+
		s.Bold("watch -n10 sky serve status "+name)+" to follow it.")
}

func serveStatusRun(f *Factory, opts *ServeStatusOptions) error {
	io := opts.IO
	var recs []api.ServiceRecord
	if err := callOp(f, apiop.ServeStatus, api.ServeStatusBody{Names: opts.Services}, &recs, callOptions{}); err != nil {
		return err
	}
	missing := missingServices(opts.Services, recs)
	if opts.Endpoint {
		if len(missing) > 0 || len(recs) == 0 {
			return fmt.Errorf("service '%s' not found; `sky serve status` lists your services", opts.Services[0])
		}
		r := recs[0]
		u := serviceURL(r.Endpoint, r.TLSEncrypted, f.apiHost())
		if u == "" {
			u = "-"
		}
		fmt.Fprintln(io.Out, u)
		return nil
	}
	if opts.Output == "json" {
		if recs == nil {
			recs = []api.ServiceRecord{}
		}
		if err := printJSON(io.Out, recs); err != nil {
			return err
		}
	} else {
		writeServices(io, recs, opts.Verbose, f.Now(), f.apiHost())
	}
	if len(missing) > 0 {
		return fmt.Errorf("service(s) not found: %s; `sky serve status` lists your services", strings.Join(missing, ", "))
	}
	return nil
}

// missingServices are the names asked for that no record has.
func missingServices(names []string, recs []api.ServiceRecord) []string {
	have := map[string]bool{}
	for _, r := range recs {
		have[r.Name] = true
	}
	var out []string
	for _, n := range names {
		if !have[n] {
			out = append(out, n)
		}
	}
	return out
}

// apiHost is the host of the API server this command talks to ("" when
// unknown): a load balancer bound to every address is reached there.
func (f *Factory) apiHost() string {
	c, err := f.Client()
	if err != nil || c == nil {
		return ""
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// serviceURL is the URL a service's load balancer is reached at:
// endpoint is host:port as the server binds it, and an unspecified host
// (0.0.0.0, ::, none) is replaced by apiHost, the API server's, since
// that is the machine the balancer runs on. "" while it has no port.
func serviceURL(endpoint string, tls bool, apiHost string) string {
	if endpoint == "" {
		return ""
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	hostport := endpoint
	if u, err := url.Parse(endpoint); err == nil && u.Scheme != "" && u.Host != "" {
		scheme, hostport = u.Scheme, u.Host
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return scheme + "://" + hostport
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = apiHost
		if host == "" {
			host = "127.0.0.1"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// writeServices prints the Services table and the Service Replicas
// table of `sky serve status`.
func writeServices(s *IOStreams, recs []api.ServiceRecord, verbose bool, now time.Time, apiHost string) {
	fmt.Fprintln(s.Out, s.Bold(s.Cyan("Services")))
	if len(recs) == 0 {
		fmt.Fprintln(s.Out, "No existing services.")
		return
	}
	headers := []string{"NAME", "VERSION", "UPTIME", "STATUS", "REPLICAS", "ENDPOINT"}
	if verbose {
		headers = append(headers, "AUTOSCALING_POLICY", "LOAD_BALANCING_POLICY", "REQUESTED_RESOURCES")
	}
	st := newTable(s.Bold, headers...)
	for _, r := range recs {
		cells := serviceCells(r, now, apiHost)
		if verbose {
			cells = append(cells, orDashCell(r.Policy), orDashCell(r.LoadBalancingPolicy), orDashCell(r.RequestedResources))
		}
		st.addRow(cells...)
	}
	_ = st.render(s.Out)
	fmt.Fprintln(s.Out)
	fmt.Fprintln(s.Out, s.Bold(s.Cyan("Service Replicas")))
	headers = []string{"SERVICE_NAME", "ID", "VERSION", "ENDPOINT", "LAUNCHED", "INFRA", "RESOURCES", "STATUS"}
	if verbose {
		headers = append(headers, "CLUSTER", "REASON")
	}
	rt := newTable(s.Bold, headers...)
	n := 0
	for _, r := range recs {
		for _, rep := range r.Replicas {
			n++
			cells := []string{r.Name, fmt.Sprint(rep.ID), fmt.Sprint(rep.Version), orDashCell(rep.Endpoint), agoCell(now, rep.LaunchedAt),
				orDashCell(rep.Infra), orDashCell(rep.Resources), rep.Status}
			if verbose {
				cells = append(cells, orDashCell(rep.Name), orDashCell(rep.Reason))
			}
			rt.addRow(cells...)
		}
	}
	if n == 0 {
		fmt.Fprintln(s.Out, "No existing replicas.")
		return
	}
	_ = rt.render(s.Out)
}

// serviceCells are the Services table's columns of one service, shared
// with the Services section of `sky status`.
func serviceCells(r api.ServiceRecord, now time.Time, apiHost string) []string {
	ready := 0
	for _, rep := range r.Replicas {
		if rep.Status == api.ReplicaReady {
			ready++
		}
	}
	return []string{r.Name, fmt.Sprint(r.Version), spanCell(now, floatOr0(r.Uptime), nil), r.Status,
		fmt.Sprintf("%d/%d", ready, len(r.Replicas)), orDashCell(serviceURL(r.Endpoint, r.TLSEncrypted, apiHost))}
}

// statusServices is the Services section of `sky status`, under the
// managed jobs. It never fails the status: an error is the section's
// text.
func statusServices(f *Factory, opts *StatusOptions) {
	io := opts.IO
	var recs []api.ServiceRecord
	err := callOp(f, apiop.ServeStatus, api.ServeStatusBody{}, &recs, callOptions{Background: opts.background})
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == 404 {
		return // an API server of a build without SkyServe
	}
	fmt.Fprintln(io.Out)
	fmt.Fprintln(io.Out, io.Bold(io.Cyan("Services")))
	if err != nil {
		fmt.Fprintf(io.Out, "Failed to query services: %v\n", err)
		return
	}
	if len(recs) == 0 {
		fmt.Fprintln(io.Out, "No live services.")
		return
	}
	t := newTable(io.Bold, "NAME", "VERSION", "UPTIME", "STATUS", "REPLICAS", "ENDPOINT")
	now, host := f.Now(), f.apiHost()
	for _, r := range recs {
		t.addRow(serviceCells(r, now, host)...)
	}
	_ = t.render(io.Out)
	fmt.Fprintf(io.Out, "\n* To see detailed service status: %s\n", io.Bold("sky serve status -v"))
}

// serveDownConfirm is the question `sky serve down` asks.
func serveDownConfirm(opts *ServeDownOptions) string {
	switch {
	case opts.ReplicaID >= 0:
		return fmt.Sprintf("Terminating replica ID %d in '%s'. Proceed?", opts.ReplicaID, opts.Services[0])
	case opts.All:
		return "Terminating all services. Proceed?"
	}
	return fmt.Sprintf("Terminating service(s) '%s'. Proceed?", strings.Join(opts.Services, ", "))
}

func serveDownRun(f *Factory, opts *ServeDownOptions) error {
	if err := opts.IO.Confirm(serveDownConfirm(opts), opts.Yes); err != nil {
		return err
	}
	co := callOptions{Async: opts.Async, Stream: true}
	if opts.ReplicaID >= 0 {
		b := api.ServeTerminateReplicaBody{Name: opts.Services[0], ReplicaID: opts.ReplicaID, Purge: opts.Purge}
		return sendOp(f, apiop.ServeTerminateReplica, b, co)
	}
	var res api.ServeDownResult
	return callOp(f, apiop.ServeDown, api.ServeDownBody{Names: opts.Services, All: opts.All, Purge: opts.Purge}, &res, co)
}

// serveLogsRun streams one log of a service, or downloads its logs.
func serveLogsRun(f *Factory, opts *ServeLogsOptions) error {
	if opts.SyncDown {
		return serveSyncDown(f, opts)
	}
	b := api.ServeLogsBody{Name: opts.Name, Controller: opts.Controller, LoadBalancer: opts.LoadBalancer,
		Follow: opts.Follow, Tail: max(opts.Tail, 0)}
	if !opts.Controller && !opts.LoadBalancer {
		b.ReplicaID = opts.IDs[0]
	}
	return sendOp(f, apiop.ServeLogs, b, callOptions{Stream: true, CancelOnStop: true})
}

// serveSyncDown downloads the service's logs (controller, load balancer
// and replicas, or as narrowed) to ~/sky_logs/service/<service>/.
func serveSyncDown(f *Factory, opts *ServeLogsOptions) error {
	var res api.LogsDownload
	b := api.ServeSyncDownBody{Name: opts.Name, ReplicaIDs: opts.IDs, Controller: opts.Controller, LoadBalancer: opts.LoadBalancer}
	if err := callOp(f, apiop.ServeSyncDownLogs, b, &res, callOptions{}); err != nil {
		return err
	}
	return downloadServiceLogs(f, opts.IO, res, "service", "Service "+opts.Name)
}
