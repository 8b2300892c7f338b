"""sky.Resources: what one task node asks for.

A Resources holds the fields of the task YAML's `resources:` mapping as the
user gave them and writes them back unchanged (to_yaml_config), so the API
server resolves them with the same code as the CLI: infra names, catalogs,
accelerator expansion and every semantic rule live there. Here are only the
checks that need nothing but the value itself (the shape of 'A100:4',
'8+', port ranges, ...), and the normalised forms used for equality, so that
a set of Resources behaves as a set.
"""
import re
from typing import Any, Dict, List, Optional, Set, Tuple, Union

# The keys of the `resources:` mapping, in the order to_yaml_config writes
# them (the order of spec resources.md).
_FIELDS = (
    'infra',
    'cloud',
    'region',
    'zone',
    'accelerators',
    'accelerator_args',
    'cpus',
    'memory',
    'instance_type',
    'use_spot',
    'job_recovery',
    'disk_size',
    'disk_tier',
    'network_tier',
    'ephemeral_storage',
    'local_disk',
    'max_hourly_cost',
    'ports',
    'labels',
    'image_id',
    'autostop',
    'priority',
    'priority_class',
    'volumes',
)

# Written by SkyPilot when it serialises resources; accepted and passed on.
_INTERNAL_FIELDS = (
    '_docker_login_config',
    '_is_image_managed',
    '_requires_fuse',
    '_cluster_config_overrides',
    '_no_missing_accel_warnings',
)

_DISK_TIERS = ('low', 'medium', 'high', 'ultra', 'best')
_NETWORK_TIERS = ('standard', 'best')
_AUTOSTOP_KEYS = ('idle_minutes', 'down', 'wait_for', 'hook', 'hook_timeout')
_WAIT_FOR = ('jobs_and_ssh', 'jobs', 'none')

# GB per unit; SkyPilot treats kb/ki, mb/mi, ... alike (binary multiples).
_SIZE_UNITS = {
    'kb': 1 / 1024**2,
    'ki': 1 / 1024**2,
    'mb': 1 / 1024,
    'mi': 1 / 1024,
    'gb': 1,
    'gi': 1,
    'tb': 1024,
    'ti': 1024,
    'pb': 1024**2,
    'pi': 1024**2,
}
_SIZE_RE = re.compile(r'^(\d+(?:\.\d+)?)\s*([a-zA-Z]{2})?(\+)?$')
_ACC_MEM_RE = re.compile(r'^\d+(?:\.\d+)?(?:GB|MB|TB)\+?$', re.IGNORECASE)
_AUTOSTOP_STR_RE = re.compile(r'^\d+[mhdwMHDW]?$')

_CLOUD_DISPLAY = {
    'aws': 'AWS',
    'gcp': 'GCP',
    'azure': 'Azure',
    'ibm': 'IBM',
    'oci': 'OCI',
    'scp': 'SCP',
    'do': 'DO',
    'kubernetes': 'Kubernetes',
    'lambda': 'Lambda',
    'runpod': 'RunPod',
    'ssh': 'SSH',
    'slurm': 'Slurm',
}


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _fmt_number(v: float) -> str:
    """'8' for 8.0, '0.5' for 0.5: the way SkyPilot prints counts and GB."""
    if float(v).is_integer():
        return str(int(v))
    return repr(float(v))


def _num(v: float) -> Union[int, float]:
    return int(v) if float(v).is_integer() else float(v)


def _freeze(v: Any) -> Any:
    """A hashable rendering of a YAML value (for equality and hashing)."""
    if isinstance(v, dict):
        return ('{}', tuple(sorted((str(k), _freeze(x)) for k, x in v.items())))
    if isinstance(v, (list, tuple)):
        return ('[]', tuple(_freeze(x) for x in v))
    if isinstance(v, (set, frozenset)):
        return ('set', tuple(sorted(repr(_freeze(x)) for x in v)))
    return v


def _copy_value(v: Any) -> Any:
    """A copy of containers (so a caller's later edits cannot change a
    Resources, whose hash depends on them); sets stay sets."""
    if isinstance(v, dict):
        return {k: _copy_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_copy_value(x) for x in v]
    if isinstance(v, (set, frozenset)):
        return set(v)
    return v


def _plain(v: Any) -> Any:
    """A copy with YAML-dumpable containers only (sets/tuples -> lists)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (set, frozenset)):
        return sorted((_plain(x) for x in v), key=str)
    if hasattr(v, 'value') and isinstance(getattr(v, 'value'), str):
        return v.value  # str enums such as AutostopWaitFor
    return v


# ---- parsing of single fields (pure syntax) -------------------------------


def parse_infra(infra: str) -> Tuple[Optional[str], Optional[str],
                                     Optional[str]]:
    """'aws/us-east-1/us-east-1a' -> ('aws', 'us-east-1', 'us-east-1a').

    `*` parts mean "any" (None). Kubernetes: 'k8s/<context>' where the context
    may itself hold slashes; SSH: 'ssh/<pool>' is region 'ssh-<pool>'.
    """
    if not isinstance(infra, str):
        raise ValueError(f'infra must be a string such as "aws/us-east-1", '
                         f'got {infra!r}')
    s = infra.strip().strip('/')
    if not s:
        raise ValueError('infra is empty: give a cloud, cloud/region or '
                         'cloud/region/zone (e.g. "aws/us-east-1")')
    head, _, rest = s.partition('/')
    cloud = head.lower()
    if cloud in ('k8s', 'kubernetes'):
        return 'kubernetes', (rest or None), None
    if cloud == 'ssh':
        return 'ssh', ('ssh-' + rest if rest else None), None
    parts = s.split('/')
    if any(p == '' for p in parts):
        raise ValueError(f'infra {infra!r} has an empty part; write '
                         f'<cloud>[/<region>[/<zone>]]')
    if len(parts) > 3:
        raise ValueError(f'infra {infra!r} has more than 3 parts; write '
                         f'<cloud>[/<region>[/<zone>]]')
    parts[0] = cloud
    out = [None if p == '*' else p for p in parts] + [None] * (3 - len(parts))
    return out[0], out[1], out[2]


def _parse_acc_str(s: str) -> Tuple[str, Union[int, float]]:
    """'A100:4' -> ('A100', 4); also the memory forms '80GB+', '48GB:2',
    'nvidia:80GB', 'nvidia:80GB:2'."""
    s = s.strip()
    parts = s.split(':')
    bad = (f'accelerators {s!r} should be <name> or <name>:<cnt> '
           f'(e.g. "A100:4")')
    if any(p == '' for p in parts):
        raise ValueError(bad)
    if len(parts) == 1:
        return s, 1
    if len(parts) == 2:
        if _ACC_MEM_RE.match(parts[1]):
            return s, 1  # <manufacturer>:<memory>
        return parts[0], _parse_count(parts[1], s)
    if len(parts) == 3 and _ACC_MEM_RE.match(parts[1]):
        return parts[0] + ':' + parts[1], _parse_count(parts[2], s)
    raise ValueError(bad)


def _parse_count(v: Any, what: Any) -> Union[int, float]:
    if isinstance(v, str):
        try:
            n = float(v)
        except ValueError:
            raise ValueError(
                f'accelerators {what!r}: count {v!r} is not a number') from None
    elif _is_number(v):
        n = float(v)
    else:
        raise ValueError(f'accelerators {what!r}: count must be a number, '
                         f'got {v!r}')
    if not n > 0:
        raise ValueError(f'accelerators {what!r}: Accelerator count must be '
                         f'a positive number')
    return _num(n)


def _parse_accelerators(v: Any) -> Tuple[str, Tuple[Tuple[str, Any], ...]]:
    """('set', ((name, count), ...)) for a name, dict or set (unordered
    candidates), ('list', ...) for a list (candidates in preference order)."""
    if isinstance(v, str):
        return 'set', (_parse_acc_str(v),)
    if isinstance(v, dict):
        if not v:
            raise ValueError('accelerators is an empty mapping')
        items = []
        for k, cnt in v.items():
            if not isinstance(k, str):
                raise ValueError(f'accelerators: name {k!r} must be a string')
            if cnt is None:  # YAML's reading of the flow set {A100:1, V100:1}
                items.append(_parse_acc_str(k))
            else:
                items.append((k.strip(), _parse_count(cnt, k)))
        return 'set', tuple(items)
    if isinstance(v, (set, frozenset, list, tuple)):
        if not v:
            raise ValueError('accelerators is an empty collection')
        items = []
        for x in v:
            if isinstance(x, str):
                items.append(_parse_acc_str(x))
            elif isinstance(x, dict) and len(x) == 1:
                items.extend(_parse_accelerators(x)[1])
            else:
                raise ValueError(
                    f'accelerators: item {x!r} should be "<name>:<cnt>"')
        kind = 'list' if isinstance(v, (list, tuple)) else 'set'
        return kind, tuple(items)
    raise ValueError(f'accelerators should be a string "<name>:<cnt>", a '
                     f'mapping {{name: count}}, a set or a list; got {v!r}')


def _parse_cpus(v: Any) -> str:
    bad = (f'The "cpus" field should be either a number or a string '
           f'"<number>+". Found: {v!r}')
    if _is_number(v):
        if not v > 0:
            raise ValueError(bad)
        return _fmt_number(v)
    if not isinstance(v, str):
        raise ValueError(bad)
    s = v.strip()
    plus = s.endswith('+')
    try:
        n = float(s[:-1] if plus else s)
    except ValueError:
        raise ValueError(bad) from None
    if not n > 0:
        raise ValueError(bad)
    return _fmt_number(n) + ('+' if plus else '')


def _parse_size(v: Any, field: str, allow_plus: bool) -> Tuple[float, bool]:
    """A number of GB, or '<n>[unit][+]' with binary units -> (GB, plus)."""
    if _is_number(v):
        return float(v), False
    if isinstance(v, str):
        m = _SIZE_RE.match(v.strip())
        if m and (allow_plus or not m.group(3)):
            unit = (m.group(2) or 'gb').lower()
            if unit in _SIZE_UNITS:
                return float(m.group(1)) * _SIZE_UNITS[unit], bool(m.group(3))
    plus = '[+]' if allow_plus else ''
    raise ValueError(f'{field} should be a number of GB or a string '
                     f'"<n>[unit]{plus}" with unit one of kb, mb, gb, tb, pb '
                     f'(or ki, mi, gi, ti, pi); got {v!r}')


def _parse_memory(v: Any) -> str:
    if isinstance(v, str) and v.strip().endswith('x'):
        # '<n>x' = GB per vCPU, the form SkyPilot writes for controllers.
        try:
            n = float(v.strip()[:-1])
        except ValueError:
            n = -1
        if n > 0:
            return _fmt_number(n) + 'x'
    gb, plus = _parse_size(v, 'memory', allow_plus=True)
    if gb < 0:
        raise ValueError(f'memory must be positive, got {v!r}')
    return _fmt_number(gb) + ('+' if plus else '')


def _parse_disk(v: Any, field: str) -> Union[int, float]:
    gb, _ = _parse_size(v, field, allow_plus=False)
    if not gb > 0:
        raise ValueError(f'{field} must be a positive size, got {v!r}')
    return _num(gb)


def _parse_ports(v: Any) -> Tuple[str, ...]:
    """Ports flattened, checked and merged: [8080, '8081', '9000-9002,9003']
    -> ('8080-8081', '9000-9003')."""
    entries = v if isinstance(v, (list, tuple)) else [v]
    spans = []
    for e in entries:
        if _is_number(e) and float(e).is_integer():
            pieces = [str(int(e))]
        elif isinstance(e, str):
            pieces = [p.strip() for p in e.split(',')]
        else:
            raise ValueError(f'ports: {e!r} is neither a port number nor a '
                             f'string such as "8080" or "9000-9010"')
        for p in pieces:
            lo_s, dash, hi_s = p.partition('-')
            try:
                lo = int(lo_s)
                hi = int(hi_s) if dash else lo
            except ValueError:
                raise ValueError(
                    f'ports: {p!r} is not a port or a range "<from>-<to>"'
                ) from None
            if not (1 <= lo <= 65535 and 1 <= hi <= 65535) or lo > hi:
                raise ValueError(f'ports: {p!r} is outside 1-65535 or not '
                                 f'a valid "<from>-<to>" range')
            spans.append((lo, hi))
    spans.sort()
    merged: List[List[int]] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return tuple(str(a) if a == b else f'{a}-{b}' for a, b in merged)


def _check_autostop(v: Any) -> None:
    if isinstance(v, bool):
        return
    if _is_number(v):
        if not (float(v).is_integer() and v >= 0):
            raise ValueError(f'autostop: idle minutes must be an integer '
                             f'>= 0, got {v!r}')
        return
    if isinstance(v, str):
        if not _AUTOSTOP_STR_RE.match(v.strip()):
            raise ValueError(f'autostop: {v!r} should be "<n>" or "<n><unit>"'
                             f' with unit m, h, d or w')
        return
    if isinstance(v, dict):
        for k in v:
            if k not in _AUTOSTOP_KEYS:
                raise ValueError(f'autostop: unknown key {k!r} (allowed: '
                                 f'{", ".join(_AUTOSTOP_KEYS)})')
        wf = v.get('wait_for')
        if wf is not None and str(getattr(wf, 'value', wf)).lower() \
                not in _WAIT_FOR:
            raise ValueError(f'autostop.wait_for must be one of '
                             f'{", ".join(_WAIT_FOR)}; got {wf!r}')
        return
    raise ValueError(f'autostop should be a bool, a number of minutes, a '
                     f'string like "30m" or a mapping; got {v!r}')


# ---- the class ------------------------------------------------------------


class Resources:
    """One candidate set of node resources (the task YAML `resources:`).

    Alternatives are expressed on the task: task.set_resources({r1, r2})
    (any_of: the cheapest feasible) or task.set_resources([r1, r2])
    (ordered: tried in order). A multi-accelerator value
    (accelerators={'A100': 1, 'V100': 1} or ['A100:1', 'V100:1']) stays in
    one Resources and the server expands it, as for the CLI.

    Instances are immutable; use copy(**override) to change a field.
    """

    def __init__(
        self,
        infra: Optional[str] = None,
        *,
        cloud: Optional[str] = None,
        region: Optional[str] = None,
        zone: Optional[str] = None,
        accelerators: Union[None, str, Dict[str, Any], Set[str],
                            List[str]] = None,
        accelerator_args: Optional[Dict[str, Any]] = None,
        cpus: Union[None, int, float, str] = None,
        memory: Union[None, int, float, str] = None,
        instance_type: Optional[str] = None,
        use_spot: Optional[bool] = None,
        job_recovery: Union[None, str, Dict[str, Any]] = None,
        disk_size: Union[None, int, str] = None,
        disk_tier: Optional[str] = None,
        network_tier: Optional[str] = None,
        ephemeral_storage: Union[None, int, str] = None,
        local_disk: Optional[str] = None,
        max_hourly_cost: Optional[float] = None,
        ports: Union[None, int, str, List[Union[int, str]]] = None,
        labels: Optional[Dict[str, str]] = None,
        image_id: Union[None, str, Dict[Optional[str], str]] = None,
        autostop: Union[None, bool, int, str, Dict[str, Any]] = None,
        priority: Optional[int] = None,
        priority_class: Optional[str] = None,
        volumes: Optional[List[Dict[str, Any]]] = None,
        **internal: Any,
    ) -> None:
        for k in internal:
            if k not in _INTERNAL_FIELDS:
                raise TypeError(
                    f'Resources() got an unexpected keyword argument {k!r}')
        given = {
            'infra': infra,
            'cloud': cloud,
            'region': region,
            'zone': zone,
            'accelerators': accelerators,
            'accelerator_args': accelerator_args,
            'cpus': cpus,
            'memory': memory,
            'instance_type': instance_type,
            'use_spot': use_spot,
            'job_recovery': job_recovery,
            'disk_size': disk_size,
            'disk_tier': disk_tier,
            'network_tier': network_tier,
            'ephemeral_storage': ephemeral_storage,
            'local_disk': local_disk,
            'max_hourly_cost': max_hourly_cost,
            'ports': ports,
            'labels': labels,
            'image_id': image_id,
            'autostop': autostop,
            'priority': priority,
            'priority_class': priority_class,
            'volumes': volumes,
        }
        given.update(internal)
        if cloud is not None and not isinstance(cloud, str):
            # A cloud object (SkyPilot's sky.AWS() style) by its name.
            name = getattr(cloud, 'canonical_name', None)
            if not callable(name):
                raise ValueError(f'cloud must be a cloud name such as "aws", '
                                 f'got {cloud!r}')
            given['cloud'] = name()
        # The user's values, as given (what to_yaml_config writes).
        self._raw: Dict[str, Any] = {
            k: _copy_value(v) for k, v in given.items() if v is not None
        }
        self._check()
        self._key = self._canonical()
        self._accelerators_key = 'accelerators'

    # -- validation and normal forms --

    def _check(self) -> None:
        r = self._raw
        if 'infra' in r and ({'cloud', 'region', 'zone'} & r.keys()):
            raise ValueError('Cannot specify both `infra` and `cloud`, '
                             '`region`, or `zone` parameters')
        if 'infra' in r:
            self._where = parse_infra(r['infra'])
        else:
            for k in ('cloud', 'region', 'zone'):
                if k in r and not isinstance(r[k], str):
                    raise ValueError(f'{k} must be a string, got {r[k]!r}')
            cloud = r.get('cloud')
            self._where = (cloud.lower() if cloud else None, r.get('region'),
                           r.get('zone'))
        for k in ('instance_type', 'local_disk', 'priority_class'):
            if k in r and not isinstance(r[k], str):
                raise ValueError(f'{k} must be a string, got {r[k]!r}')
        if 'use_spot' in r and not isinstance(r['use_spot'], bool):
            raise ValueError(f'use_spot must be True or False, got '
                             f'{r["use_spot"]!r}')
        for k, allowed in (('disk_tier', _DISK_TIERS),
                           ('network_tier', _NETWORK_TIERS)):
            if k in r and (not isinstance(r[k], str) or
                           r[k].lower() not in allowed):
                raise ValueError(f'{k} must be one of {", ".join(allowed)}; '
                                 f'got {r[k]!r}')
        if 'priority' in r:
            p = r['priority']
            if not (_is_number(p) and float(p).is_integer() and
                    -1000 <= p <= 1000):
                raise ValueError(f'priority must be an integer in '
                                 f'-1000..1000, got {p!r}')
        if 'max_hourly_cost' in r and not (_is_number(r['max_hourly_cost']) and
                                           r['max_hourly_cost'] > 0):
            raise ValueError(f'max_hourly_cost must be a number > 0, got '
                             f'{r["max_hourly_cost"]!r}')
        for k in ('labels', 'accelerator_args', '_docker_login_config'):
            if k in r and not isinstance(r[k], dict):
                raise ValueError(f'{k} must be a mapping, got {r[k]!r}')
        if 'labels' in r:
            for lk in r['labels']:
                if not isinstance(lk, str):
                    raise ValueError(f'labels: key {lk!r} must be a string')
        if 'job_recovery' in r and not isinstance(r['job_recovery'],
                                                  (str, dict)):
            raise ValueError(f'job_recovery should be a strategy name or a '
                             f'mapping, got {r["job_recovery"]!r}')
        if 'image_id' in r and not isinstance(r['image_id'], (str, dict)):
            raise ValueError(f'image_id should be a string or a mapping '
                             f'region -> image, got {r["image_id"]!r}')
        if 'volumes' in r and not (isinstance(r['volumes'], list) and all(
                isinstance(x, dict) for x in r['volumes'])):
            raise ValueError('volumes (instance volumes) should be a list of '
                             'mappings')
        if 'autostop' in r:
            _check_autostop(r['autostop'])

    def _canonical(self) -> Tuple:
        r = self._raw
        norm: Dict[str, Any] = {}
        cloud, region, zone = self._where
        norm['where'] = (cloud, region, zone)
        if 'accelerators' in r:
            kind, items = _parse_accelerators(r['accelerators'])
            norm['accelerators'] = (kind, tuple(sorted(set(items)))
                                    if kind == 'set' else items)
            self._acc = (kind, items)
        else:
            self._acc = None
        if 'cpus' in r:
            norm['cpus'] = _parse_cpus(r['cpus'])
        if 'memory' in r:
            norm['memory'] = _parse_memory(r['memory'])
        for k in ('disk_size', 'ephemeral_storage'):
            if k in r:
                norm[k] = _parse_disk(r[k], k)
        if 'ports' in r:
            norm['ports'] = _parse_ports(r['ports'])
        for k in ('disk_tier', 'network_tier'):
            if k in r:
                norm[k] = r[k].lower()
        if 'job_recovery' in r:
            norm['job_recovery'] = _freeze(self.job_recovery)
        if r.get('use_spot') is False:
            norm['use_spot'] = None  # on-demand is the default: same as unset
        for k, v in r.items():
            if k not in norm and k not in ('infra', 'cloud', 'region', 'zone'):
                norm[k] = _freeze(_plain(v))
        norm = {k: v for k, v in norm.items() if v is not None}
        self._norm = norm
        return tuple(sorted((k, repr(v)) for k, v in norm.items()))

    # -- construction --

    @classmethod
    def from_yaml_config(
        cls, config: Optional[Dict[str, Any]]
    ) -> Union[Set['Resources'], List['Resources']]:
        """The task YAML `resources:` mapping -> its candidate Resources.

        Like SkyPilot: a set for a plain mapping (one element) or `any_of`,
        a list for `ordered`. Items of any_of/ordered are merged over the
        base fields (item keys win; labels are merged).
        """
        return _from_yaml_config_ordered(cls, config)[0]

    def copy(self, **override: Any) -> 'Resources':
        """A Resources with the given fields replaced (None clears one)."""
        for k in override:
            if k not in _FIELDS and k not in _INTERNAL_FIELDS:
                raise TypeError(
                    f'Resources.copy() got an unexpected field {k!r}')
        fields = dict(self._raw)
        where_keys = {'cloud', 'region', 'zone'} & override.keys()
        if 'infra' in override:
            for k in ('cloud', 'region', 'zone'):
                fields.pop(k, None)
        elif where_keys and 'infra' in fields:
            # Changing one part of an infra string: spell it out as parts.
            fields.pop('infra')
            for k, v in zip(('cloud', 'region', 'zone'), self._where):
                if v is not None:
                    fields[k] = v
        fields.update(override)
        infra = fields.pop('infra', None)
        r = Resources(infra, **fields)
        if 'accelerators' not in override:
            r._accelerators_key = self._accelerators_key  # pylint: disable=protected-access
        return r

    # -- serialisation --

    def to_yaml_config(self) -> Dict[str, Any]:
        """The `resources:` mapping of the task YAML, fields as given."""
        out: Dict[str, Any] = {}
        for k in _FIELDS + _INTERNAL_FIELDS:
            if k not in self._raw:
                continue
            v = self._raw[k]
            if k == 'accelerators':
                if isinstance(v, (set, frozenset)):
                    v = {name: cnt for name, cnt in self._acc[1]}
                k = self._accelerators_key
            out[k] = _plain(v)
        return out

    # -- properties (normalised values, SkyPilot's types where it has one) --

    @property
    def infra(self) -> Optional[str]:
        """'cloud[/region[/zone]]', from infra or cloud/region/zone."""
        if 'infra' in self._raw:
            return self._raw['infra']
        cloud, region, zone = self._where
        if cloud is None and region is None and zone is None:
            return None
        parts = [cloud or '*', region or '*', zone]
        if zone is None:
            parts = parts[:2] if region else parts[:1]
        return '/'.join(p for p in parts if p is not None)

    @property
    def cloud(self) -> Optional[str]:
        """The cloud name, lower case ('aws', 'kubernetes', ...)."""
        return self._where[0]

    @property
    def region(self) -> Optional[str]:
        return self._where[1]

    @property
    def zone(self) -> Optional[str]:
        return self._where[2]

    @property
    def accelerators(self) -> Union[None, Dict[str, Any], List[Dict[str,
                                                                   Any]]]:
        """{name: count}; for a list (ordered candidates) a list of
        one-entry dicts in preference order."""
        if self._acc is None:
            return None
        kind, items = self._acc
        if kind == 'list':
            return [{n: c} for n, c in items]
        return {n: c for n, c in items}

    @property
    def accelerator_args(self) -> Optional[Dict[str, Any]]:
        return _copy_value(self._raw.get('accelerator_args'))

    @property
    def cpus(self) -> Optional[str]:
        """'8' (exactly) or '8+' (at least)."""
        return self._norm.get('cpus')

    @property
    def memory(self) -> Optional[str]:
        """GB as a string: '32', '32+' (units converted)."""
        return self._norm.get('memory')

    @property
    def instance_type(self) -> Optional[str]:
        return self._raw.get('instance_type')

    @property
    def use_spot(self) -> bool:
        return bool(self._raw.get('use_spot', False))

    @property
    def use_spot_specified(self) -> bool:
        return 'use_spot' in self._raw

    @property
    def job_recovery(self) -> Optional[Dict[str, Any]]:
        """{'strategy': 'EAGER_NEXT_REGION', ...}; a string is the strategy."""
        v = self._raw.get('job_recovery')
        if v is None:
            return None
        if isinstance(v, str):
            return {'strategy': v.upper()}
        out = dict(v)
        if isinstance(out.get('strategy'), str):
            out['strategy'] = out['strategy'].upper()
        return out

    @property
    def disk_size(self) -> Union[int, float, None]:
        """GB; None when not set (the server's default is 256)."""
        return self._norm.get('disk_size')

    @property
    def disk_tier(self) -> Optional[str]:
        return self._norm.get('disk_tier')

    @property
    def network_tier(self) -> Optional[str]:
        return self._norm.get('network_tier')

    @property
    def ephemeral_storage(self) -> Union[int, float, None]:
        return self._norm.get('ephemeral_storage')

    @property
    def local_disk(self) -> Optional[str]:
        return self._raw.get('local_disk')

    @property
    def max_hourly_cost(self) -> Optional[float]:
        return self._raw.get('max_hourly_cost')

    @property
    def ports(self) -> Optional[List[str]]:
        """Sorted, merged port ranges: ['8080-8081', '9000']."""
        p = self._norm.get('ports')
        return list(p) if p else None

    @property
    def labels(self) -> Optional[Dict[str, str]]:
        return _copy_value(self._raw.get('labels'))

    @property
    def image_id(self) -> Optional[Dict[Optional[str], str]]:
        """{region or None: image}, like SkyPilot."""
        v = self._raw.get('image_id')
        if isinstance(v, str):
            return {self.region: v}
        return _copy_value(v)

    @property
    def autostop(self) -> Any:
        return _plain(self._raw.get('autostop'))

    @property
    def priority(self) -> Optional[int]:
        return self._raw.get('priority')

    @property
    def priority_class(self) -> Optional[str]:
        return self._raw.get('priority_class')

    @property
    def volumes(self) -> Optional[List[Dict[str, Any]]]:
        return _copy_value(self._raw.get('volumes'))

    # -- value semantics --

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resources):
            return NotImplemented
        return self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        """SkyPilot's short form: AWS/us-east-1(m6i.large, {'A100': 4},
        cpus=8+, mem=32+, spot)."""
        cloud, region, zone = self._where
        head = _CLOUD_DISPLAY.get(cloud or '', cloud or '')
        if region:
            head += '/' + region
        if zone:
            head += '/' + zone
        parts = []
        if self.instance_type:
            parts.append(self.instance_type)
        if self._acc is not None:
            parts.append(str(self.accelerators))
        if self.cpus:
            parts.append(f'cpus={self.cpus}')
        if self.memory:
            parts.append(f'mem={self.memory}')
        if self.use_spot:
            parts.append('spot')
        for k in ('disk_size', 'disk_tier', 'network_tier', 'ports'):
            v = getattr(self, k)
            if v:
                parts.append(f'{k}={v}')
        if 'image_id' in self._raw:
            parts.append(f'image_id={self._raw["image_id"]}')
        if 'labels' in self._raw:
            parts.append(f'labels={self._raw["labels"]}')
        return f'{head or "Resources"}({", ".join(parts)})'


def _from_yaml_config_ordered(
    cls, config: Optional[Dict[str, Any]]
) -> Tuple[Union[Set[Resources], List[Resources]], List[Resources], str]:
    """(SkyPilot's set-or-list, the candidates in YAML order, kind) where
    kind is 'single', 'any_of' or 'ordered'."""
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise ValueError(f'resources must be a mapping, got {config!r}')
    # Null values are the same as absent.
    config = {k: v for k, v in config.items() if v is not None}
    if 'any_of' in config and 'ordered' in config:
        raise ValueError(
            'Cannot specify both "any_of" and "ordered" in resources.')

    def build(d: Dict[str, Any]) -> Resources:
        d = {k: v for k, v in d.items() if v is not None}
        gpus_alias = 'gpus' in d
        if gpus_alias:
            if 'accelerators' in d:
                raise ValueError(
                    'Cannot specify both gpus and accelerators in config.')
            d['accelerators'] = d.pop('gpus')
        for k in d:
            if k not in _FIELDS and k not in _INTERNAL_FIELDS:
                raise ValueError(f'Invalid resources YAML: unknown field '
                                 f'{k!r}')
        infra = d.pop('infra', None)
        r = cls(infra, **d)
        # Written back with the user's spelling.
        r._accelerators_key = 'gpus' if gpus_alias else 'accelerators'  # pylint: disable=protected-access
        return r

    for kind in ('any_of', 'ordered'):
        if kind not in config:
            continue
        items = config[kind]
        if not isinstance(items, list) or not items:
            raise ValueError(f'resources.{kind} must be a non-empty list of '
                             f'resource mappings')
        base = {k: v for k, v in config.items() if k != kind}
        cands = []
        for item in items:
            if not isinstance(item, dict):
                raise ValueError(f'resources.{kind}: item {item!r} is not a '
                                 f'mapping')
            if 'any_of' in item or 'ordered' in item:
                raise ValueError(f'resources.{kind}: items may not contain '
                                 f'any_of or ordered')
            merged = dict(base)
            if 'gpus' in item:
                merged.pop('accelerators', None)
            if 'accelerators' in item:
                merged.pop('gpus', None)
            if 'infra' in item:
                for k in ('cloud', 'region', 'zone'):
                    merged.pop(k, None)
            if {'cloud', 'region', 'zone'} & item.keys():
                merged.pop('infra', None)
            for k, v in item.items():
                if k == 'labels' and isinstance(v, dict) and isinstance(
                        merged.get('labels'), dict):
                    merged['labels'] = {**merged['labels'], **v}
                else:
                    merged[k] = v
            cands.append(build(merged))
        if kind == 'ordered':
            return list(cands), cands, kind
        return set(cands), _dedupe(cands), kind
    r = build(config)
    return {r}, [r], 'single'


def _dedupe(rs: List[Resources]) -> List[Resources]:
    out: List[Resources] = []
    for r in rs:
        if r not in out:
            out.append(r)
    return out


def resources_yaml_config(candidates: List[Resources],
                          kind: str) -> Dict[str, Any]:
    """The task YAML `resources:` mapping for candidates of one kind
    ('single', 'any_of', 'ordered'). Fields equal in every candidate are
    written once at the top, the rest per item, so a mapping read from YAML
    comes back as it was written."""
    if not candidates:
        return {}
    if kind == 'single' or len(candidates) == 1:
        return candidates[0].to_yaml_config()
    configs = [r.to_yaml_config() for r in candidates]
    common: Dict[str, Any] = {}
    for k, v in configs[0].items():
        if all(k in c and _freeze(c[k]) == _freeze(v) for c in configs[1:]):
            common[k] = v
    items = [{k: v for k, v in c.items() if k not in common} for c in configs]
    return {**common, kind: items}
