"""Reading and writing multi-document task YAML (pipelines, job groups)."""
import os
from typing import Any, Dict, List, Optional

from sky import dag as dag_lib
from sky import task as task_lib


def _is_pipeline_header(doc: Any) -> bool:
    return (isinstance(doc, dict) and 'name' in doc and
            set(doc) <= {'name', 'execution'})


def load_chain_dag_from_yaml_configs(
    docs: List[Any],
    env_overrides: task_lib.EnvsArg = None,
    secrets_overrides: task_lib.EnvsArg = None,
    source: str = '<string>',
) -> dag_lib.Dag:
    """A Dag from the documents of one YAML file: a task, a pipeline
    (optional header {name[, execution: serial]}, then tasks run in order)
    or a job group (header with execution: parallel, then jobs)."""
    docs = [d for d in docs if d is not None]
    if not docs:
        raise ValueError(
            f'{source} is empty or contains no task definition. Add at '
            f'least a `run:` (or `setup:`) field.')
    dag = dag_lib.Dag()
    first = docs[0]
    header: Optional[Dict[str, Any]] = None
    if (len(docs) >= 2 and isinstance(first, dict) and
            first.get('execution') == 'parallel'):
        header = dict(first)
        dag.execution = 'parallel'
    elif _is_pipeline_header(first):
        header = dict(first)
        ex = header.get('execution')
        if ex is not None and ex != 'serial':
            raise ValueError(
                f'{source}: Invalid execution mode for pipeline: {ex!r}. '
                f'Pipelines run serially (execution: serial, or leave it '
                f'out). Use execution: parallel for job groups.')
    if header is not None:
        docs = docs[1:]
        dag.name = header.pop('name', None)
        header.pop('execution', None)
        if dag.execution == 'parallel':
            dag.header_extras = header
    with dag:
        tasks = [
            task_lib.Task.from_yaml_config(d, env_overrides,
                                           secrets_overrides) for d in docs
        ]
        if not tasks:
            # A header alone describes one empty task with that name.
            tasks = [task_lib.Task(dag.name)]
        if dag.execution != 'parallel':
            for a, b in zip(tasks, tasks[1:]):
                a >> b  # pylint: disable=pointless-statement
    if dag.name is None and len(tasks) == 1:
        dag.name = tasks[0].name
    return dag


def load_chain_dag_from_yaml_str(
    yaml_str: str,
    env_overrides: task_lib.EnvsArg = None,
    secrets_overrides: task_lib.EnvsArg = None,
) -> dag_lib.Dag:
    from sky import _yaml  # pylint: disable=import-outside-toplevel
    return load_chain_dag_from_yaml_configs(_yaml.load_all(yaml_str),
                                            env_overrides, secrets_overrides)


def load_chain_dag_from_yaml(
    path: str,
    env_overrides: task_lib.EnvsArg = None,
    secrets_overrides: task_lib.EnvsArg = None,
) -> dag_lib.Dag:
    """A Dag from a task, pipeline or job-group YAML file."""
    from sky import _yaml  # pylint: disable=import-outside-toplevel
    with open(os.path.expanduser(path), 'rb') as f:
        data = f.read()
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError:
        raise ValueError(f'{path} is not a valid UTF-8 text file') from None
    return load_chain_dag_from_yaml_configs(_yaml.load_all(text),
                                            env_overrides, secrets_overrides,
                                            source=path)


def dump_chain_dag_to_yaml_str(dag: dag_lib.Dag,
                               redact_secrets: bool = False) -> str:
    """The multi-document YAML of a chain Dag or job group."""
    from sky import _yaml  # pylint: disable=import-outside-toplevel
    return _yaml.dump_all(dag.to_yaml_configs(redact_secrets=redact_secrets))


def dump_chain_dag_to_yaml(dag: dag_lib.Dag, path: str) -> None:
    with open(path, 'w', encoding='utf-8') as f:
        f.write(dump_chain_dag_to_yaml_str(dag))
