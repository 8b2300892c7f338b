"""sky.Task: one unit of work (setup, run, resources, files) as in task YAML.

A Task is the task YAML document in Python: to_yaml_config() gives exactly
the mapping of spec task-yaml.md, with paths as the user wrote them, and the
API server validates and resolves it with the CLI's code. The checks here
are the ones the YAML loader does before validation (env values, null envs,
num_nodes, the shapes of fields) and the client-side checks of local paths
(validate()).

`${VAR}` in file_mounts, workdir, volumes and service is replaced at load
time (from_yaml / from_yaml_config) from envs and inline secrets, as
SkyPilot's loader does; a Task built in Python keeps what it was given.
"""
import os
import re
from typing import (Any, Dict, Iterable, List, Optional, Set, Tuple, Union)

from sky import dag as dag_lib
from sky import resources as resources_lib

_ENV_KEY_RE = re.compile(r'^[a-zA-Z_][a-zA-Z0-9_]*$')
_NAME_RE = re.compile(r'^[a-zA-Z0-9]+(?:[._-]{1,2}[a-zA-Z0-9]+)*$')
_VAR_RE = re.compile(r'\$\{([a-zA-Z_][a-zA-Z0-9_]*)\}|\$([a-zA-Z_][a-zA-Z0-9_]*)')
_SECRET_REF_RE = re.compile(
    r'^secrets:(?:(?:personal|workspace|global)\.)?[^\s.][^\s]*$')
_URI_RE = re.compile(r'^[a-zA-Z][a-zA-Z0-9+.-]*://[^/]')

# Top-level task YAML keys in the order to_yaml_config writes them.
_KNOWN_KEYS = (
    'name',
    'workdir',
    'num_nodes',
    'resources',
    'envs',
    'secrets',
    'managed_secrets',
    'file_mounts',
    'volumes',
    'setup',
    'run',
    'service',
    'pool',
    'config',
    'event_callback',
    'inputs',
    'outputs',
    'api_server_access',
    'file_mounts_mapping',
    'volume_mounts',
    '_metadata',
)

EnvsArg = Union[None, Dict[str, Any], Iterable[Tuple[str, Any]]]


def _pairs(d: EnvsArg, what: str) -> List[Tuple[str, Any]]:
    if d is None:
        return []
    if isinstance(d, dict):
        return list(d.items())
    try:
        pairs = [tuple(p) for p in d]  # type: ignore[union-attr]
    except TypeError:
        raise ValueError(f'{what} must be a dict or a list of (key, value) '
                         f'pairs, got {d!r}') from None
    for p in pairs:
        if len(p) != 2:
            raise ValueError(f'{what}: {p!r} is not a (key, value) pair')
    return pairs  # type: ignore[return-value]


def _env_value(key: str, value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return str(value)  # YAML `FOO: 123` means "123", as in SkyPilot
    if value is None:
        raise ValueError(
            f'{what} {key!r} is None. Please set a value for it in task '
            f'YAML or with --{"env" if what == "Environment variable" else "secret"} '
            f'flag. To set it to be empty, use an empty string ("").')
    raise ValueError(f'{what} {key!r}: value must be a string, got {value!r}')


def _check_env_key(key: Any, what: str) -> str:
    if not isinstance(key, str) or not _ENV_KEY_RE.match(key):
        raise ValueError(f'The `{what}` field contains invalid keys: {key!r} '
                         f'(must match [a-zA-Z_][a-zA-Z0-9_]*)')
    return key


def _substitute(obj: Any, values: Dict[str, str]) -> Any:
    """$NAME / ${NAME} replaced in every string (keys too) for the names in
    values; unknown names stay verbatim."""

    def sub(s: str) -> str:

        def repl(m: 're.Match') -> str:
            name = m.group(1) or m.group(2)
            return values[name] if name in values else m.group(0)

        return _VAR_RE.sub(repl, s)

    if isinstance(obj, str):
        return sub(obj)
    if isinstance(obj, dict):
        return {(sub(k) if isinstance(k, str) else k): _substitute(v, values)
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [_substitute(v, values) for v in obj]
    return obj


def _clone(v: Any) -> Any:
    """A copy of a YAML value (dicts and lists copied, scalars shared)."""
    if isinstance(v, dict):
        return {k: _clone(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_clone(x) for x in v]
    return v


def is_cloud_uri(s: str) -> bool:
    """True for 's3://b/x', 'gs://b', 'https://acct.blob.core.windows.net/c'
    ...: a file-mount source that is not a local path."""
    return bool(_URI_RE.match(s))


def is_local_source(src: Any) -> bool:
    """A file-mount / storage source string that names a local path (to be
    uploaded): neither a cloud URI nor a `skypilot:` placeholder."""
    return (isinstance(src, str) and not is_cloud_uri(src) and
            not src.startswith('skypilot:'))



def _not_supported(msg: str) -> Exception:
    try:
        from sky import exceptions  # pylint: disable=import-outside-toplevel
        return exceptions.NotSupportedError(msg)
    except (ImportError, AttributeError):
        return ValueError(msg)


class Task:
    """A task: setup and run commands, the resources they need, the files
    they see. Created inside `with sky.Dag():` it joins that Dag."""

    def __init__(
        self,
        name: Optional[str] = None,
        *,
        setup: Union[None, str, List[str]] = None,
        run: Optional[str] = None,
        envs: EnvsArg = None,
        secrets: Union[EnvsArg, List[str]] = None,
        workdir: Union[None, str, Dict[str, Any]] = None,
        num_nodes: Optional[int] = None,
        file_mounts: Optional[Dict[str, Any]] = None,
        storage_mounts: Optional[Dict[str, Dict[str, Any]]] = None,
        volumes: Optional[Dict[str, Any]] = None,
        resources: Union[None, resources_lib.Resources,
                         Set[resources_lib.Resources],
                         List[resources_lib.Resources], Dict[str,
                                                             Any]] = None,
        event_callback: Optional[str] = None,
        managed_secrets: Optional[List[Any]] = None,
        service: Optional[Dict[str, Any]] = None,
        pool: Optional[Dict[str, Any]] = None,
        config: Optional[Dict[str, Any]] = None,
        api_server_access: Optional[bool] = None,
        inputs: Optional[Dict[str, Any]] = None,
        outputs: Optional[Dict[str, Any]] = None,
        file_mounts_mapping: Optional[Dict[str, str]] = None,
        volume_mounts: Optional[List[Dict[str, Any]]] = None,
        _metadata: Optional[Dict[str, Any]] = None,
    ) -> None:
        self.name = name
        self.setup = setup
        self.run = run
        self.workdir = workdir
        self.event_callback = event_callback
        self._envs: Dict[str, str] = {}
        # Dict form {NAME: value or None (for secrets:refs)} or list form
        # ['secrets:NAME', ...], as in the YAML.
        self._secrets: Union[None, Dict[str, Optional[str]], List[str]] = None
        # One mapping dst -> source in YAML order: a string (local path or
        # cloud URI) is a file mount, a mapping a storage (bucket) mount.
        self._mounts: Dict[str, Any] = {}
        self._num_nodes: Optional[int] = None
        self._resources: List[resources_lib.Resources] = []
        self._resources_kind = 'single'
        self._service: Optional[Dict[str, Any]] = None
        self._pool: Optional[Dict[str, Any]] = None
        self.volumes = volumes
        self.managed_secrets = managed_secrets
        self.config = config
        self.api_server_access = api_server_access
        self.inputs = inputs
        self.outputs = outputs
        self.file_mounts_mapping = file_mounts_mapping
        self.volume_mounts = volume_mounts
        self._metadata = _metadata
        # Top-level keys this class does not know, passed on to the server
        # (which rejects them with its "did you mean" message).
        self._extra: Dict[str, Any] = {}

        self.update_envs(envs)
        if secrets is not None:
            if isinstance(secrets, list) and all(
                    isinstance(s, str) for s in secrets):
                self._set_secret_list(secrets)
            else:
                self.update_secrets(secrets)  # type: ignore[arg-type]
        self.num_nodes = num_nodes  # type: ignore[assignment]
        if file_mounts is not None:
            self.update_file_mounts(file_mounts)
        if storage_mounts is not None:
            self.update_storage_mounts(storage_mounts)
        if resources is not None:
            self.set_resources(resources)
        if service is not None:
            self.set_service(service)
        if pool is not None:
            self.set_pool(pool)

        dag = dag_lib.get_current_dag()
        if dag is not None:
            dag.add(self)

    # ---- simple fields ----

    @property
    def setup(self) -> Optional[str]:
        return self._setup

    @setup.setter
    def setup(self, value: Union[None, str, List[str]]) -> None:
        if isinstance(value, list) and all(isinstance(s, str) for s in value):
            value = '\n'.join(value)
        if value is not None and not isinstance(value, str):
            raise ValueError(f'setup must be a string (or a list of strings),'
                             f' got {type(value).__name__}')
        self._setup = value

    @property
    def run(self) -> Optional[str]:
        return self._run

    @run.setter
    def run(self, value: Optional[str]) -> None:
        if callable(value):
            raise _not_supported(
                'run must be a string: a command generator (a callable of '
                'node rank and IPs) cannot be sent to the API server; use '
                '$SKYPILOT_NODE_RANK / $SKYPILOT_NODE_IPS in the script')
        if value is not None and not isinstance(value, str):
            raise ValueError(f'run must be a string, got '
                             f'{type(value).__name__}')
        self._run = value

    @property
    def workdir(self) -> Union[None, str, Dict[str, Any]]:
        return self._workdir

    @workdir.setter
    def workdir(self, value: Union[None, str, Dict[str, Any]]) -> None:
        if isinstance(value, dict):
            if 'url' not in value or not isinstance(value['url'], str):
                raise ValueError('workdir (git form) needs `url`: '
                                 '{url: <git url>, ref: <branch/tag/commit>}')
            extra = set(value) - {'url', 'ref'}
            if extra:
                raise ValueError(f'workdir (git form) allows only url and '
                                 f'ref, got {sorted(extra)}')
        elif value is not None and not isinstance(value, str):
            raise ValueError(f'workdir must be a local directory path or '
                             f'{{url, ref}}, got {value!r}')
        self._workdir = value

    @property
    def num_nodes(self) -> int:
        return 1 if self._num_nodes is None else self._num_nodes

    @num_nodes.setter
    def num_nodes(self, num_nodes: Optional[int]) -> None:
        if num_nodes is None:
            self._num_nodes = None
            return
        if (isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or
                num_nodes <= 0):
            raise ValueError(
                f'num_nodes should be a positive int. Got: {num_nodes!r}')
        self._num_nodes = num_nodes

    # ---- envs and secrets ----

    @property
    def envs(self) -> Dict[str, str]:
        return self._envs

    def update_envs(self, envs: EnvsArg) -> 'Task':
        """Adds or replaces envs (a dict or (key, value) pairs)."""
        for k, v in _pairs(envs, 'envs'):
            _check_env_key(k, 'envs')
            self._envs[k] = _env_value(k, v, 'Environment variable')
        return self

    @property
    def secrets(self) -> Dict[str, Optional[str]]:
        """Inline secrets {NAME: value}; managed-secret references
        ('secrets:NAME') map to None."""
        if self._secrets is None:
            return {}
        if isinstance(self._secrets, list):
            return {ref: None for ref in self._secrets}
        return self._secrets

    @property
    def envs_and_secrets(self) -> Dict[str, str]:
        """What the task's processes see: envs, then inline secrets."""
        out = dict(self._envs)
        for k, v in self.secrets.items():
            if v is not None:
                out[k] = v
        return out

    def _set_secret_list(self, refs: List[str]) -> None:
        for r in refs:
            if not _SECRET_REF_RE.match(r):
                raise ValueError(
                    f'Invalid secret in array form: {r!r}; every item must '
                    f'be "secrets:NAME"')
        self._secrets = list(refs)

    def update_secrets(self, secrets: EnvsArg) -> 'Task':
        """Adds or replaces inline secrets (a dict or (key, value) pairs);
        a key 'secrets:NAME' with value None references a managed secret."""
        pairs = _pairs(secrets, 'secrets')
        current = dict(self.secrets)
        for k, v in pairs:
            if isinstance(k, str) and k.startswith('secrets:'):
                if v is not None:
                    raise ValueError(f'secret reference {k!r} must have a '
                                     f'null value')
                if not _SECRET_REF_RE.match(k):
                    raise ValueError(f'Invalid secret reference {k!r}')
                current[k] = None
                continue
            _check_env_key(k, 'secrets')
            current[k] = _env_value(k, v, 'Secret variable')
        if pairs or self._secrets is not None:
            self._secrets = current
        return self

    # ---- file mounts, storage mounts, volumes ----

    @property
    def file_mounts(self) -> Optional[Dict[str, str]]:
        """dst -> local path or cloud URI (bucket mappings are in
        storage_mounts)."""
        fm = {k: v for k, v in self._mounts.items() if isinstance(v, str)}
        return fm or None

    @property
    def storage_mounts(self) -> Dict[str, Dict[str, Any]]:
        """dst -> storage (bucket) mapping: name, source, store, mode, ..."""
        return {k: v for k, v in self._mounts.items() if isinstance(v, dict)}

    @staticmethod
    def _check_mount(dst: Any, src: Any) -> None:
        if not isinstance(dst, str) or not dst:
            raise ValueError(f'file_mounts: destination {dst!r} must be a '
                             f'non-empty path string')
        if is_cloud_uri(dst):
            raise ValueError(f'File mount destination paths cannot be cloud '
                             f'storage: {dst!r}')
        if dst.endswith('/') and dst != '/':
            raise ValueError(f'Mount paths cannot end with a slash: {dst!r}')
        if isinstance(src, str):
            if src.endswith('/') and src != '/' and not is_cloud_uri(src):
                raise ValueError(f'Mount paths cannot end with a slash: '
                                 f'{src!r}')
        elif not isinstance(src, dict):
            raise ValueError(
                f'file_mounts: source for {dst!r} must be a path, a cloud URI '
                f'or a storage mapping (name, source, store, mode, ...), got '
                f'{type(src).__name__}')

    def set_file_mounts(self, file_mounts: Optional[Dict[str, Any]]) -> 'Task':
        """Replaces the file mounts (storage mounts stay). Values: local path
        or cloud URI; a mapping value is a storage mount."""
        self._mounts = {
            k: v for k, v in self._mounts.items() if isinstance(v, dict)
        }
        if file_mounts:
            self.update_file_mounts(file_mounts)
        return self

    def update_file_mounts(self, file_mounts: Dict[str, Any]) -> 'Task':
        if not isinstance(file_mounts, dict):
            raise ValueError(f'file_mounts must be a mapping dst -> source, '
                             f'got {file_mounts!r}')
        for dst, src in file_mounts.items():
            self._check_mount(dst, src)
            self._mounts[dst] = _clone(src)
        return self

    def set_storage_mounts(
            self, storage_mounts: Optional[Dict[str, Dict[str, Any]]]) -> 'Task':
        """Replaces the storage (bucket) mounts: dst -> the mapping of the
        task YAML file_mounts bucket form (name, source, store, mode,
        persistent, ...)."""
        self._mounts = {
            k: v for k, v in self._mounts.items() if isinstance(v, str)
        }
        if storage_mounts:
            self.update_storage_mounts(storage_mounts)
        return self

    def update_storage_mounts(
            self, storage_mounts: Dict[str, Dict[str, Any]]) -> 'Task':
        if not isinstance(storage_mounts, dict):
            raise ValueError('storage_mounts must be a mapping dst -> storage '
                             'mapping')
        for dst, st in storage_mounts.items():
            if not isinstance(st, dict):
                raise _not_supported(
                    f'storage mount {dst!r}: give the bucket as a mapping '
                    f'(name, source, store, mode, persistent, ...), as in '
                    f'task YAML file_mounts; sky.Storage objects are not '
                    f'available in this client')
            self._check_mount(dst, st)
            self._mounts[dst] = _clone(st)
        return self

    # ---- resources ----

    @property
    def resources(
        self
    ) -> Union[Set[resources_lib.Resources], List[resources_lib.Resources]]:
        """A set (one Resources, or any_of candidates) or a list (ordered
        candidates), as in SkyPilot."""
        if not self._resources:
            return {resources_lib.Resources()}
        if self._resources_kind == 'ordered':
            return list(self._resources)
        return set(self._resources)

    def set_resources(
        self, resources: Union[resources_lib.Resources,
                               Set[resources_lib.Resources],
                               List[resources_lib.Resources], Dict[str, Any]]
    ) -> 'Task':
        """A Resources; a set of them (any_of: the cheapest feasible); a
        list (ordered: tried in order); or a task-YAML resources mapping."""
        if isinstance(resources, resources_lib.Resources):
            self._resources, self._resources_kind = [resources], 'single'
            return self
        if isinstance(resources, dict):
            _, cands, kind = resources_lib._from_yaml_config_ordered(  # pylint: disable=protected-access
                resources_lib.Resources, resources)
            self._resources, self._resources_kind = cands, kind
            return self
        if isinstance(resources, (set, frozenset, list, tuple)):
            items = list(resources)
            if not items:
                raise ValueError('set_resources: empty set/list of Resources')
            for r in items:
                if not isinstance(r, resources_lib.Resources):
                    raise ValueError(f'set_resources: {r!r} is not a '
                                     f'sky.Resources')
            ordered = isinstance(resources, (list, tuple))
            if ordered:
                self._resources = items
            else:
                # A set has no order, and its iteration order changes with
                # the process's hash seed: sort so the YAML is the same on
                # every run.
                self._resources = sorted(
                    resources_lib._dedupe(items),  # pylint: disable=protected-access
                    key=lambda r: repr(r.to_yaml_config()))
            if len(self._resources) == 1:
                self._resources_kind = 'single'
            else:
                self._resources_kind = 'ordered' if ordered else 'any_of'
            return self
        raise ValueError(f'set_resources expects a sky.Resources, a set or '
                         f'list of them, or a mapping; got '
                         f'{type(resources).__name__}')

    def set_resources_override(self, override: Dict[str, Any]) -> 'Task':
        """Applies Resources.copy(**override) to every candidate."""
        cands = self._resources or [resources_lib.Resources()]
        self._resources = [r.copy(**override) for r in cands]
        if self._resources_kind == 'any_of':
            self._resources = resources_lib._dedupe(self._resources)  # pylint: disable=protected-access
        return self

    # ---- service / pool ----

    @property
    def service(self) -> Optional[Dict[str, Any]]:
        """The `service:` section (SkyServe spec) as a mapping."""
        return self._service

    def set_service(self, service: Optional[Dict[str, Any]]) -> 'Task':
        if service is not None:
            if not isinstance(service, dict):
                raise ValueError('service must be a mapping (the task YAML '
                                 '`service:` section)')
            if self._pool is not None:
                raise ValueError(
                    'Cannot set both service and pool in the same task.')
        self._service = _clone(service)
        return self

    @property
    def pool(self) -> Optional[Dict[str, Any]]:
        """The `pool:` section (cluster pool spec) as a mapping."""
        return self._pool

    def set_pool(self, pool: Optional[Dict[str, Any]]) -> 'Task':
        if pool is not None:
            if not isinstance(pool, dict):
                raise ValueError('pool must be a mapping (the task YAML '
                                 '`pool:` section)')
            if self._service is not None:
                raise ValueError(
                    'Cannot set both service and pool in the same task.')
        self._pool = _clone(pool)
        return self

    # ---- optimizer hints ----

    def set_inputs(self, inputs: str,
                   estimated_size_gigabytes: float) -> 'Task':
        """The task's input data (a cloud URI) and its size, used by the
        optimizer for egress estimates (YAML `inputs: {uri: GB}`)."""
        self.inputs = {inputs: estimated_size_gigabytes}
        return self

    def set_outputs(self, outputs: str,
                    estimated_size_gigabytes: float) -> 'Task':
        """Like set_inputs, for the data the task writes."""
        self.outputs = {outputs: estimated_size_gigabytes}
        return self

    def set_time_estimator(self, func: Any) -> 'Task':
        raise _not_supported(
            'set_time_estimator: a Python function cannot be sent to the API '
            'server; the optimizer assumes 1 hour per task')

    # ---- YAML ----

    @staticmethod
    def from_yaml_config(
        config: Optional[Dict[str, Any]],
        env_overrides: EnvsArg = None,
        secrets_overrides: EnvsArg = None,
    ) -> 'Task':
        """A Task from one task YAML document (a dict), with --env/--secret
        style overrides applied before `${VAR}` substitution."""
        if config is None:
            config = {}
        if not isinstance(config, dict):
            raise ValueError(f'YAML loaded as {type(config).__name__}, not '
                             f'as dict: a task YAML is a mapping')
        config = _clone(
            {k: v for k, v in config.items() if v is not None})

        envs = config.pop('envs', None) or {}
        if not isinstance(envs, dict):
            raise ValueError('envs must be a mapping NAME -> value')
        envs = {
            str(k): (None if v is None else _env_value(str(k), v, 'envs'))
            for k, v in envs.items()
        }
        for k, v in _pairs(env_overrides, 'env_overrides'):
            envs[str(k)] = v
        for k in envs:
            _check_env_key(k, 'envs')
        for k, v in envs.items():
            envs[k] = _env_value(k, v, 'Environment variable')

        secrets = config.pop('secrets', None)
        if isinstance(secrets, list):
            secrets = [str(s) for s in secrets]
        elif isinstance(secrets, dict):
            secrets = {
                str(k): (None if v is None else _env_value(str(k), v,
                                                           'secrets'))
                for k, v in secrets.items()
            }
        elif secrets is not None:
            raise ValueError('secrets must be a mapping or a list of '
                             '"secrets:NAME" references')
        sov = _pairs(secrets_overrides, 'secrets_overrides')
        if sov:
            if isinstance(secrets, list):
                secrets = {ref: None for ref in secrets}
            secrets = dict(secrets or {})
            for k, v in sov:
                secrets[str(k)] = v
        if isinstance(secrets, dict):
            for k, v in secrets.items():
                if v is None and not k.startswith('secrets:'):
                    _env_value(k, v, 'Secret variable')

        values = dict(envs)
        if isinstance(secrets, dict):
            values.update(
                {k: v for k, v in secrets.items() if v is not None})
        for k in ('file_mounts', 'service', 'workdir', 'volumes'):
            if k in config:
                config[k] = _substitute(config[k], values)

        file_mounts = config.pop('file_mounts', None)
        if file_mounts is not None and not isinstance(file_mounts, dict):
            raise ValueError('file_mounts must be a mapping dst -> source')
        resources = config.pop('resources', None)
        num_nodes = config.pop('num_nodes', None)
        name = config.pop('name', None)
        if name is not None and not isinstance(name, str):
            name = str(name)
        known = {
            k: config.pop(k)
            for k in list(config)
            if k in _KNOWN_KEYS or k == '_metadata'
        }
        task = Task(
            name,
            envs=envs,
            secrets=secrets,
            num_nodes=num_nodes,
            file_mounts=file_mounts,
            resources=resources,
            **known,
        )
        task._extra = config  # pylint: disable=protected-access
        return task

    @staticmethod
    def from_yaml_str(
        yaml_str: str,
        env_overrides: EnvsArg = None,
        secrets_overrides: EnvsArg = None,
        _source: str = '<string>',
    ) -> 'Task':
        """A Task from the text of a one-document task YAML."""
        from sky import _yaml  # pylint: disable=import-outside-toplevel
        docs = [d for d in _yaml.load_all(yaml_str) if d is not None]
        if not docs:
            raise ValueError(
                f'{_source} is empty or contains no task definition. Add at '
                f'least a `run:` (or `setup:`) field.')
        if len(docs) > 1:
            raise ValueError(
                f'{_source} has {len(docs)} YAML documents (a pipeline or a '
                f'job group): load it with '
                f'sky.utils.dag_utils.load_chain_dag_from_yaml() and launch '
                f'it with sky.jobs.launch()')
        return Task.from_yaml_config(docs[0], env_overrides,
                                     secrets_overrides)

    @staticmethod
    def from_yaml(
        yaml_path: str,
        env_overrides: EnvsArg = None,
        secrets_overrides: EnvsArg = None,
    ) -> 'Task':
        """A Task from a task YAML file."""
        path = os.path.expanduser(yaml_path)
        with open(path, 'rb') as f:
            data = f.read()
        try:
            text = data.decode('utf-8')
        except UnicodeDecodeError:
            raise ValueError(
                f'{yaml_path} is not a valid UTF-8 text file') from None
        return Task.from_yaml_str(text, env_overrides, secrets_overrides,
                                  _source=yaml_path)

    def to_yaml_config(self, redact_secrets: bool = False) -> Dict[str, Any]:
        """The task YAML mapping (spec task-yaml.md), paths as given.
        redact_secrets replaces inline secret values with '<redacted>'."""
        out: Dict[str, Any] = {}

        def put(key: str, value: Any) -> None:
            if value is not None:
                out[key] = _clone(value)

        put('name', self.name)
        put('workdir', self._workdir)
        put('num_nodes', self._num_nodes)
        if self._resources:
            res = resources_lib.resources_yaml_config(self._resources,
                                                      self._resources_kind)
            if res:
                out['resources'] = res
        if self._envs:
            out['envs'] = dict(self._envs)
        if self._secrets is not None:
            if isinstance(self._secrets, list):
                out['secrets'] = list(self._secrets)
            else:
                out['secrets'] = {
                    k: ('<redacted>' if redact_secrets and v is not None else
                        v) for k, v in self._secrets.items()
                }
        put('managed_secrets', self.managed_secrets)
        if self._mounts:
            out['file_mounts'] = _clone(self._mounts)
        put('volumes', self.volumes)
        put('setup', self._setup)
        put('run', self._run)
        put('service', self._service)
        put('pool', self._pool)
        put('config', self.config)
        put('event_callback', self.event_callback)
        put('inputs', self.inputs)
        put('outputs', self.outputs)
        put('api_server_access', self.api_server_access)
        for k, v in self._extra.items():
            put(k, v)
        put('file_mounts_mapping', self.file_mounts_mapping)
        put('volume_mounts', self.volume_mounts)
        put('_metadata', self._metadata)
        return out

    # ---- client-side checks of local paths (the server never reads them) --

    def validate_name(self) -> None:
        if self.name is not None and not _NAME_RE.match(self.name):
            raise ValueError(
                f'Invalid task name {self.name!r}: names use ASCII letters, '
                f'digits, underscores, periods and dashes, start and end '
                f'with a letter or digit, and have no triple dashes or '
                f'underscores.')

    def validate_workdir(self) -> None:
        if isinstance(self._workdir, str):
            path = os.path.expanduser(self._workdir)
            if not os.path.isdir(path):
                raise ValueError(
                    f'Workdir must be a valid directory (or a symlink to a '
                    f'directory). {self._workdir} not found.')

    def validate_file_mounts(self) -> None:
        for dst, src in self._mounts.items():
            if isinstance(src, str):
                local = [src]
            else:
                s = src.get('source')
                local = s if isinstance(s, list) else ([s] if s else [])
            for p in local:
                if not is_local_source(p):
                    continue
                if not os.path.exists(os.path.expanduser(p)):
                    raise ValueError(f'File mount source {p!r} (for {dst}) '
                                     f'does not exist locally.')

    def validate(self, workdir_only: bool = False,
                 skip_file_mounts: bool = False) -> None:
        """The checks that need the client's file system: workdir and local
        file-mount sources exist; and the task name pattern."""
        self.validate_workdir()
        if workdir_only:
            return
        self.validate_name()
        if not skip_file_mounts:
            self.validate_file_mounts()

    # ---- DAG ----

    def __rshift__(self, other: 'Task') -> 'Task':
        """`a >> b`: b runs after a, in the current `with sky.Dag():`."""
        if not isinstance(other, Task):
            return NotImplemented
        dag = dag_lib.get_current_dag()
        if dag is None:
            raise ValueError('`a >> b` needs a current Dag: write it inside '
                             '`with sky.Dag() as dag:`')
        dag.add_edge(self, other)
        return other

    def __repr__(self) -> str:
        parts = []
        if self.name:
            parts.append(f'name={self.name!r}')
        for k in ('run', 'setup'):
            v = getattr(self, k)
            if v:
                v = v.strip()
                short = v if len(v) <= 40 else v[:37] + '...'
                parts.append(f'{k}={short!r}')
        if self._workdir:
            parts.append(f'workdir={self._workdir!r}')
        if self._num_nodes and self._num_nodes != 1:
            parts.append(f'num_nodes={self._num_nodes}')
        if self._envs:
            parts.append(f'envs={sorted(self._envs)}')
        if self._secrets:
            # Never the values, nor the names: only how many there are.
            parts.append(f'secrets=<{len(self._secrets)} hidden>')
        if self._mounts:
            parts.append(f'file_mounts={len(self._mounts)}')
        if self._resources:
            if len(self._resources) == 1:
                parts.append(f'resources={self._resources[0]!r}')
            else:
                parts.append(f'resources={self._resources_kind}'
                             f'{list(self._resources)!r}')
        if self._service is not None:
            parts.append('service=...')
        return f'Task({", ".join(parts)})'
