package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/infrakind"
	"github.com/skygo/skygo/internal/task"
)

func volumesApplyRunRemote(f *Factory, opts *VolumesApplyOptions) error {
	var data []byte
	name := "volume flags"
	if opts.YAMLPath != "" {
		var err error
		if data, err = os.ReadFile(opts.YAMLPath); err != nil {
			return fmt.Errorf("reading volume spec: %w", err)
		}
		name = opts.YAMLPath
	}
	spec, doc, err := task.LoadVolumeSpecWith(name, data, task.VolumeOverrides{Name: opts.Name, Type: opts.Type,
		Infra: opts.Infra, Size: opts.Size, UseExisting: opts.UseExisting})
	// The spec as loaded here (flags applied) is checked against the
	// schema by the server when this binary does not link the check, as
	// task YAML is (checkTaskYAML): the schema's message, located in the
	// file, comes before any of the local loader's.
	if !task.SchemaChecked() && doc != nil {
		var res api.ValidateResult
		verr := callOp(f, apiop.Validate, api.ValidateBody{Name: name, VolumeYAML: string(doc)}, &res, callOptions{})
		if verr != nil && (errorType(verr) == "" || errorType(verr) == "InvalidSkyPilotConfigError") {
			return verr
		}
	}
	if err != nil {
		return err
	}
	body := api.VolumeApplyBody{Name: spec.Name, Type: spec.Type, Infra: spec.Infra, Size: spec.Size,
		UseExisting: spec.UseExisting, Labels: spec.Labels, Config: spec.ConfigRaw, YAML: string(doc)}
	where := ""
	if spec.Infra != "" {
		where = " on " + spec.Infra
	}
	if err := f.IO.Confirm(fmt.Sprintf("Creating volume %s (%s%s). Proceed?", spec.Name, spec.Type, where), opts.Yes); err != nil {
		return err
	}
	return sendOp(f, apiop.VolumesApply, body, callOptions{Async: opts.Async, Stream: true})
}

func volumesLsRunRemote(f *Factory, opts *VolumesLsOptions) error {
	var recs []api.VolumeRecord
	if err := callOp(f, apiop.VolumesLs, api.VolumeLsBody{Names: opts.Names, Refresh: opts.Refresh}, &recs, callOptions{}); err != nil {
		return err
	}
	if opts.Output == "json" {
		if recs == nil {
			recs = []api.VolumeRecord{}
		}
		return printJSON(opts.IO.Out, recs)
	}
	if len(recs) == 0 {
		fmt.Fprintln(opts.IO.Out, "No existing volumes.")
		return nil
	}
	return renderVolumes(opts.IO, recs, opts.Verbose, time.Now())
}

func renderVolumes(io *IOStreams, recs []api.VolumeRecord, verbose bool, now time.Time) error {
	byType := map[string][]api.VolumeRecord{}
	for _, r := range recs {
		byType[r.Type] = append(byType[r.Type], r)
	}
	first := true
	for _, t := range infrakind.VolumeTables() {
		rows := byType[t.Type]
		if len(rows) == 0 {
			continue
		}
		if !first {
			fmt.Fprintln(io.Out)
		}
		first = false
		fmt.Fprintln(io.Out, t.Table)
		if err := volumeTable(io, t, rows, verbose, now); err != nil {
			return err
		}
	}
	return nil
}

// volumeTable is one type's table: the columns every table has, then the
// type's own (infrakind.VolumeType.Columns).
func volumeTable(io *IOStreams, typ infrakind.VolumeType, rows []api.VolumeRecord, verbose bool, now time.Time) error {
	anyErr := false
	for _, r := range rows {
		anyErr = anyErr || r.ErrorMessage != ""
	}
	headers := []string{"NAME", "TYPE", "INFRA", "SIZE", "USER", "WORKSPACE", "AGE", "STATUS", "LAST_USE", "USED_BY"}
	var cols []infrakind.VolumeColumn
	for _, c := range typ.Columns {
		if verbose || !c.Verbose {
			cols = append(cols, c)
			headers = append(headers, c.Header)
		}
	}
	withMsg := verbose || anyErr
	if withMsg {
		headers = append(headers, "MESSAGE")
	}
	tb := newTable(io.Bold, headers...)
	for _, r := range rows {
		size := "-"
		if r.Size != "" {
			size = r.Size + "Gi"
		}
		lastUse := "-"
		if r.LastAttachedAt > 0 {
			lastUse = time.Unix(0, int64(r.LastAttachedAt*1e9)).Local().Format("2006-01-02 15:04:05")
		}
		usedBy := "-"
		if len(r.UsedByClusters) > 0 {
			usedBy = strings.Join(r.UsedByClusters, ", ")
		} else if len(r.UsedByPods) > 0 {
			usedBy = strings.Join(r.UsedByPods, ", ")
		}
		if !verbose {
			usedBy = truncateCell(usedBy, 30)
		}
		cells := []string{r.Name, r.Type, cmp.Or(r.Infra, "-"), size, cmp.Or(r.UserName, "-"), cmp.Or(r.Workspace, "default"),
			ago(now, r.LaunchedAt), r.Status, lastUse, usedBy}
		fields, err := volumeFields(r)
		if err != nil {
			return err
		}
		for _, c := range cols {
			cells = append(cells, volumeCell(fields, c.Field))
		}
		if withMsg {
			msg := cmp.Or(r.ErrorMessage, "-")
			if !verbose {
				msg = truncateCell(msg, 50)
			}
			cells = append(cells, msg)
		}
		tb.addRow(cells...)
	}
	return tb.render(io.Out)
}

// volumeFields are a record's fields by their JSON names, which a volume
// type's columns name.
func volumeFields(r api.VolumeRecord) (map[string]any, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(data, &m)
}

// volumeCell shows the field (or "config.<key>") of a record's fields:
// "-" when it is absent or empty.
func volumeCell(fields map[string]any, field string) string {
	v, ok := fields[field]
	if key, inConfig := strings.CutPrefix(field, "config."); inConfig {
		cfg, _ := fields["config"].(map[string]any)
		v, ok = cfg[key]
	}
	if !ok || v == nil || v == "" {
		return "-"
	}
	return fmt.Sprint(v)
}

func truncateCell(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-3]) + "..."
}

func volumesDeleteRunRemote(f *Factory, opts *deleteOptions) error {
	names := opts.Names
	if opts.All {
		var recs []api.VolumeRecord
		if err := callOp(f, apiop.VolumesLs, api.VolumeLsBody{}, &recs, callOptions{}); err != nil {
			return err
		}
		if len(recs) == 0 {
			fmt.Fprintln(opts.IO.Out, "No volumes to delete.")
			return nil
		}
		names = nil
		for _, r := range recs {
			names = append(names, r.Name)
		}
	}
	if err := f.IO.Confirm(fmt.Sprintf("Deleting %d volume(s): %s. Proceed?", len(names), strings.Join(names, ", ")), opts.Yes); err != nil {
		return err
	}
	return sendOp(f, apiop.VolumesDelete, api.VolumeDeleteBody{Names: names, Purge: opts.Purge}, callOptions{Async: opts.Async, Stream: true})
}
