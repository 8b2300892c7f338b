"""Extracts the ```python blocks of the SkyPilot seeds and checks the
committed copies in this folder against them.

Every ```python fence of python-sdk.md, examples.md and
advanced-patterns.md is one block, classified as:

- ``signature``: a one-line block that starts with ``sky.`` (the
  reference's typed signature, e.g. ``sky.launch(task: Union[...]) ->
  ...``; not Python: annotations inside a call and ``->``).
- ``shape``: a block that starts with ``{`` or ``[`` (a documented return
  structure, ``'name': (str) cluster name``); its top-level keys are the
  fields the acceptance test asserts on.
- ``node-script``: runnable Python that does not import sky (a training
  script a task runs on its nodes, e.g. train_ray.py): not an SDK example.
- ``example``: everything else — a script that imports sky. These are the
  acceptance examples, committed here as NN_<slug>.py.

The seeds' fences inside docstrings are indented by one space and never
closed: such a block ends at its first blank line after content. The
seeds also flatten indentation (any depth is one space), so the committed
copies restore it, and the comparison is made per line with leading
whitespace stripped, after applying the manifest's rewrites.

Run ``python3 extract.py`` to print the classification and ``--check`` to
compare with the committed copies (needs the seeds: SKYGO_SHARED or
../shared beside the checkout).
"""
import difflib
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = ('python-sdk.md', 'examples.md', 'advanced-patterns.md')
# The first lines of a committed example that start with this marker are
# its provenance header, not seed text.
HEADER = '# seed-example:'


def shared_dir():
    """The shared folder (SKYGO_SHARED, else ../shared beside the checkout),
    or None when it has no seeds/ folder."""
    d = os.environ.get('SKYGO_SHARED')
    if not d:
        repo = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
        d = os.path.join(os.path.dirname(repo), 'shared')
    return d if os.path.isdir(os.path.join(d, 'seeds')) else None


def blocks(path):
    """Yields (line, text) for every ```python fence of a markdown file;
    line is the 1-based line of the fence."""
    with open(path, encoding='utf-8') as f:
        lines = f.read().split('\n')
    i = 0
    while i < len(lines):
        fence = lines[i]
        if fence.strip() != '```python':
            i += 1
            continue
        indented = fence.startswith(' ')
        body = []
        j = i + 1
        while j < len(lines):
            line = lines[j]
            if line.strip().startswith('```'):
                break
            if indented and not line.strip() and any(b.strip() for b in body):
                break
            body.append(line)
            j += 1
        while body and not body[0].strip():
            body.pop(0)
        while body and not body[-1].strip():
            body.pop()
        yield i + 1, '\n'.join(body)
        # A closing fence is consumed; an opening one starts the next block.
        i = j + 1 if j < len(lines) and lines[j].strip() == '```' else j


def classify(text):
    first = text.lstrip()
    if '\n' not in text.strip() and first.startswith('sky.'):
        return 'signature'
    if first.startswith(('{', '[')):
        return 'shape'
    if not re.search(r'^\s*import sky\b', text, re.M):
        return 'node-script'
    return 'example'


def shape_fields(text):
    """The top-level keys of a documented return structure."""
    depth, keys = 0, []
    for line in text.split('\n'):
        m = re.match(r"\s*'(\w+)':", line)
        if m:
            keys.append((depth, m.group(1)))
        depth += line.count('{') + line.count('[') - line.count('}') - line.count(']')
    top = min(d for d, _ in keys)
    return [k for d, k in keys if d == top]


def seed_blocks(shared):
    """Every block of the three seeds: dicts with seed, line, kind, text."""
    out = []
    for seed in SEEDS:
        for line, text in blocks(os.path.join(shared, 'seeds', seed)):
            out.append({'seed': seed, 'line': line, 'kind': classify(text), 'text': text})
    return out


def load_manifest():
    with open(os.path.join(HERE, 'manifest.json'), encoding='utf-8') as f:
        return json.load(f)


def apply_rewrites(text, rewrites):
    """The seed text with the manifest's rewrites applied; a rewrite whose
    'from' is not in the text is stale and raises."""
    for rw in rewrites:
        if rw['from'] not in text:
            raise ValueError('rewrite %r does not occur in the seed block' % rw['from'])
        text = text.replace(rw['from'], rw['to'])
    return text


def normalize(text):
    """Lines with leading/trailing whitespace stripped, blank lines dropped:
    the seeds keep no indentation depth, so neither does the comparison."""
    return [l.strip() for l in text.split('\n') if l.strip()]


def committed_body(name):
    with open(os.path.join(HERE, name), encoding='utf-8') as f:
        lines = f.read().split('\n')
    while lines and lines[0].startswith(HEADER):
        lines.pop(0)
    return '\n'.join(lines)


def check(shared):
    """Compares the seeds with the manifest and the committed copies;
    returns a list of problems (empty when everything matches)."""
    manifest = load_manifest()
    problems = []
    by_place = {(e['seed'], e['line']): e for e in manifest['examples']}
    other = {(b['seed'], b['line']): b for b in manifest['other_blocks']}
    seen = set()
    for b in seed_blocks(shared):
        place = (b['seed'], b['line'])
        seen.add(place)
        if b['kind'] == 'example':
            e = by_place.get(place)
            if e is None:
                problems.append('%s:%d: an example the manifest does not list' % place)
                continue
            try:
                want = normalize(apply_rewrites(b['text'], e.get('rewrites', [])))
            except ValueError as err:
                problems.append('%s:%d (%s): %s' % (place + (e['file'], err)))
                continue
            got = normalize(committed_body(e['file']))
            if want != got:
                diff = difflib.unified_diff(want, got, 'seed (with its rewrites)', e['file'], lineterm='', n=1)
                problems.append('%s:%d: %s differs from the seed:\n  %s'
                                % (place + (e['file'], '\n  '.join(diff))))
        else:
            o = other.get(place)
            if o is None or o['kind'] != b['kind']:
                problems.append('%s:%d: a %s block the manifest does not list as such' % (place + (b['kind'],)))
            elif b['kind'] == 'shape' and o.get('fields') != shape_fields(b['text']):
                problems.append('%s:%d: documented fields changed: %s' % (place + (shape_fields(b['text']),)))
    for place in list(by_place) + list(other):
        if place not in seen:
            problems.append('%s:%d: listed in the manifest but no such block in the seed' % place)
    return problems


def main(argv):
    shared = shared_dir()
    if shared is None:
        print('seeds not found: set SKYGO_SHARED to a folder holding seeds/', file=sys.stderr)
        return 2
    if '--check' in argv:
        problems = check(shared)
        for p in problems:
            print(p)
        return 1 if problems else 0
    for b in seed_blocks(shared):
        extra = ''
        if b['kind'] == 'shape':
            extra = ' fields=' + ','.join(shape_fields(b['text']))
        elif b['kind'] != 'signature':
            extra = ' ' + b['text'].split('\n')[0][:60]
        else:
            extra = ' ' + b['text'].split('(')[0]
        print('%s:%d %s%s' % (b['seed'], b['line'], b['kind'], extra))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
