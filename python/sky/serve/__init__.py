"""SkyServe (sky.serve.*) against the server's serve.* operations."""
from __future__ import annotations

import enum
TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs ms at import
    from typing import Any, Dict, List, Optional, Union

from sky.client import _ops
from sky.client import sdk as _sdk

__all__ = ['up', 'update', 'status', 'down', 'terminate_replica',
           'tail_logs', 'ServiceComponent', 'UpdateMode']


class ServiceComponent(str, enum.Enum):
    """Which log sky.serve.tail_logs shows."""
    CONTROLLER = 'controller'
    LOAD_BALANCER = 'load_balancer'
    REPLICA = 'replica'

    def __str__(self) -> str:
        return self.value


class UpdateMode(str, enum.Enum):
    """How sky.serve.update replaces replicas."""
    ROLLING = 'rolling'
    BLUE_GREEN = 'blue_green'

    def __str__(self) -> str:
        return self.value


def up(task: Any, service_name: Optional[str] = None,
       _need_confirmation: bool = False) -> _sdk.RequestId:
    """Starts a service from a task with a ``service:`` section. Request
    returns ``(service_name, endpoint)``."""
    _sdk._require_task_yaml(_ops.SERVE_UP, 'sky.serve.up')  # pylint: disable=protected-access
    text, upload_id = _sdk._one_task_yaml(task, True, 'sky.serve.up')  # pylint: disable=protected-access
    body: Dict[str, Any] = {'task_yaml': text}
    if upload_id:
        body['upload_id'] = upload_id
    if service_name:
        body['service_name'] = service_name

    def post(v: Any, b: Dict[str, Any]):
        v = v or {}
        return v.get('service_name'), v.get('endpoint')

    return _sdk._submit(_ops.SERVE_UP, _sdk._with_env(body), post)  # pylint: disable=protected-access


def update(task: Any, service_name: str,
           mode: Union[UpdateMode, str] = UpdateMode.ROLLING,
           _need_confirmation: bool = False) -> _sdk.RequestId:
    """Updates a service to a new version of the task. Request returns
    None."""
    _sdk._require_task_yaml(_ops.SERVE_UPDATE, 'sky.serve.update')  # pylint: disable=protected-access
    text, upload_id = _sdk._one_task_yaml(task, True, 'sky.serve.update')  # pylint: disable=protected-access
    body: Dict[str, Any] = {'task_yaml': text, 'service_name': service_name,
                            'mode': str(getattr(mode, 'value', mode))}
    if upload_id:
        body['upload_id'] = upload_id
    return _sdk._submit(_ops.SERVE_UPDATE, _sdk._with_env(body), _sdk._none)  # pylint: disable=protected-access


def status(service_names: Optional[Union[str, List[str]]]) -> _sdk.RequestId:
    """Request returns the services' records (list of dicts)."""
    return _sdk._submit(_ops.SERVE_STATUS, _sdk._names_body('service_names', service_names))  # pylint: disable=protected-access


def down(service_names: Optional[Union[str, List[str]]],
         all: bool = False,  # pylint: disable=redefined-builtin
         purge: bool = False) -> _sdk.RequestId:
    """Tears services down. Request returns None."""
    body = _sdk._names_body('service_names', service_names, all, purge, required=True)  # pylint: disable=protected-access
    return _sdk._submit(_ops.SERVE_DOWN, body, _sdk._none)  # pylint: disable=protected-access


def terminate_replica(service_name: str, replica_id: int,
                      purge: bool) -> _sdk.RequestId:
    """Terminates one replica. Request returns None."""
    body: Dict[str, Any] = {'service_name': service_name,
                            'replica_id': int(replica_id)}
    if purge:
        body['purge'] = True
    return _sdk._submit(_ops.SERVE_TERMINATE_REPLICA, body, _sdk._none)  # pylint: disable=protected-access


def tail_logs(service_name: str, target: Union[str, ServiceComponent],
              replica_id: Optional[int] = None, follow: bool = True,
              output_stream: Optional[Any] = None,
              tail: Optional[int] = None) -> None:
    """Streams the log of a service's controller, load balancer or
    replica."""
    t = ServiceComponent(str(getattr(target, 'value', target)))
    body: Dict[str, Any] = {'service_name': service_name,
                            'follow': bool(follow)}
    if t == ServiceComponent.CONTROLLER:
        body['controller'] = True
    elif t == ServiceComponent.LOAD_BALANCER:
        body['load_balancer'] = True
    else:
        if replica_id is None:
            raise ValueError('target=REPLICA needs replica_id')
        body['replica_id'] = int(replica_id)
    if replica_id is not None and t != ServiceComponent.REPLICA:
        raise ValueError('replica_id is only for target=REPLICA')
    if tail:
        body['tail'] = int(tail)
    rid = _sdk._client().submit(_ops.SERVE_LOGS.name, body)  # pylint: disable=protected-access
    _sdk._follow_request(rid, follow, _sdk._out(output_stream))  # pylint: disable=protected-access
