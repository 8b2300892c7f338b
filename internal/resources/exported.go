package resources

// Parsers for single fields that other parts of the configuration reuse
// (jobs/serve controller settings in config.yaml, allowed_clouds, volume
// infra). Error paths are relative to the field itself ("" for the field,
// "wait_for" for a key inside it).

// ParseAutostop reads any autostop form: false, true, minutes, "10m"/"1h",
// or a mapping {idle_minutes, down, wait_for, hook, hook_timeout}.
func ParseAutostop(v any) (*Autostop, error) { return parseAutostop(v, "") }

// ParseJobRecovery reads a strategy name or a job_recovery mapping.
func ParseJobRecovery(v any) (*JobRecovery, error) { return parseJobRecovery(v, "") }

// ParsePorts reads ports (int, "a-b", "a,b", or a list) into sorted,
// merged strings.
func ParsePorts(v any) ([]string, error) { return parsePorts(v, "") }

// ParseAccelerators reads every form of the accelerators field.
func ParseAccelerators(v any) (Accelerators, error) { return parseAccelerators(v, "") }

// NormalizeCloud checks a cloud name (case-insensitive, an alias for its
// kind) and returns its canonical spelling; "*" gives "".
func NormalizeCloud(name string) (string, error) { return normalizeCloud(name) }
