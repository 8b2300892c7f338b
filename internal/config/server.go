package config

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/skygo/skygo/internal/infrakind"
)

// ServerOnlyKeys are taken from the server's config only: a client cannot
// change who may use which cloud, where the database is, or how the
// server's own daemons and controllers run; nor the keys of an
// infrastructure's section that name what the server reaches
// (infrakind.Kind.ServerKeys).
func ServerOnlyKeys() []string {
	keys := []string{
		"api_server", "allowed_clouds", "workspaces", "rbac", "db", "daemons",
		"jobs.controller.consolidation_mode", "serve.controller.consolidation_mode",
		"jobs.controller.controller_logs_gc_retention_hours",
		"jobs.controller.task_logs_gc_retention_hours",
		// The bounds of one request's work protect the server from its users.
		"jobs.max_array_size", "jobs.max_pipeline_tasks",
	}
	for _, k := range infrakind.All() {
		for _, sk := range k.ServerKeys {
			keys = append(keys, k.Name+"."+sk)
		}
	}
	return keys
}

// OverlayClient lays a request's client config over the server config.
// Server-only keys keep the server's value; a client value that differs is
// dropped with a warning (returned, for the request log).
func OverlayClient(server, client *Config) (*Config, []string) {
	cm := client.Map()
	var warnings []string
	for _, path := range ServerOnlyKeys() {
		keys := strings.Split(path, ".")
		cv, inClient := client.Lookup(keys...)
		if !inClient {
			continue
		}
		sv, inServer := server.Lookup(keys...)
		if !inServer || !reflect.DeepEqual(sv, cv) {
			warnings = append(warnings, fmt.Sprintf("config key %s is set by the API server only; the client value is ignored", path))
		}
		deletePath(cm, keys)
	}
	return &Config{m: Overlay(server.Map(), cm), sources: append(server.Sources(), client.Sources()...)}, warnings
}

func deletePath(m map[string]any, keys []string) {
	for i, k := range keys {
		if i == len(keys)-1 {
			delete(m, k)
			return
		}
		next, ok := m[k].(map[string]any)
		if !ok {
			return
		}
		m = next
	}
}
