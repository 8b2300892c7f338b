// Package kind is how Kubernetes describes itself to the registry
// (internal/infrakind): its names, what the optimizer may ask of it, its
// config section and how `sky check` finds its contexts. It is the part of
// the plug-in the command line links, so it stays light: the standard
// library, the registry and a YAML reader for kubeconfig files.
package kind

import (
	_ "embed"

	"github.com/skygo/skygo/internal/infrakind"
)

// Name is the kind's name, as in allowed_clouds.
const Name = "kubernetes"

// regionSection holds per-context settings (kubernetes.context_configs).
const regionSection = "context_configs"

//go:embed config.schema.json
var schema []byte

//go:embed workspace.schema.json
var workspaceSchema []byte

func init() {
	// Images run as containers; spot if the cluster has spot nodes.
	infrakind.Register(infrakind.Kind{
		Name: Name, Display: "Kubernetes", Aliases: []string{"k8s"}, Group: infrakind.OnPrem, Sized: true, TPUs: true,
		Place: infrakind.Context, RegionNoun: "context",
		Features:        &infrakind.Features{Spot: true, Ports: true, VMImage: true, Docker: true},
		TaskKeys:        []string{"custom_metadata", "pod_config", "provision_timeout", "dws", "kueue", "quota", "remote_identity", "enable_docker", "set_pod_resource_limits"},
		RegionSection:   regionSection,
		PodKeys:         []string{"pod_config", "custom_metadata"},
		Verbs:           []string{"k8s-exec"},
		Schema:          schema,
		WorkspaceSchema: workspaceSchema,
		Volumes: []infrakind.VolumeType{
			{Type: "k8s-pvc", Where: "on Kubernetes; infra must be k8s or k8s/<context>", Ephemeral: true,
				Table: "Kubernetes PVCs:", Columns: []infrakind.VolumeColumn{
					{Header: "IS_EPHEMERAL", Field: "is_ephemeral"},
					{Header: "NAME_ON_CLOUD", Field: "name_on_cloud", Verbose: true},
					{Header: "STORAGE_CLASS", Field: "config.storage_class_name", Verbose: true},
					{Header: "ACCESS_MODE", Field: "config.access_mode", Verbose: true}}},
			{Type: "k8s-hostpath", Where: "on Kubernetes; infra must be k8s or k8s/<context>", HostPath: true,
				Table: "Kubernetes HostPath volumes:", Columns: []infrakind.VolumeColumn{{Header: "HOST_PATH", Field: "host_path"}}},
		},
		Check: check,
	})
}
