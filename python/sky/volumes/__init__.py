"""Volumes (sky.volumes.*) against the server's volumes.* operations:
``sky volumes apply / ls / delete`` for Python. A SkyGo build holds
``host-dir`` volumes (a directory on this machine or on a host of an SSH
node pool); the Kubernetes and RunPod types are refused by the server
with the reason."""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs ms at import
    from typing import Any, Dict, List, Optional, Union

from sky.client import _ops
from sky.client import sdk as _sdk

__all__ = ['apply', 'ls', 'delete']

_SPEC_KEYS = ('name', 'type', 'infra', 'size', 'use_existing', 'labels',
              'config')


def _spec(volume: Any) -> Dict[str, Any]:
    if isinstance(volume, str):
        from sky import _yaml  # pylint: disable=import-outside-toplevel
        with open(volume, encoding='utf-8') as f:
            volume = _yaml.load(f.read())
    elif hasattr(volume, 'to_yaml_config'):
        volume = volume.to_yaml_config()
    if not isinstance(volume, dict):
        raise ValueError('a volume is a mapping with name and type (or the '
                         'path of a volume YAML)')
    unknown = sorted(set(volume) - set(_SPEC_KEYS))
    if unknown:
        raise ValueError(f'unknown volume spec key(s): {", ".join(unknown)}')
    return volume


def apply(volume: Union[Dict[str, Any], str, Any]) -> _sdk.RequestId:
    """Creates a volume from a spec (a mapping with ``name``, ``type``,
    optional ``infra``, ``size``, ``use_existing``, ``labels``,
    ``config``, or the path of a volume YAML). Request returns None; a
    volume of that name already there is left as it is."""
    spec = _spec(volume)
    body: Dict[str, Any] = {'name': spec.get('name'),
                            'volume_type': spec.get('type')}
    if spec.get('size') is not None:
        size = spec['size']
        body['size'] = f'{size}Gi' if isinstance(size, int) else str(size)
    _sdk._set(body, infra=spec.get('infra'),  # pylint: disable=protected-access
              use_existing=spec.get('use_existing'),
              labels=spec.get('labels'), config=spec.get('config'))
    return _sdk._submit(_ops.VOLUMES_APPLY, body, _sdk._none)  # pylint: disable=protected-access


def ls(volume_names: Optional[List[str]] = None,
       refresh: bool = False) -> _sdk.RequestId:
    """Lists volumes. Request returns a list of records (name, type,
    cloud, region, zone, size, config, name_on_cloud, user_hash,
    user_name, workspace, last_attached_at, last_use, status,
    usedby_pods, usedby_clusters, is_ephemeral, ...); ``refresh`` checks
    the volumes' storage first."""
    body: Dict[str, Any] = {}
    _sdk._set(body, names=list(volume_names) if volume_names else None,  # pylint: disable=protected-access
              refresh=refresh)
    return _sdk._submit(_ops.VOLUMES_LS, body)  # pylint: disable=protected-access


def delete(names: Union[str, List[str]], purge: bool = False) -> _sdk.RequestId:
    """Deletes volumes (their data too); one a cluster uses is refused
    unless ``purge``. Request returns the names deleted."""
    if isinstance(names, str):
        names = [names]
    if not names:
        raise ValueError('name the volumes to delete')
    body: Dict[str, Any] = {'names': list(names)}
    _sdk._set(body, purge=purge)  # pylint: disable=protected-access
    return _sdk._submit(_ops.VOLUMES_DELETE, body)  # pylint: disable=protected-access
