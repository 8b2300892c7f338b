"""PyYAML, imported only when a YAML file or string is read or written.

`import sky` stays standard-library only; the first YAML call pays for the
import and fails with a message that says how to get PyYAML.
"""
from typing import Any, List

_INSTALL_HINT = ('reading or writing task YAML needs PyYAML: '
                 'pip install PyYAML, or apt install python3-yaml')


def _module():
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise ImportError(_INSTALL_HINT) from e
    return yaml


def _loader():
    yaml = _module()
    base = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)

    class _UniqueKeyLoader(base):  # type: ignore[misc,valid-type]
        """Rejects duplicate mapping keys, as the server's loader does."""

    def construct_mapping(loader, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                continue  # PyYAML itself reports unhashable keys.
            if key in seen:
                raise ValueError(
                    f'duplicate key {key!r} in YAML mapping (line '
                    f'{key_node.start_mark.line + 1}, first on line '
                    f'{seen[key] + 1})')
            seen[key] = key_node.start_mark.line
        return loader.construct_mapping_orig(node, deep=deep)

    _UniqueKeyLoader.construct_mapping_orig = base.construct_mapping
    _UniqueKeyLoader.add_constructor(
        yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return _UniqueKeyLoader


def load_all(text: str) -> List[Any]:
    """Every document of a YAML stream, empty documents included (as None)."""
    return list(_module().load_all(text, Loader=_loader()))


def load(text: str) -> Any:
    return _module().load(text, Loader=_loader())


def dump(obj: Any) -> str:
    yaml = _module()
    dumper = getattr(yaml, 'CSafeDumper', yaml.SafeDumper)
    return yaml.dump(obj, Dumper=_block_dumper(yaml, dumper),
                     sort_keys=False, default_flow_style=False,
                     allow_unicode=True)


def dump_all(objs: List[Any]) -> str:
    yaml = _module()
    dumper = getattr(yaml, 'CSafeDumper', yaml.SafeDumper)
    return yaml.dump_all(objs, Dumper=_block_dumper(yaml, dumper),
                         sort_keys=False, default_flow_style=False,
                         allow_unicode=True)


def _block_dumper(yaml, base):
    """A dumper that writes multi-line strings (run/setup) as `|` blocks."""

    class _Dumper(base):  # type: ignore[misc,valid-type]
        pass

    def str_representer(dumper, data):
        style = '|' if '\n' in data else None
        return dumper.represent_scalar('tag:yaml.org,2002:str', data,
                                       style=style)

    _Dumper.add_representer(str, str_representer)
    return _Dumper
