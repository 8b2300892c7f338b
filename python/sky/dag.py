"""sky.Dag: tasks and the order they run in.

A Dag is used as a context manager: tasks created inside `with sky.Dag():`
join it, and `a >> b` inside records that b runs after a. What the API
server runs is a chain (a pipeline, or a single task) or a job group (tasks
run together, execution 'parallel'); to_yaml_configs() writes the YAML
documents `sky jobs launch` accepts.
"""
import threading
from typing import Any, Dict, List, Optional, TYPE_CHECKING, Union

if TYPE_CHECKING:
    from sky.task import Task

# Per thread, so that threads building Dags (e.g. a sweep) do not see each
# other's `with` blocks.
_context = threading.local()


def _dag_stack() -> List['Dag']:
    stack = getattr(_context, 'stack', None)
    if stack is None:
        stack = _context.stack = []
    return stack


def get_current_dag() -> Optional['Dag']:
    """The innermost Dag of an active `with sky.Dag():` block, if any."""
    stack = _dag_stack()
    return stack[-1] if stack else None


class Dag:
    """A DAG of tasks; `with Dag() as dag:` collects the tasks made inside."""

    def __init__(self, name: Optional[str] = None) -> None:
        self.name = name
        self._tasks: List['Task'] = []
        self._succ: Dict[int, List['Task']] = {}
        self._pred: Dict[int, List['Task']] = {}
        # 'parallel' marks a job group; None or 'serial' a pipeline.
        self.execution: Optional[str] = None
        # Job-group header fields other than name/execution
        # (primary_tasks, termination_delay), written back as read.
        self.header_extras: Dict[str, Any] = {}

    # -- membership --

    def add(self, task: 'Task') -> None:
        if any(t is task for t in self._tasks):
            return
        self._tasks.append(task)
        self._succ[id(task)] = []
        self._pred[id(task)] = []

    def remove(self, task: 'Task') -> None:
        if not any(t is task for t in self._tasks):
            raise ValueError(f'{task!r} is not in this Dag')
        for t in self._succ.pop(id(task)):
            self._pred[id(t)] = [p for p in self._pred[id(t)] if p is not task]
        for t in self._pred.pop(id(task)):
            self._succ[id(t)] = [s for s in self._succ[id(t)] if s is not task]
        self._tasks = [t for t in self._tasks if t is not task]

    def add_edge(self, op1: 'Task', op2: 'Task') -> None:
        """op2 runs after op1 (what `op1 >> op2` records)."""
        if op1 is op2:
            raise ValueError('a task cannot depend on itself')
        self.add(op1)
        self.add(op2)
        if self._reaches(op2, op1):
            raise ValueError(f'{op1.name or "task"} >> {op2.name or "task"} '
                             f'would make a cycle')
        if not any(t is op2 for t in self._succ[id(op1)]):
            self._succ[id(op1)].append(op2)
            self._pred[id(op2)].append(op1)

    def _reaches(self, src: 'Task', dst: 'Task') -> bool:
        seen, todo = set(), [src]
        while todo:
            t = todo.pop()
            if t is dst:
                return True
            if id(t) not in seen:
                seen.add(id(t))
                todo.extend(self._succ[id(t)])
        return False

    @property
    def tasks(self) -> List['Task']:
        """The tasks in execution order: every task after the ones it
        depends on, otherwise in the order they were added. For a chain this
        is the order of to_yaml_configs()'s task documents."""
        return self.topological_order()

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self):
        return iter(self.tasks)

    def __contains__(self, task: object) -> bool:
        return any(t is task for t in self._tasks)

    def successors(self, task: 'Task') -> List['Task']:
        return list(self._succ[id(task)])

    def predecessors(self, task: 'Task') -> List['Task']:
        return list(self._pred[id(task)])

    # -- context manager --

    def __enter__(self) -> 'Dag':
        _dag_stack().append(self)
        return self

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        # Remove this Dag even if an inner `with` of it is still open.
        stack = _dag_stack()
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is self:
                del stack[i]
                break

    # -- shape --

    def is_chain(self) -> bool:
        """True for zero or one task, or tasks linked t1 >> t2 >> ... >> tn
        with no other edges."""
        return self._chain_order() is not None

    def _chain_order(self) -> Optional[List['Task']]:
        n = len(self._tasks)
        if n <= 1:
            return list(self._tasks)
        edges = sum(len(s) for s in self._succ.values())
        if edges != n - 1:
            return None
        if any(len(s) > 1 for s in self._succ.values()) or any(
                len(p) > 1 for p in self._pred.values()):
            return None
        roots = [t for t in self._tasks if not self._pred[id(t)]]
        if len(roots) != 1:
            return None
        order = [roots[0]]
        while self._succ[id(order[-1])]:
            order.append(self._succ[id(order[-1])][0])
            if len(order) > n:
                return None
        return order if len(order) == n else None

    def topological_order(self) -> List['Task']:
        """Tasks so that every task comes after the ones it depends on."""
        indeg = {id(t): len(self._pred[id(t)]) for t in self._tasks}
        ready = [t for t in self._tasks if indeg[id(t)] == 0]
        out: List['Task'] = []
        while ready:
            t = ready.pop(0)
            out.append(t)
            for s in self._succ[id(t)]:
                indeg[id(s)] -= 1
                if indeg[id(s)] == 0:
                    ready.append(s)
        if len(out) != len(self._tasks):
            raise ValueError('the Dag has a cycle')
        return out

    # -- serialisation --

    def to_yaml_configs(self, redact_secrets: bool = False
                       ) -> List[Dict[str, Any]]:
        """The YAML documents of this Dag, as `sky jobs launch` reads them.

        One task -> [task] (with a header {'name': dag name} first when the
        Dag's name differs from the task's); a chain -> [{'name': dag name},
        t1, t2, ...] (header only when the Dag has a name); a job group
        (execution 'parallel') -> [{'name', 'execution', ...}, job, ...].
        """
        if not self._tasks:
            raise ValueError('the Dag has no tasks: add one with '
                             'dag.add(task) or create tasks inside '
                             '`with sky.Dag():`')
        configs = lambda ts: [  # noqa: E731
            t.to_yaml_config(redact_secrets=redact_secrets) for t in ts
        ]
        if self.execution == 'parallel':
            if self.name is None:
                raise ValueError('a job group (execution: parallel) needs a '
                                 'name: set dag.name')
            header = {
                'name': self.name,
                'execution': 'parallel',
                **self.header_extras
            }
            return [header] + configs(self._tasks)
        order = self._chain_order()
        if order is None:
            raise ValueError(
                f'{self!r} is not a chain: SkyGo runs a Dag as a pipeline '
                f'(t1 >> t2 >> ... , each task at most one predecessor and '
                f'one successor) or as a job group (dag.execution = '
                f'"parallel"); general DAGs are not supported')
        if len(order) == 1 and self.name in (None, order[0].name):
            return configs(order)
        header = [{'name': self.name}] if self.name is not None else []
        return header + configs(order)

    def __repr__(self) -> str:
        names = ', '.join(t.name or '<unnamed>' for t in self._tasks)
        name = f'{self.name!r}, ' if self.name else ''
        return f'Dag({name}tasks=[{names}])'


def as_dag(task_or_dag: Union['Task', Dag]) -> Dag:
    """A Dag as is; a Task wrapped in a new one-task Dag named after it."""
    if isinstance(task_or_dag, Dag):
        return task_or_dag
    from sky.task import Task  # pylint: disable=import-outside-toplevel
    if isinstance(task_or_dag, Task):
        dag = Dag(name=task_or_dag.name)
        dag.add(task_or_dag)
        return dag
    raise TypeError(f'expected a sky.Task or sky.Dag, got '
                    f'{type(task_or_dag).__name__}')
